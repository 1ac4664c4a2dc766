"""The run store on SQLite: the AGENT_DB file, beside the checkpoints (WAL mode).

`open_sqlite_run_store(path, writer=)` runs it on the process's writer connection
(`app.core.storage.sqlite.connection`): every operation is one hop to that connection's
thread, a write one whole `BEGIN IMMEDIATE` transaction there. The queries are
`app.core.storage.sql`'s. Nothing tells one process that a run of another ended (the
file has no notifications): a run waiting for its thread re-checks every RECHECK_S.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import aiosqlite

from app.core.storage.assistants import ASSISTANTS_SCHEMA, SqlAssistantStore
from app.core.storage.runs import renamed, threads_from_runs
from app.core.storage.sql import (
    INSERT_THREAD,
    MARK_RENAMED,
    RUNS_FOR_THREADS,
    THREAD_COLUMNS,
    TITLES_AND_FIRST_REQUESTS,
    Decision,
    SqlRunStore,
    Step,
)
from app.core.storage.sqlite.connection import SqliteConnection, open_sqlite, truncate_wal
from app.core.storage.users import THREADS_BY_USER, USERS_SCHEMA, SqlUserStore

logger = logging.getLogger(__name__)

TRUNCATE_BUSY = (
    "the WAL was not emptied after a deletion (other connections were reading): its older"
    " frames keep the deleted rows until a later deletion or a prune empties it"
)

# How long a run waiting for its thread may miss the end of the run ahead of it in
# another process on the file (this process's own ends wake it at once). Only the head
# of each thread's queue re-checks: slow enough that waiting costs the file next to
# nothing, soon enough that a hand-over between processes is not felt much.
RECHECK_S = 1.0

SCHEMA = (
    """
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
CREATE TABLE IF NOT EXISTS agent_thread_leases (
    thread_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_thread_leases_owner ON agent_thread_leases (owner);
CREATE TABLE IF NOT EXISTS agent_replicas (
    owner TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_messages (
    thread_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (thread_id, message_id)
);
CREATE TABLE IF NOT EXISTS agent_created_threads (
    thread_id TEXT PRIMARY KEY,
    metadata TEXT NOT NULL,
    created_at REAL NOT NULL,
    user_id TEXT NOT NULL DEFAULT 'admin'
);
"""
    + USERS_SCHEMA
    + ASSISTANTS_SCHEMA
)
# Columns added after the first release: added to an older database's agent_runs.
RUN_COLUMNS = {
    "rollback_from": "ALTER TABLE agent_runs ADD COLUMN rollback_from TEXT",
    "cancel_requested": (
        "ALTER TABLE agent_runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0"
    ),
}
# One row per thread with runs, for the thread list: written in the transactions that
# create a run and record its end, so listing reads no more than it returns. Created
# (and filled from the runs already recorded) when an older database is opened.
THREADS_SCHEMA = """
CREATE TABLE agent_threads (
    thread_id TEXT PRIMARY KEY,
    graph TEXT NOT NULL,
    title TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX agent_threads_updated ON agent_threads (graph, updated_at);
"""


class SqliteRunStore(SqlRunStore, SqlUserStore, SqlAssistantStore):
    """The run, user and assistant store on the process's SQLite writer connection."""

    GREATEST: ClassVar[str] = "MAX"
    NOW: ClassVar[str] = "((julianday('now') - 2440587.5) * 86400.0)"
    recheck_s: ClassVar[float] = RECHECK_S

    def __init__(self, db: SqliteConnection, path: Path) -> None:
        self._db = db
        self._path = path

    async def setup(self) -> None:
        await self._db.call(lambda conn: conn.executescript(SCHEMA))
        # One process adds what is missing; the others see it there.
        await self._db.transaction(_add_what_is_missing)

    async def probe(self, timeout_s: float) -> None:
        """The file is there, and a writer could take its lock now (what every run needs)."""
        # Opens the file only if it exists: a probe never creates a database.
        uri = self._path.absolute().as_uri() + "?mode=rw"
        async with (
            asyncio.timeout(timeout_s),
            aiosqlite.connect(uri, uri=True, timeout=timeout_s) as conn,
        ):
            await conn.execute("BEGIN IMMEDIATE")
            await conn.rollback()

    async def scrub(self) -> None:
        if not await self._db.call(truncate_wal):
            logger.info(TRUNCATE_BUSY)

    async def compact(self) -> None:
        def vacuum(conn: sqlite3.Connection) -> None:
            conn.execute("VACUUM")
            # VACUUM wrote the whole file into the WAL: wait for readers as a write would.
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await self._db.call(vacuum)

    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any:
        return await self._db.transaction(partial(_run_steps, steps=steps, fetch=fetch))

    async def _decide(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None:
        # BEGIN IMMEDIATE takes the file's write lock: every process's decision is serial.
        await self._db.transaction(partial(_run_decision, reads=reads, decide=decide))

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        rows: list[Sequence[Any]] = await self._db.call(
            lambda conn: conn.execute(sql, params).fetchall()
        )
        return rows


def _add_what_is_missing(conn: sqlite3.Connection) -> None:
    """Add what an older database lacks: agent_runs' later columns, agent_threads filled
    from the runs already recorded, and agent_threads' later columns (a title that is not
    its first message's is the user's)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(agent_runs)")}
    for name, statement in RUN_COLUMNS.items():
        if name not in columns:
            conn.execute(statement)
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='agent_threads'"
    ).fetchone()
    if found is None:
        for statement in filter(str.strip, THREADS_SCHEMA.split(";")):
            conn.execute(statement)
    thread_columns = {row[1] for row in conn.execute("PRAGMA table_info(agent_threads)")}
    for name, kind in THREAD_COLUMNS.items():
        if name not in thread_columns:
            conn.execute(f"ALTER TABLE agent_threads ADD COLUMN {name} {kind}")
    conn.execute(THREADS_BY_USER)
    if found is None:
        conn.executemany(INSERT_THREAD, threads_from_runs(conn.execute(RUNS_FOR_THREADS)))
    elif "title_by" not in thread_columns:
        conn.executemany(MARK_RENAMED, renamed(conn.execute(TITLES_AND_FIRST_REQUESTS)))


def _run_steps(conn: sqlite3.Connection, *, steps: Sequence[Step], fetch: bool) -> Any:
    result: Any = [] if fetch else 0
    for sql, params in steps:
        many = isinstance(params, list)
        if many and not params:
            continue
        cursor = conn.executemany(sql, params) if many else conn.execute(sql, params)
        result = cursor.fetchall() if fetch else cursor.rowcount
    return result


def _run_decision(conn: sqlite3.Connection, *, reads: Sequence[Step], decide: Decision) -> None:
    rows = [conn.execute(sql, params).fetchall() for sql, params in reads]
    for sql, params in decide(rows):
        conn.execute(sql, params)


@asynccontextmanager
async def open_sqlite_run_store(
    path: Path, *, writer: SqliteConnection | None = None
) -> AsyncIterator[SqliteRunStore]:
    """The run store on the database file at `path`, through `writer` (one of its own
    when None)."""
    async with AsyncExitStack() as stack:
        if writer is None:
            writer = await stack.enter_async_context(open_sqlite(path))
        store = SqliteRunStore(writer, path)
        await store.setup()
        yield store
