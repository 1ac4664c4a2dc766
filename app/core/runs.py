"""Runs as records: the run table and its event log, in the checkpoints' database.

A run is `(threadId, runId)` with its graph, status and times; its event log holds
every AG-UI event it sent, as the JSON a client received, under its sequence number
(1, 2, 3, ...). `RunStore` is the only code that knows the tables. It uses its own
connection to the database file (WAL lets it write beside the checkpointer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiosqlite
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
    """The run table and the event log on one SQLite connection."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def setup(self) -> None:
        await self._conn.executescript(_SCHEMA)
        await self._conn.commit()

    async def create(self, stored: StoredRun) -> bool:
        """Insert a new run; False when the thread already has this run id."""
        record = stored.record
        cursor = await self._conn.execute(
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
        await self._conn.commit()
        return cursor.rowcount == 1

    async def started(
        self, thread_id: str, run_id: str, *, owner: str, checkpoint_before: str | None
    ) -> None:
        """The run is `running` under `owner`, from the checkpoint it found."""
        await self._conn.execute(
            "UPDATE agent_runs SET status='running', owner=?, checkpoint_before=?"
            " WHERE thread_id=? AND run_id=?",
            (owner, checkpoint_before, thread_id, run_id),
        )
        await self._conn.commit()

    async def claim(self, thread_id: str, run_id: str, owner: str) -> None:
        """Take over a run another process left active."""
        await self._conn.execute(
            "UPDATE agent_runs SET owner=? WHERE thread_id=? AND run_id=?",
            (owner, thread_id, run_id),
        )
        await self._conn.commit()

    async def get(self, thread_id: str, run_id: str) -> StoredRun | None:
        cursor = await self._conn.execute(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE thread_id=? AND run_id=?",
            (thread_id, run_id),
        )
        row = await cursor.fetchone()
        return None if row is None else _stored(row)

    async def of_thread(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, newest first."""
        cursor = await self._conn.execute(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE thread_id=?"
            " ORDER BY created_at DESC, rowid DESC",
            (thread_id,),
        )
        return [_stored(row).record for row in await cursor.fetchall()]

    async def active(self) -> list[StoredRun]:
        """Every run left `queued` or `running`, oldest first."""
        cursor = await self._conn.execute(
            f"SELECT {_COLUMNS} FROM agent_runs WHERE status IN ('queued', 'running')"
            " ORDER BY created_at, rowid"
        )
        return [_stored(row) for row in await cursor.fetchall()]

    async def write(
        self, events: Iterable[tuple[str, str, int, str]], endings: Iterable[Ending] = ()
    ) -> None:
        """Add `(thread_id, run_id, seq, data)` events to the log and record run endings,
        in one transaction."""
        await self._conn.executemany(
            "INSERT OR IGNORE INTO agent_run_events (thread_id, run_id, seq, data)"
            " VALUES (?,?,?,?)",
            events,
        )
        await self._conn.executemany(
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
        )
        await self._conn.commit()

    async def events(self, thread_id: str, run_id: str, after: int = 0) -> list[tuple[int, str]]:
        """The run's logged events after sequence number `after`, in order."""
        cursor = await self._conn.execute(
            "SELECT seq, data FROM agent_run_events WHERE thread_id=? AND run_id=? AND seq>?"
            " ORDER BY seq",
            (thread_id, run_id, after),
        )
        return [(seq, data) for seq, data in await cursor.fetchall()]

    async def expire(self, finished_before: float) -> None:
        """Drop the event logs of runs that finished before `finished_before`."""
        await self._conn.execute(
            "DELETE FROM agent_run_events WHERE (thread_id, run_id) IN (SELECT thread_id, run_id"
            " FROM agent_runs WHERE finished_at IS NOT NULL AND finished_at < ?)",
            (finished_before,),
        )
        await self._conn.commit()

    async def forget_thread(self, thread_id: str) -> None:
        await self._conn.execute("DELETE FROM agent_run_events WHERE thread_id=?", (thread_id,))
        await self._conn.execute("DELETE FROM agent_runs WHERE thread_id=?", (thread_id,))
        await self._conn.commit()


@asynccontextmanager
async def open_run_store(path: Path) -> AsyncIterator[RunStore]:
    """The run store on the database file at `path` (created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The checkpointer writes to the same file; wait for its lock rather than fail.
    async with aiosqlite.connect(path, timeout=30.0) as conn:
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        store = RunStore(conn)
        await store.setup()
        yield store
