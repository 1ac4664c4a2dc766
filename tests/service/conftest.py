"""`react-agent serve` as a real process, and an SSE-reading HTTP client.

One server per test module (`server`), started against the session's LLM and
Open-Meteo doubles with a bearer key, a recognisable OpenAI key (so tests can prove
it never leaks) and no model retries (so failures are fast).

Every server runs once on each storage backend: `backend` (module-scoped, `[sqlite]`
and `[postgres]`) says where, and `server_env` takes it, so a test or fixture that
starts a server is parametrized by asking for it. A PostgreSQL server gets a database
of its own (`Backend.agent_db`), dropped with the module.
"""

from __future__ import annotations

import codecs
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.otlp import OtlpReceiver
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.env import env_for_subprocess
from tests.support.postgres import fresh_database
from tests.support.processes import SERVE, ServerProcess

API_KEY = "agent-key-4d1f0c7e"
OPENAI_SECRET = "sk-test-SECRET-9f8e7d6c5b4a"
KEEPALIVE_S = 0.2
UI_ORIGIN = "http://ui.example"


BACKENDS = ("sqlite", "postgres")
SQLITE_FILE = "agent.sqlite"


class Backend:
    """Where this module's servers keep checkpoints and runs: `sqlite` or `postgres`."""

    def __init__(
        self, name: str, admin_url: str | None = None, cleanup: ExitStack | None = None
    ) -> None:
        self.name = name
        self._admin_url = admin_url
        self._cleanup = cleanup or ExitStack()
        self._databases: dict[Path, str] = {}

    def agent_db(self, data_dir: Path) -> str:
        """AGENT_DB for the server(s) of `data_dir`: its SQLite file, or a PostgreSQL
        database made for it on first use (a restart on `data_dir` finds it again)."""
        if self._admin_url is None:
            return str(data_dir / SQLITE_FILE)
        if data_dir not in self._databases:
            self._databases[data_dir] = self._cleanup.enter_context(fresh_database(self._admin_url))
        return self._databases[data_dir]

    def query(self, data_dir: Path, statement: str) -> list[tuple[Any, ...]]:
        """The rows of one query on the database of `data_dir`'s servers."""
        if self._admin_url is None:
            with closing(sqlite3.connect(data_dir / SQLITE_FILE)) as conn:
                return conn.execute(statement).fetchall()
        with psycopg.connect(self.agent_db(data_dir), autocommit=True) as conn:
            return conn.execute(statement.encode()).fetchall()

    def execute(self, data_dir: Path, statement: str) -> None:
        """Run one SQL statement on the database of `data_dir`'s servers."""
        if self._admin_url is None:
            with sqlite3.connect(data_dir / SQLITE_FILE) as conn:
                conn.execute(statement)
        else:
            with psycopg.connect(self.agent_db(data_dir), autocommit=True) as conn:
                conn.execute(statement.encode())


# For the few servers that must run on SQLite: each says why where it uses this.
SQLITE = Backend("sqlite")


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The storage backend of the module's servers (each module runs once per backend)."""
    admin_url = (
        request.getfixturevalue("postgres_admin_url") if request.param == "postgres" else None
    )
    with ExitStack() as cleanup:
        yield Backend(request.param, admin_url, cleanup)


def server_env(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path, *, backend: Backend, **extra: str
) -> dict[str, str]:
    """The child's environment: the doubles, the backend's database, plus this suite's
    key, secret and timings."""
    base = {
        "AGENT_DB": backend.agent_db(data_dir),
        "AGENT_API_KEY": API_KEY,
        "OPENAI_API_KEY": OPENAI_SECRET,
        "OPENAI_MAX_RETRIES": "0",
        "AGENT_SSE_KEEPALIVE_S": str(KEEPALIVE_S),
        "AGENT_CORS_ORIGINS": UI_ORIGIN,
    }
    return env_for_subprocess(llm, meteo, data_dir, **{**base, **extra})


@pytest.fixture(scope="module")
def otlp() -> Iterator[OtlpReceiver]:
    """An OTLP/HTTP trace receiver for the module's servers."""
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
    request: pytest.FixtureRequest,
) -> Iterator[ServerProcess]:
    """The module's server process (a fresh database per module and backend), with the
    module's `SERVER_ENV` (a dict of variables) added to the suite's environment."""
    data_dir = tmp_path_factory.mktemp("service")
    extra: dict[str, str] = getattr(request.module, "SERVER_ENV", {})
    with serving(_llm_server, _meteo_server, data_dir, backend, **extra) as process:
        yield process


@contextmanager
def serving(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    backend: Backend,
    *,
    command: Sequence[str] = SERVE,
    **extra: str,
) -> Iterator[ServerProcess]:
    """A server (`command`) on this suite's environment plus `extra`, stopped when the
    block ends."""
    env = server_env(llm, meteo, data_dir, backend=backend, **extra)
    process = ServerProcess(env, command=command)
    try:
        yield process
    finally:
        process.stop()


# What a module's Tushare MCP double wants: tests that prove it never leaks look for it.
TUSHARE_TOKEN = "tushare-token-service-3b9d"


