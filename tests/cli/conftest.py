"""The CLI as a real process: in a pseudo-terminal (pexpect) or with pipes, against the doubles."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import env_for_subprocess
from tests.support.processes import REACT_AGENT, ServerProcess

ROOT = Path(__file__).resolve().parents[2]
STEP_S = 15  # bound of one pexpect step: start-up imports take ~2 s on a busy machine
ROWS = 40
COLUMNS = 200

THREAD_ID = re.compile(r"--thread ([0-9a-f]{32})")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
CHAT_PROMPT = "你>"
DOWN = "\x1b[B"
CTRL_C = "\x03"
CTRL_D = "\x04"


@pytest.fixture
def cli_env(llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path) -> dict[str, str]:
    """The CLI's environment: the doubles, a colour terminal, no cursor-position requests."""
    return env_for_subprocess(
        llm, meteo, data_dir, TERM="xterm-256color", PROMPT_TOOLKIT_NO_CPR="1"
    )


def on_screen(text: str) -> re.Pattern[str]:
    """A pattern for `text` as a terminal receives it: escape sequences may come between."""
    return re.compile(f"(?:{ANSI.pattern})*".join(re.escape(char) for char in text))


class Terminal:
    """`react-agent ARGS` in a pseudo-terminal 40 rows high and `columns` wide."""

    def __init__(self, env: dict[str, str], *args: str, columns: int = COLUMNS) -> None:
        self.child = pexpect.spawn(
            REACT_AGENT,
            list(args),
            env=env,
            cwd=str(ROOT),
            dimensions=(ROWS, columns),
            encoding="utf-8",
            timeout=STEP_S,
        )

    def expect(self, text: str, timeout: float = STEP_S) -> str:
        """Wait for `text` on the screen (styles may change inside it); return what came before."""
        self.child.expect(on_screen(text), timeout=timeout)
        return ANSI.sub("", self.child.before or "")

    def thread_id(self) -> str:
        """The thread id the CLI prints at start."""
        self.child.expect(THREAD_ID.pattern)
        match = self.child.match
        assert match is not None
        return str(match.group(1))

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def line(self, text: str) -> None:
        self.child.send(text + "\r")

    def exit_code(self) -> int:
        """Wait for the process to end; its exit status."""
        self.child.expect(pexpect.EOF)
        self.child.close()
        status = self.child.exitstatus
        assert status is not None, f"killed by signal {self.child.signalstatus}"
        return int(status)

    def close(self) -> None:
        if self.child.isalive():
            self.child.terminate(force=True)


@pytest.fixture
def cli(cli_env: dict[str, str]) -> Iterator[Callable[..., Terminal]]:
    """Opens `react-agent ARGS` in a terminal (`cli(*args, env=..., columns=...)`).

    All are killed at the end.
    """
    opened: list[Terminal] = []

    def open_terminal(
        *args: str, env: dict[str, str] | None = None, columns: int = COLUMNS
    ) -> Terminal:
        term = Terminal(cli_env if env is None else env, *args, columns=columns)
        opened.append(term)
        return term

    yield open_terminal
    for term in opened:
        term.close()


def run_cli(
    env: dict[str, str], *args: str, stdin: str = "", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`react-agent ARGS` with stdin (fed `stdin`), stdout and stderr not terminals."""
    return subprocess.run(
        [REACT_AGENT, *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def server(cli_env: dict[str, str]) -> Iterator[str]:
    """A real `react-agent serve` on the doubles; its base URL."""
    process = ServerProcess(cli_env)
    try:
        yield process.url
    finally:
        process.stop()
