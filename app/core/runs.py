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

    async def create(self, stored: StoredRun) -> bool:
        """Insert a new run; False when the thread already has this run id."""
        record = stored.record
        count = await self._write(
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
            )
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
        )

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
