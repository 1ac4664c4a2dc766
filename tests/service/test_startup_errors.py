"""Start-up that cannot succeed: one line naming the variable and what to do, exit 2.

An AGENT_DB file that cannot be opened and a port already taken were a 40-line traceback
and `Application startup complete.` followed by `[Errno 98] address already in use`.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import env_for_subprocess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

REACT_AGENT = str(Path(sys.executable).with_name("react-agent"))
ROOT = Path(__file__).resolve().parents[2]


def react_agent(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [REACT_AGENT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def the_one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused start-up wrote (nothing on stdout, no traceback)."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on."""
    with socket.create_server(("127.0.0.1", 0)) as other:
        yield other.getsockname()[1]


def unopenable(kind: str, data_dir: Path) -> Path:
    """An AGENT_DB path SQLite cannot open: a directory, a file where a directory should
    be, or a file that is not a database."""
    if kind == "directory":
        return data_dir
    blocker = data_dir / "blocker"
    blocker.write_text("not a directory")
    if kind == "under a file":
        return blocker / "agent.sqlite"
    garbage = data_dir / "garbage.sqlite"
    garbage.write_bytes(b"this is not an SQLite database, only text " * 40)
    return garbage


@pytest.mark.parametrize("kind", ["directory", "under a file", "not a database"])
@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["chat", "weather", "-m", "你好"]])
def test_an_agent_db_file_that_cannot_be_opened_is_one_line_naming_it_and_exit_2(
    kind: str,
    command: list[str],
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
) -> None:
    path = unopenable(kind, data_dir)
    done = react_agent(env_for_subprocess(llm, meteo, data_dir, AGENT_DB=str(path)), *command)
    line = the_one_line(done)
    assert line.startswith(
        f"react-agent: configuration error: AGENT_DB: cannot open the SQLite file {path} ("
    ), line
    assert line.endswith("set AGENT_DB to a file path in a directory this process can write to")
    assert llm.requests == []


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_already_taken_is_one_line_naming_it_and_exit_2(
    workers: str, taken_port: int, llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path
) -> None:
    env = env_for_subprocess(llm, meteo, data_dir)
    done = react_agent(env, "serve", "--port", str(taken_port), "--workers", workers)
    assert the_one_line(done) == (
        f"react-agent: configuration error: PORT: 127.0.0.1:{taken_port} is already in use "
        "(another server?): stop it, or choose another port with --port or PORT"
    )


def test_an_address_of_no_interface_here_is_one_line_naming_host_and_exit_2(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path
) -> None:
    env = env_for_subprocess(llm, meteo, data_dir)
    done = react_agent(env, "serve", "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1
    line = the_one_line(done)
    assert line.startswith("react-agent: configuration error: HOST: cannot listen on 192.0.2.1:0 (")
    assert line.endswith("choose another address with --host or HOST")
