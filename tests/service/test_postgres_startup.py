"""Start-up against a PostgreSQL server that refuses the password: one line naming the
database (never the password) and exit status 2, like any other configuration error."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg
import pytest

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import env_for_subprocess
from tests.support.postgres import ProvisioningError, connect_error, throwaway_cluster

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

REACT_AGENT = str(Path(sys.executable).with_name("react-agent"))
ROOT = Path(__file__).resolve().parents[2]
RIGHT = "the-Right-pass-4f2a"
WRONG = "not-the-Pass-9c1e7"
CHECKS_PASSWORDS = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"


def with_password(url: str, password: str) -> str:
    """`url` with `password` in its user part."""
    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:{quote(password, safe='')}@{hosts}").geturl()


@pytest.fixture(scope="module")
def checking_server(postgres_admin_url: str) -> Iterator[str]:
    """The admin URL of a server that checks passwords: the tests' own if it does; else
    (trust lets any password in) a throwaway cluster switched to scram-sha-256."""
    if connect_error(with_password(postgres_admin_url, WRONG)) is not None:
        yield postgres_admin_url
        return
    try:
        with throwaway_cluster() as url:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"ALTER ROLE postgres PASSWORD '{RIGHT}'".encode())
                row = conn.execute("SHOW hba_file").fetchone()
                assert row is not None
                Path(row[0]).write_text(CHECKS_PASSWORDS)
                conn.execute("SELECT pg_reload_conf()")
            yield url
    except ProvisioningError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.mark.parametrize(
    "command", [["serve", "--port", "0"], ["chat", "weather", "-m", "你好"]], ids=["serve", "chat"]
)
def test_a_wrong_postgres_password_stops_start_up_with_one_line_and_exit_2(
    command: list[str],
    checking_server: str,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
) -> None:
    agent_db = with_password(checking_server, WRONG)
    env = env_for_subprocess(llm, meteo, data_dir, AGENT_DB=agent_db)

    done = subprocess.run(
        [REACT_AGENT, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    shown = urlsplit(checking_server)
    where = f"postgresql://{shown.username}@{shown.netloc.rpartition('@')[2]}{shown.path}"
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(
        f"react-agent: configuration error: AGENT_DB: cannot connect to the PostgreSQL"
        f" database {where}: "
    ), line
    assert "password authentication failed" in line
    assert WRONG not in done.stderr and quote(WRONG) not in done.stderr
    assert llm.requests == []
