"""A database lost under a running server: the calls answer 503 `storage_unavailable` as
JSON within AGENT_DB_TIMEOUT_S (not the pool's or SQLite's 30 s), an open stream ends
with RUN_ERROR, and once a PostgreSQL database is back (empty) the server puts its schema
back before it says it is ready, and the calls work again. Nothing answers plain text."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from fastapi.routing import APIRoute
from psycopg import sql

from app.http.server import create_app
from app.settings import Settings
from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM, held, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import (
    SQLITE,
    SQLITE_FILE,
    Api,
    Backend,
    Stream,
    parse_sse,
    run_body,
    server_env,
)
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# Well under the pool's own default (30 s): the server's default AGENT_DB_TIMEOUT_S (5 s)
# plus a loaded machine's slack.
ANSWER_S = 15.0
DEADLINE_S = 60.0
POLL_S = 0.1


@dataclass
class Served:
    """A server on a PostgreSQL database of its own, and what drops and re-creates it."""

    server: ServerProcess
    api: Api
    name: str
    admin: psycopg.Connection[Any]
    env: dict[str, str]

    def drop(self) -> None:
        """The database goes, its connections (the server's pool) with it."""
        self.admin.execute(
            sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(self.name))
        )

    def recreate(self) -> None:
        """The database is back, empty: no tables at all."""
        self.admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))


@pytest.fixture
def served(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, postgres_admin_url: str
) -> Iterator[Served]:
    with ExitStack() as cleanup:
        backend = Backend("postgres", postgres_admin_url, cleanup)
        url = backend.agent_db(tmp_path)
        env = server_env(llm, meteo, tmp_path, backend=backend)
        server = ServerProcess(env)
        cleanup.callback(server.stop)
        api = Api(server)
        cleanup.callback(api.close)
        admin = cleanup.enter_context(psycopg.connect(postgres_admin_url, autocommit=True))
        yield Served(server, api, urlsplit(url).path.lstrip("/"), admin, env)


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def chat(api: Api, llm: ScriptedLLM, answer: str) -> httpx.Response:
    llm.script(text(answer))
    return api.chat(graph="weather", message="你好")


