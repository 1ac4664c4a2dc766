"""The run store on SQLite: the AGENT_DB file, beside the checkpoints (WAL mode).

`open_sqlite_run_store(path)` opens its own connection to the file, owned by one
thread: every operation is one hop to that thread, a write one whole `BEGIN IMMEDIATE`
transaction there (it takes the file's write lock first, so a busy database is waited
for rather than failing half-way). The queries are `app.core.runs_sql`'s.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import aiosqlite

from app.core.runs import threads_from_runs
from app.core.runs_sql import INSERT_THREAD, RUNS_FOR_THREADS, Decision, SqlRunStore, Step

SCHEMA = """
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
"""
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


class SqliteRunStore(SqlRunStore):
    """The run store on one SQLite connection, owned by one thread."""

    GREATEST: ClassVar[str] = "MAX"
    NOW: ClassVar[str] = "((julianday('now') - 2440587.5) * 86400.0)"

    def __init__(self, conn: sqlite3.Connection, pool: ThreadPoolExecutor, path: Path) -> None:
        self._conn = conn
        self._pool = pool
        self._path = path

    async def setup(self) -> None:
        await self._call(self._conn.executescript, SCHEMA)
        await self._call(self._add_threads_table)

    def _add_threads_table(self) -> None:
        """Add what an older database lacks: agent_runs' later columns, and agent_threads
        filled from the runs already recorded."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")  # one process creates it; the others see it there
        try:
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
                rows = conn.execute(RUNS_FOR_THREADS).fetchall()
                conn.executemany(INSERT_THREAD, threads_from_runs(rows))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

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

    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any:
        # Shielded: a cancelled caller would otherwise cancel a job the thread has not
        # started yet; this way the thread always runs it, and finishes the transaction.
        loop = asyncio.get_running_loop()
        return await asyncio.shield(loop.run_in_executor(self._pool, self._run_steps, steps, fetch))

    async def _decide(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None:
        # BEGIN IMMEDIATE takes the file's write lock: every process's decision is serial.
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._pool, self._run_decision, reads, decide)
        await asyncio.shield(job)

    def _run_decision(self, reads: Sequence[Step], decide: Decision) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = [conn.execute(sql, params).fetchall() for sql, params in reads]
            for sql, params in decide(rows):
                conn.execute(sql, params)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        rows: list[Sequence[Any]] = await self._call(self._fetch, sql, params)
        return rows

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _run_steps(self, steps: Sequence[Step], fetch: bool) -> Any:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            result: Any = [] if fetch else 0
            for sql, params in steps:
                many = isinstance(params, list)
                if many and not params:
                    continue
                cursor = conn.executemany(sql, params) if many else conn.execute(sql, params)
                result = cursor.fetchall() if fetch else cursor.rowcount
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        return self._conn.execute(sql, params).fetchall()


@asynccontextmanager
async def open_sqlite_run_store(path: Path) -> AsyncIterator[SqliteRunStore]:
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
        store = SqliteRunStore(conn, pool, path)
        await store.setup()
        yield store
    finally:
        await loop.run_in_executor(pool, conn.close)
        pool.shutdown(wait=True)