@pytest.fixture(scope="module")
def mcp() -> Iterator[TushareMCP]:
    """The module's Tushare MCP double, wanting TUSHARE_TOKEN."""
    with TushareMCP(token=TUSHARE_TOKEN) as double:
        yield double


@contextmanager
def serving_tushare(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    mcp: TushareMCP,
    data_dir: Path,
    backend: Backend,
    **extra: str,
) -> Iterator[ServerProcess]:
    """`serving`, with the tushare agent on `mcp` and its token."""
    with serving(
        llm, meteo, data_dir, backend, TUSHARE_MCP_URL=mcp.url, TUSHARE_TOKEN=TUSHARE_TOKEN, **extra
    ) as process:
        yield process


@dataclass
class Stream:
    """What one SSE response carried: the events, the comment lines, the raw bytes."""

    status: int
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[int | None] = field(default_factory=list)  # each event's `id:` (None: none)
    comments: list[str] = field(default_factory=list)
    raw: bytes = b""
    body: Any = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    @property
    def last(self) -> dict[str, Any]:
        return self.events[-1]

    def args_by_call(self) -> dict[str, str]:
        """toolCallId -> the concatenation of its TOOL_CALL_ARGS deltas."""
        args: dict[str, str] = {}
        for event in self.events:
            if event["type"] == "TOOL_CALL_START":
                args[event["toolCallId"]] = ""
            elif event["type"] == "TOOL_CALL_ARGS":
                args[event["toolCallId"]] += event["delta"]
        return args


def parse_sse(lines: Iterator[str], stream: Stream) -> Iterator[dict[str, Any]]:
    """Yield each event's JSON data as it completes (comments are recorded, not yielded)."""
    data: list[str] = []
    event_id: int | None = None
    for line in lines:
        if line.startswith(":"):
            stream.comments.append(line[1:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line == "" and data:
            event = json.loads("\n".join(data))
            data = []
            stream.events.append(event)
            stream.ids.append(event_id)
            event_id = None
            yield event
    if data:
        event = json.loads("\n".join(data))
        stream.events.append(event)
        stream.ids.append(event_id)
        yield event


def run_body(
    thread_id: str,
    *messages: tuple[str, str],
    resume: list[dict[str, Any]] | None = None,
    **forwarded: Any,
) -> dict[str, Any]:
    """A RunAgentInput as `@ag-ui/client`'s HttpAgent sends it (camelCase).

    `forwarded` becomes `forwardedProps` (`multitaskStrategy`, `onDisconnect`).
    """
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": f"run-{uuid.uuid4().hex[:8]}",
        "messages": [{"id": mid, "role": "user", "content": text} for mid, text in messages],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": forwarded,
    }
    if resume is not None:
        body["resume"] = resume
    return body


def answer(interrupt_id: str, value: Any) -> dict[str, Any]:
    """One resume entry answering `interrupt_id` with `value`."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"value": value}}


class Api:
    """An HTTP client of the server with the bearer key set."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.http = httpx.Client(
            base_url=server.url,
            headers={"Authorization": f"Bearer {API_KEY}"},
            timeout=httpx.Timeout(30.0),
        )

    def run(
        self,
        graph: str,
        body: dict[str, Any],
        *,
        until: Callable[[dict[str, Any]], bool] | None = None,
    ) -> Stream:
        """POST a run and read its stream to the end (or the error answer).

        With `until`, the connection is closed right after the first event it accepts.
        """
        return self.stream("POST", f"/api/agents/{graph}", body=body, until=until)

    def join(self, thread_id: str, run_id: str, *, last_event_id: int | None = None) -> Stream:
        """Rejoin a run: its events after `last_event_id` (all without it), to its end."""
        headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
        return self.stream("GET", f"/api/threads/{thread_id}/runs/{run_id}/stream", headers=headers)

    def stream(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        headers: dict[str, str] | None = None,
        until: Callable[[dict[str, Any]], bool] | None = None,
    ) -> Stream:
        """Read one event stream (or the error answer)."""
        with self.http.stream(method, path, json=body, headers=headers) as response:
            stream = Stream(status=response.status_code)
            if response.status_code != 200:
                stream.raw = response.read()
                stream.body = json.loads(stream.raw)
                return stream
            raw = bytearray()

            def lines() -> Iterator[str]:
                decoder = codecs.getincrementaldecoder("utf-8")()
                buffer = ""
                for chunk in response.iter_bytes():
                    raw.extend(chunk)
                    buffer += decoder.decode(chunk)
                    *complete, buffer = buffer.split("\n")
                    yield from complete
                if buffer:
                    yield buffer

            for event in parse_sse(lines(), stream):
                if until is not None and until(event):
                    break
            stream.raw = bytes(raw)
        return stream

    def chat(self, **body: Any) -> httpx.Response:
        return self.http.post("/api/chat", json=body)

    def close(self) -> None:
        self.http.close()


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.close()


@pytest.fixture
def thread_id() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


WAIT_S = 20.0


def wait_until(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    """Poll `check` (state another process or thread records: nothing to await) until it
    returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)  # polling interval, not a wait for a result
