"""Runs as records: the run table and its event log, in the checkpoints' database.

A run is `(threadId, runId)` with its graph, status and times; its event log holds
every AG-UI event it sent, as the JSON a client received, under its sequence number
(1, 2, 3, ...). `RunStore` is the only code that knows the tables. It uses its own
connection to the database file (WAL lets it write beside the checkpointer).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

RunStatus = Literal["queued", "running", "interrupted", "success", "error", "cancelled"]
ACTIVE: frozenset[RunStatus] = frozenset({"queued", "running"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_runs (
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    graph TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    finished_at REAL,
    error_code TEXT,
    error_message TEXT,
    owner TEXT NOT NULL,
    request TEXT NOT NULL,
    checkpoint_before TEXT,
    PRIMARY KEY (thread_id, run_id)
);
CREATE INDEX IF NOT EXISTS agent_runs_status ON agent_runs (status);
CREATE INDEX IF NOT EXISTS agent_runs_finished ON agent_runs (finished_at);
CREATE TABLE IF NOT EXISTS agent_run_events (
    thread_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (thread_id, run_id, seq)
);
"""
_COLUMNS = (
    "thread_id, run_id, graph, status, created_at, finished_at, error_code, error_message,"
    " owner, request, checkpoint_before"
)
# One row per thread with runs, for the thread list: written in the transactions that
# create a run and record its end, so listing reads no more than it returns. Created
# (and filled from the runs already recorded) when an older database is opened.
_THREADS_TABLE = "agent_threads"
_THREADS_SCHEMA = """
CREATE TABLE agent_threads (
    thread_id TEXT PRIMARY KEY,
    graph TEXT NOT NULL,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX agent_threads_updated ON agent_threads (graph, updated_at);
"""
# The latest run's status rides along from agent_runs (its primary key starts with
# thread_id), so no status is kept twice.
_SUMMARY = (
    "SELECT t.thread_id, t.graph, t.title, t.updated_at, (SELECT r.status FROM agent_runs r"
    " WHERE r.thread_id = t.thread_id ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1)"
    " FROM agent_threads t"
)
DEFAULT_TITLE = "新对话"
TITLE_CHARS = 40
ELLIPSIS = "…"


class RunError(BaseModel):
    """Why a run ended `error` (or `cancelled`): its RUN_ERROR code and message."""

    code: str
    message: str


class RunRecord(BaseModel):
    """`GET /api/threads/{threadId}/runs/{runId}`: one run and how it stands."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    run_id: str
    thread_id: str
    graph: str
    status: RunStatus
    created_at: float = Field(description="ISO 8601, UTC")
    finished_at: float | None = Field(default=None, description="ISO 8601, UTC")
    error: RunError | None = None

    @field_serializer("created_at", "finished_at")
    def _iso(self, value: float | None) -> str | None:
        return None if value is None else datetime.fromtimestamp(value, UTC).isoformat()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class ThreadSummary(BaseModel):
    """One entry of `GET /api/threads`: a thread, its title and how its latest run stands."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    thread_id: str
    graph_id: str
    title: str
    updated_at: float = Field(description="ISO 8601, UTC: the thread's latest run start or end")
    status: RunStatus = Field(description="the status of the thread's latest run")

    @field_serializer("updated_at")
    def _iso(self, value: float) -> str:
        return datetime.fromtimestamp(value, UTC).isoformat()


def default_title(messages: Iterable[Any]) -> str:
    """A thread's title before any rename: its first user message, whitespace collapsed and
    cut to TITLE_CHARS characters (then `…`); DEFAULT_TITLE when it has no user text.

    `messages` are AG-UI messages as JSON (a run request's `messages`).
    """
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text") or "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        text = " ".join(str(content or "").split())
        if text:
            return text[:TITLE_CHARS] + ELLIPSIS if len(text) > TITLE_CHARS else text
    return DEFAULT_TITLE


def _request_messages(request: str) -> list[Any]:
    try:
        messages = json.loads(request).get("messages")
    except (ValueError, AttributeError):  # not JSON, or not an object
        return []
    return messages if isinstance(messages, list) else []


