"""The durable store: the SQLite checkpointer, one saver per process on AGENT_DB.

`probe(path, timeout_s)` checks, on a connection of its own, that the database file is
there and that a writer could take its lock now (what every run needs): readiness.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver


@asynccontextmanager
async def open_checkpointer(path: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """Open (creating if needed) the checkpoint database at `path` in WAL mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    async with aiosqlite.connect(path) as conn:
        # WAL lets a reader (another process, a `GET /api/threads`) see a consistent
        # file while a run writes; NORMAL sync is durable across process crashes.
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        try:
            yield saver
        finally:
            await end_cut_write(saver)


async def end_cut_write(saver: BaseCheckpointSaver) -> None:
    """Roll back a checkpoint write that a cancelled run cut before its commit.

    The SQLite saver commits inside its lock, after its statement: a cancel in between
    leaves its connection inside a transaction that holds the file's write lock against
    every other connection (the run store's), even after `close()` if a cut cursor is
    still referenced. Under the lock, any open transaction is such a cut write.
    """
    if isinstance(saver, AsyncSqliteSaver):
        async with saver.lock:
            if saver.conn.in_transaction:
                await saver.conn.rollback()


async def probe(path: Path, timeout_s: float) -> None:
    """Raise unless the database at `path` exists and its write lock can be had in time.

    A connection of its own, so a probe that waits never holds up the service's.
    """
    uri = _existing(path)
    async with (
        asyncio.timeout(timeout_s),
        aiosqlite.connect(uri, uri=True, timeout=timeout_s) as conn,
    ):
        await conn.execute("BEGIN IMMEDIATE")
        await conn.rollback()


def _existing(path: Path) -> str:
    """An SQLite URI that opens `path` only if it exists (never creates it)."""
    return path.absolute().as_uri() + "?mode=rw"
