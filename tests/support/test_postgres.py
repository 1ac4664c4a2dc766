"""The tests' PostgreSQL: a throwaway cluster on any machine, a fresh database per test."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.support.postgres import (
    ENV_URL,
    connect_error,
    find_binaries,
    fresh_database,
    throwaway_cluster,
)
from tests.support.processes import ROOT, refused_port


@pytest.mark.processes  # a PostgreSQL cluster
def test_a_throwaway_cluster_starts_takes_a_database_and_leaves_nothing_behind() -> None:
    binaries = find_binaries()
    assert binaries is not None, "no PostgreSQL binaries: run `make postgres`"

    with throwaway_cluster(binaries) as admin_url:
        port = urlsplit(admin_url).port
        assert port is not None and port != 5432
        with psycopg.connect(admin_url, autocommit=True) as conn:
            directory = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))
        assert directory.is_dir()
        with fresh_database(admin_url) as url, psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (1)")
            assert conn.execute("SELECT n FROM kept").fetchall() == [(1,)]

    assert not directory.parent.exists()
    assert connect_error(admin_url) is not None
    with socket.socket() as sock:  # the port is free again: the server is gone
        # SO_REUSEADDR: the closed connections' TIME_WAIT stays, but no listener may.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_each_test_gets_an_empty_database_of_its_own(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        name = conn.execute("SELECT current_database()").fetchone()
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()

    assert name is not None and name[0].startswith("test_")
    assert tables == (0,)


def test_a_fresh_database_is_dropped_even_with_a_connection_left_open(
    postgres_admin_url: str,
) -> None:
    with fresh_database(postgres_admin_url) as url:
        left_open = psycopg.connect(url)
        name = urlsplit(url).path.lstrip("/")

    with psycopg.connect(postgres_admin_url) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchall()
    assert found == []
    with pytest.raises(psycopg.OperationalError):
        left_open.execute("SELECT 1")
    left_open.close()


@pytest.mark.processes  # a pytest process
def test_with_no_server_on_the_default_port_the_fixtures_start_their_own(tmp_path: Path) -> None:
    # The decision as a fresh machine meets it: no variable, nothing on the default port.
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "def test_probe(postgres_url):\n"
        "    import psycopg\n"
        "    with psycopg.connect(postgres_url) as conn:\n"
        "        print('PORT', conn.execute('SHOW port').fetchone()[0])\n"
    )
    script = (
        "import sys, pytest, tests.support.postgres as pg\n"
        "pg.LOCAL_URL = sys.argv[1]\n"
        "sys.exit(pytest.main(['-q', '-s', '-p', 'no:cacheprovider',"
        f" '-p', 'tests.support.postgres', '--rootdir', {str(tmp_path)!r}, {str(probe)!r}]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV_URL}

    with refused_port() as dead_port:
        done = subprocess.run(
            [sys.executable, "-c", script, f"postgresql://postgres@127.0.0.1:{dead_port}/postgres"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert done.returncode == 0, done.stdout + done.stderr
    port = re.search(r"PORT (\d+)", done.stdout)
    assert port is not None and port.group(1) not in ("5432", str(dead_port))