def _summary(row: Sequence[Any]) -> ThreadSummary:
    thread_id, graph, title, updated_at, status = row
    return ThreadSummary(
        thread_id=thread_id, graph_id=graph, title=title, updated_at=updated_at, status=status
    )


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended, for its record."""

    thread_id: str
    run_id: str
    status: RunStatus
    finished_at: float
    error: RunError | None


class StoredRun(BaseModel):
    """A record plus what the service needs to resume it: owner, request, start checkpoint."""

    record: RunRecord
    owner: str
    request: dict[str, Any]
    checkpoint_before: str | None


def _stored(row: Sequence[Any]) -> StoredRun:
    (thread_id, run_id, graph, status, created, finished, code, message, owner, request, before) = (
        row
    )
    error = RunError(code=code, message=message or "") if code is not None else None
    record = RunRecord(
        run_id=run_id,
        thread_id=thread_id,
        graph=graph,
        status=status,
        created_at=created,
        finished_at=finished,
        error=error,
    )
    return StoredRun(
        record=record, owner=owner, request=json.loads(request), checkpoint_before=before
    )


class RunStore:
    """The run table and the event log on one SQLite connection, owned by one thread.

    Every operation is one hop to that thread, a write one whole transaction there:
    the event log is on the hot path, and a hop per statement would cost more than the
    statements.
    """

    def __init__(self, conn: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._pool = pool

    async def setup(self) -> None:
        await self._call(self._conn.executescript, _SCHEMA)
        await self._call(self._add_threads_table)

    def _add_threads_table(self) -> None:
        """Create agent_threads when missing, filled from the runs already recorded."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")  # one process creates it; the others see it there
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (_THREADS_TABLE,)
            ).fetchone()
            if found is None:
                for statement in filter(str.strip, _THREADS_SCHEMA.split(";")):
                    conn.execute(statement)
                conn.executemany(
                    "INSERT INTO agent_threads (thread_id, graph, title, created_at, updated_at)"
                    " VALUES (?,?,?,?,?)",
                    self._existing_threads(),
                )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _existing_threads(self) -> list[tuple[str, str, str, float, float]]:
        """A row per thread of the run table: the latest run's graph, the first run's title,
        the first start and the latest start or end."""
        rows = self._conn.execute(
            "SELECT thread_id, graph, request, created_at, COALESCE(finished_at, created_at)"
            " FROM agent_runs ORDER BY thread_id, created_at, rowid"
        ).fetchall()
        threads: dict[str, tuple[str, str, str, float, float]] = {}
        for thread_id, graph, request, created, active in rows:  # each thread's oldest first
            first = threads.get(thread_id)
            if first is None:
                title = default_title(_request_messages(request))
                threads[thread_id] = (thread_id, graph, title, created, active)
            else:
                threads[thread_id] = (thread_id, graph, first[2], first[3], max(first[4], active))
        return list(threads.values())

    async def create(self, stored: StoredRun) -> bool:
        """Insert a new run; False when the thread already has this run id.

        The thread's row is written in the same transaction: created by its first run
        (titled from that run's first user message), touched by every later one.
        """
        record = stored.record
        title = default_title(stored.request.get("messages") or ())
        count = await self._write(
            (
                "INSERT INTO agent_threads (thread_id, graph, title, created_at, updated_at)"
                " VALUES (?,?,?,?,?) ON CONFLICT (thread_id) DO UPDATE SET"
                " graph=excluded.graph, updated_at=MAX(updated_at, excluded.updated_at)"
                # a run id the thread has used is refused: its row stays as it was
                " WHERE NOT EXISTS (SELECT 1 FROM agent_runs"
                " WHERE thread_id=excluded.thread_id AND run_id=?)",
                (
                    record.thread_id,
                    record.graph,
                    title,
                    record.created_at,
                    record.created_at,
                    record.run_id,
                ),
            ),
            (
                f"INSERT OR IGNORE INTO agent_runs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    record.thread_id,
                    record.run_id,
                    record.graph,
                    record.status,
                    record.created_at,
                    None,
                    None,
                    None,
                    stored.owner,
                    json.dumps(stored.request, ensure_ascii=False),
                    stored.checkpoint_before,
                ),
            ),
        )
        return count == 1

    async def started(
        self, thread_id: str, run_id: str, *, owner: str, checkpoint_before: str | None
    ) -> None:
        """The run is `running` under `owner`, from the checkpoint it found."""
        await self._write(
            (
                "UPDATE agent_runs SET status='running', owner=?, checkpoint_before=?"
                " WHERE thread_id=? AND run_id=?",
                (owner, checkpoint_before, thread_id, run_id),
            )
        )

    async def claim(self, thread_id: str, run_id: str, owner: str) -> None:
        """Take over a run another process left active."""
        await self._write(
            (
                "UPDATE agent_runs SET owner=? WHERE thread_id=? AND run_id=?",
                (owner, thread_id, run_id),
            )
        )

    async def get(self, thread_id: str, run_id: str) -> StoredRun | None:
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE thread_id=? AND run_id=?",
            (thread_id, run_id),
        )
        return _stored(rows[0]) if rows else None

    async def of_thread(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, newest first."""
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE thread_id=?"
            " ORDER BY created_at DESC, rowid DESC",
            (thread_id,),
        )
        return [_stored(row).record for row in rows]

    async def active(self) -> list[StoredRun]:
        """Every run left `queued` or `running`, oldest first."""
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE status IN ('queued', 'running')"
            " ORDER BY created_at, rowid",
            (),
        )
        return [_stored(row) for row in rows]

    async def write(
        self, events: Iterable[tuple[str, str, int, str]], endings: Iterable[Ending] = ()
    ) -> None:
        """Add `(thread_id, run_id, seq, data)` events to the log and record run endings,
        in one transaction."""
        await self._write(
            (
                "INSERT OR IGNORE INTO agent_run_events (thread_id, run_id, seq, data)"
                " VALUES (?,?,?,?)",
                list(events),
            ),
            (
                "UPDATE agent_runs SET status=?, finished_at=?, error_code=?, error_message=?"
                " WHERE thread_id=? AND run_id=?",
                [
                    (
                        end.status,
                        end.finished_at,
                        end.error.code if end.error else None,
                        end.error.message if end.error else None,
                        end.thread_id,
                        end.run_id,
                    )
                    for end in endings
                ],
            ),
            (
                "UPDATE agent_threads SET updated_at=MAX(updated_at, ?) WHERE thread_id=?",
                [(end.finished_at, end.thread_id) for end in endings],
            ),
        )

    async def events(self, thread_id: str, run_id: str, after: int = 0) -> list[tuple[int, str]]:
        """The run's logged events after sequence number `after`, in order."""
        rows = await self._read(
            "SELECT seq, data FROM agent_run_events WHERE thread_id=? AND run_id=? AND seq>?"
            " ORDER BY seq",
            (thread_id, run_id, after),
        )
        return [(seq, data) for seq, data in rows]

    async def expire(self, finished_before: float) -> None:
        """Drop the event logs of runs that finished before `finished_before`."""
        await self._write(
            (
                "DELETE FROM agent_run_events WHERE (thread_id, run_id) IN (SELECT thread_id,"
                " run_id FROM agent_runs WHERE finished_at IS NOT NULL AND finished_at < ?)",
                (finished_before,),
            )
        )

    async def forget_thread(self, thread_id: str) -> None:
        await self._write(
            ("DELETE FROM agent_run_events WHERE thread_id=?", (thread_id,)),
            ("DELETE FROM agent_runs WHERE thread_id=?", (thread_id,)),
            ("DELETE FROM agent_threads WHERE thread_id=?", (thread_id,)),
        )

    async def threads(self, graph: str | None, limit: int) -> list[ThreadSummary]:
        """The threads (of `graph`, or all), newest activity first, at most `limit`."""
        where, params = ("WHERE t.graph=? ", (graph,)) if graph is not None else ("", ())
        rows = await self._read(
            f"{_SUMMARY} {where}ORDER BY t.updated_at DESC, t.thread_id LIMIT ?",
            (*params, limit),
        )
        return [_summary(row) for row in rows if row[4] is not None]

    async def rename_thread(self, thread_id: str, title: str) -> ThreadSummary | None:
        """Give the thread `title` (kept across later runs); None when it is unknown."""
        row = await self._call(self._rename, thread_id, title)
        return None if row is None or row[4] is None else _summary(row)

    def _rename(self, thread_id: str, title: str) -> Sequence[Any] | None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("UPDATE agent_threads SET title=? WHERE thread_id=?", (title, thread_id))
            row = conn.execute(f"{_SUMMARY} WHERE t.thread_id=?", (thread_id,)).fetchone()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return row

    async def _write(self, *steps: tuple[str, Any]) -> int:
        """Run `(sql, params)` steps (params: a tuple, or a list of them for many rows) in
        one transaction; return the last step's row count.

        IMMEDIATE takes the write lock first, so a busy database (the checkpointer writes
        the same file) is waited for rather than failing half-way. A cancelled caller
        does not stop it: the thread finishes the transaction.
        """
        count: int = await self._call(self._transaction, steps)
        return count

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        rows: list[Any] = await self._call(self._fetch, sql, params)
        return rows

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _transaction(self, steps: Sequence[tuple[str, Any]]) -> int:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            count = 0
            for sql, params in steps:
                many = isinstance(params, list)
                if many and not params:
                    continue
                cursor = conn.executemany(sql, params) if many else conn.execute(sql, params)
                count = cursor.rowcount
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return count

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()


@asynccontextmanager
async def open_run_store(path: Path) -> AsyncIterator[RunStore]:
    """The run store on the database file at `path` (created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-store")
    loop = asyncio.get_running_loop()

    def connect() -> sqlite3.Connection:
        # Autocommit (transactions are explicit); wait for the checkpointer's lock
        # rather than fail.
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    conn = await loop.run_in_executor(pool, connect)
    try:
        store = RunStore(conn, pool)
        await store.setup()
        yield store
    finally:
        await loop.run_in_executor(pool, conn.close)
        pool.shutdown(wait=True)
