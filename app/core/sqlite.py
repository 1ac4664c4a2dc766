"""The process's writer on the AGENT_DB file: one connection, owned by one thread.

`open_sqlite(path)` yields a `SqliteConnection` (WAL, autocommit). Every call is one
hop to its thread, and `transaction(fn)` runs `fn(conn)` there inside one `BEGIN
IMMEDIATE` transaction. Taking the file's write lock first makes a busy file waited for
rather than failing half-way; taking, using and releasing it in one hop means the lock
is never held while an event loop turns. A transaction that spanned hops (a statement,
back to a busy loop, then the commit) kept every other process's writer asleep in
SQLite's busy handler, and with `serve --workers` their cores idle. Both the run store
and the checkpointer's writes go through here, so a process's writers never wait for
each other's lock either.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


class SqliteConnection:
    """One sqlite3 connection, used only from its own thread."""

    def __init__(self, conn: sqlite3.Connection, pool: ThreadPoolExecutor) -> None:
        self._conn = conn
        self._pool = pool

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` on the connection's thread (no transaction of ours around it)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fn, self._conn)

    async def transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(conn)` inside one `BEGIN IMMEDIATE` transaction, committed unless it raised."""
        # Shielded: a cancelled caller would otherwise cancel a job the thread has not
        # started yet; this way the thread always runs it, and finishes the transaction.
        loop = asyncio.get_running_loop()
        return await asyncio.shield(loop.run_in_executor(self._pool, _transaction, self._conn, fn))


def _transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


@asynccontextmanager
async def open_sqlite(path: Path) -> AsyncIterator[SqliteConnection]:
    """The writer connection to the database file at `path` (created if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
    loop = asyncio.get_running_loop()

    def connect() -> sqlite3.Connection:
        # Autocommit (transactions are explicit); wait for another process's lock
        # rather than fail.
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    conn = await loop.run_in_executor(pool, connect)
    try:
        yield SqliteConnection(conn, pool)
    finally:
        await loop.run_in_executor(pool, conn.close)
        pool.shutdown(wait=True)
