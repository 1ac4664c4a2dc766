"""`react-agent prune` refusing what it cannot prune: bad arguments, a database that is
not there. What it prunes, with a server on the database, is tests/service/test_prune.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_cli
from tests.support.processes import refused_port

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def test_prune_refuses_an_sqlite_file_that_is_not_there_and_creates_none(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    missing = tmp_path / "nothing" / "agent.sqlite"

    done = run_cli({**cli_env, "AGENT_DB": str(missing)}, "prune")

    assert done.returncode == 1
    assert done.stderr == f"react-agent prune: no database at {missing}\n"
    assert not missing.parent.exists()


def test_prune_names_a_postgres_database_it_cannot_reach_without_its_password(
    cli_env: dict[str, str],
) -> None:
    with refused_port() as port:
        nowhere = f"postgresql://agent:s3cret-pw@127.0.0.1:{port}/agent"
        done = run_cli({**cli_env, "AGENT_DB": nowhere}, "prune")

    assert done.returncode == 1
    assert done.stderr.startswith("react-agent prune: cannot connect to the PostgreSQL database")
    assert "s3cret-pw" not in done.stderr + done.stdout


@pytest.mark.parametrize("args", [("--keep", "0"), ("--idle-days", "0"), ("--keep", "x")])
def test_prune_refuses_a_keep_below_one_or_an_age_of_nothing(
    cli_env: dict[str, str], args: tuple[str, ...]
) -> None:
    done = run_cli(cli_env, "prune", *args)

    assert done.returncode == 2
    assert "usage: react-agent prune" in done.stderr
