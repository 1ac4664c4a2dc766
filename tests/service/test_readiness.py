"""`GET /readyz`: ready when the database answers, not while it does not or while draining."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from app.http.server import create_app
from app.settings import Settings
from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import SQLITE, Backend, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

DEADLINE_S = 30.0  # the pool reconnects with a back-off of its own
POLL_S = 0.1


@pytest.fixture(scope="module")
def lockable(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServerProcess, Path]]:
    data_dir = tmp_path_factory.mktemp("readiness")
    # SQLite only: the test holds the file's write lock, which PostgreSQL has no form of.
    process = ServerProcess(server_env(_llm_server, _meteo_server, data_dir, backend=SQLITE))
    yield process, data_dir / "agent.sqlite"
    process.stop()


def readiness_becomes(server: ServerProcess, status: int) -> httpx.Response:
    """Poll /readyz until it answers `status`; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        ready = httpx.get(f"{server.url}/readyz", timeout=10)
        if ready.status_code == status:
            return ready
        if time.monotonic() > deadline:
            raise AssertionError(f"/readyz still answers {ready.status_code}: {ready.text}")
        time.sleep(POLL_S)  # polling interval, not a wait for a result


def test_a_server_whose_database_answers_is_ready_without_a_key(server: ServerProcess) -> None:
    ready = httpx.get(f"{server.url}/readyz")

    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


def test_a_database_another_writer_holds_makes_it_not_ready_until_released(
    lockable: tuple[ServerProcess, Path],
) -> None:
    server, db = lockable
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the database
        locked = httpx.get(f"{server.url}/readyz", timeout=10)
        alive = httpx.get(f"{server.url}/healthz")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert locked.status_code == 503
    assert locked.json() == {"status": "not_ready", "reason": "database"}
    assert alive.status_code == 200
    assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
    assert "readiness: the database did not answer" in server.log_text


def test_a_postgres_database_that_refuses_connections_makes_it_not_ready_until_it_takes_them(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path: Path,
    postgres_admin_url: str,
) -> None:
    with ExitStack() as cleanup:
        backend = Backend("postgres", postgres_admin_url, cleanup)
        server = ServerProcess(server_env(_llm_server, _meteo_server, tmp_path, backend=backend))
        cleanup.callback(server.stop)
        name = urlsplit(backend.agent_db(tmp_path)).path.lstrip("/")
        admin = cleanup.enter_context(psycopg.connect(postgres_admin_url, autocommit=True))

        def allow(allowed: bool) -> None:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {allowed}'.encode())

        ready = httpx.get(f"{server.url}/readyz")
        allow(False)
        cleanup.callback(allow, True)
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )
        refused = readiness_becomes(server, 503)
        alive = httpx.get(f"{server.url}/healthz")
        allow(True)
        again = readiness_becomes(server, 200)

    assert (ready.status_code, again.json()) == (200, {"status": "ready"})
    assert refused.json() == {"status": "not_ready", "reason": "database"}
    assert alive.status_code == 200
    assert "readiness: the database did not answer" in server.log_text


def test_a_draining_service_is_not_ready_and_takes_no_new_run() -> None:
    app = create_app(Settings())
    with ServerThread(app) as served:

        async def drain() -> None:
            app.state.service.begin_shutdown()

        assert httpx.get(f"{served.url}/readyz").status_code == 200
        asyncio.run_coroutine_threadsafe(drain(), served.loop).result(timeout=5)

        draining = httpx.get(f"{served.url}/readyz")
        alive = httpx.get(f"{served.url}/healthz")
        refused = httpx.post(f"{served.url}/api/chat", json={"graph": "weather", "message": "hi"})

    assert (draining.status_code, draining.json()) == (
        503,
        {"status": "not_ready", "reason": "draining"},
    )
    assert alive.status_code == 200
    assert (refused.status_code, refused.json()["code"]) == (503, "shutting_down")