def readiness_becomes(server: ServerProcess, status: int) -> httpx.Response:
    """Poll /readyz until it answers `status`; fail after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        ready = httpx.get(f"{server.url}/readyz", timeout=ANSWER_S)
        if ready.status_code == status:
            return ready
        if time.monotonic() > deadline:
            raise AssertionError(f"/readyz still answers {ready.status_code}: {ready.text}")
        time.sleep(POLL_S)  # polling interval, not a wait for a result


def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def test_calls_answer_503_storage_unavailable_as_json_within_seconds_once_the_database_is_dropped(
    served: Served, llm: ScriptedLLM
) -> None:
    assert chat(served.api, llm, "好的。").status_code == 200
    served.drop()

    listed, listing_s = timed(lambda: served.api.http.get("/api/threads"))
    sent, sending_s = timed(lambda: served.api.chat(graph="weather", message="还在吗？"))
    ready = httpx.get(f"{served.server.url}/readyz", timeout=ANSWER_S)

    for response, took in ((listed, listing_s), (sent, sending_s)):
        assert response.status_code == 503, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.json()["code"] == "storage_unavailable"
        assert int(response.headers["retry-after"]) > 0
        assert took < ANSWER_S
    assert (ready.status_code, ready.json()) == (503, {"status": "not_ready", "reason": "database"})
    assert "Internal Server Error" not in listed.text + sent.text


def test_an_open_stream_ends_with_run_error_when_its_database_is_dropped(
    served: Served, llm: ScriptedLLM, background: ThreadPoolExecutor
) -> None:
    # The reply after the tool's result waits until the database is gone.
    llm.script(tool_call("get_weather", {"location": "北京"}), held(text("北京晴。")))
    body = run_body("t-lost-stream", ("u1", "北京天气？"))
    streaming: Future[Stream] = background.submit(served.api.run, "weather", body)
    llm.wait_for_requests(2, within_s=DEADLINE_S)

    served.drop()
    llm.release()
    stream = streaming.result(DEADLINE_S)

    assert stream.status == 200
    assert "TOOL_CALL_RESULT" in stream.types
    assert stream.last["type"] == "RUN_ERROR", stream.types
    assert stream.last["code"] == "storage_unavailable"


def test_a_stream_rejoined_on_another_replica_ends_with_run_error_when_the_database_is_dropped(
    served: Served, llm: ScriptedLLM, background: ThreadPoolExecutor
) -> None:
    # The run is the first server's; the second follows its log through the database.
    replica = ServerProcess(served.env)
    follower = Api(replica)
    stream = Stream(status=0)
    try:
        llm.script(tool_call("get_weather", {"location": "北京"}), held(text("北京晴。")))
        body = run_body("t-lost-rejoin", ("u1", "北京天气？"))
        background.submit(served.api.run, "weather", body)
        llm.wait_for_requests(2, within_s=DEADLINE_S)
        path = f"/api/threads/{body['threadId']}/runs/{body['runId']}/stream"
        with follower.http.stream("GET", path) as response:
            stream.status = response.status_code
            for event in parse_sse(response.iter_lines(), stream):
                if event["type"] == "TOOL_CALL_RESULT":
                    served.drop()  # the follower has read the log up to here
        llm.release()
    finally:
        follower.close()
        replica.stop()

    assert stream.status == 200
    assert "TOOL_CALL_RESULT" in stream.types
    assert stream.last["type"] == "RUN_ERROR", stream.types
    assert stream.last["code"] == "storage_unavailable"
    # Numbered as the last event the log had: a rejoin from there misses nothing.
    assert stream.ids[-1] == stream.ids[-2]


def test_a_database_recreated_empty_gets_its_schema_back_before_the_server_says_ready(
    served: Served, llm: ScriptedLLM
) -> None:
    assert chat(served.api, llm, "第一次。").status_code == 200
    served.drop()
    readiness_becomes(served.server, 503)

    served.recreate()
    ready = readiness_becomes(served.server, 200)
    listed = served.api.http.get("/api/threads")
    again = chat(served.api, llm, "又好了。")

    assert ready.json() == {"status": "ready"}
    assert (listed.status_code, listed.json()) == (200, [])  # the database came back empty
    assert again.status_code == 200, again.text
    assert again.json()["messages"][-1]["content"] == "又好了。"
    assert "re-created the database schema" in served.server.log_text


def test_a_sqlite_file_another_writer_holds_answers_503_within_the_timeout_not_30_s(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path
) -> None:
    # SQLite: the file's write lock, which PostgreSQL has no form of, held by another program.
    env = server_env(llm, meteo, tmp_path, backend=SQLITE, AGENT_DB_TIMEOUT_S="1")
    server = ServerProcess(env)
    api = Api(server)
    holder = sqlite3.connect(tmp_path / SQLITE_FILE, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        sent, took = timed(lambda: api.chat(graph="weather", message="你好"))
        holder.execute("ROLLBACK")
        again = chat(api, llm, "好了。")
    finally:
        holder.close()
        api.close()
        server.stop()

    assert sent.status_code == 503, sent.text
    assert sent.json()["code"] == "storage_unavailable"
    assert took < ANSWER_S
    assert again.status_code == 200, again.text


def test_a_failure_nothing_names_answers_a_json_500_not_plain_text() -> None:
    app = create_app(Settings())

    async def broken() -> None:
        raise RuntimeError("a bug")

    app.router.routes.insert(0, APIRoute("/broken", broken))  # before the web UI's catch-all
    with ServerThread(app) as served:
        answer = httpx.get(f"{served.url}/broken")

    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["code"] == "internal_error"
    assert "a bug" not in answer.text
