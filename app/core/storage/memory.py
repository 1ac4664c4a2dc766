"""LangGraph's own store on AGENT_DB: what LangGraph's `/store` API and Studio's memory
tab read and write, and what the graphs get as their `store` (a node may use it).

`open_memory(settings)` opens it for the service's lifetime, beside the checkpoints:

- SQLite: LangGraph's `AsyncSqliteStore` on a connection of its own to the file. Its
  tables are made first in one `BEGIN IMMEDIATE` transaction: LangGraph's own set-up
  reads the version and then alters the table outside any transaction, and two
  processes (`serve --workers`) starting together would both apply the same migration;
- PostgreSQL: LangGraph's `AsyncPostgresStore` on a small pool of its own (at most
  POOL_SIZE connections), its set-up (when not current) under the schema set-up lock
  that orders replicas (`app.core.storage.postgres.connection.setup_lock`).

Items with a `ttl` (minutes) are swept every SWEEP_MINUTES; PostgreSQL hides an expired
item at once, SQLite at the next sweep.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosqlite
from langgraph.store.base import BaseStore, TTLConfig
from langgraph.store.sqlite.aio import AsyncSqliteStore

from app.core.storage.sqlite.connection import PRAGMAS, private_files
from app.settings import PostgresDb, Settings

if TYPE_CHECKING:
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import AsyncConnection

POOL_SIZE = 2
SWEEP_MINUTES = 1
TTL: TTLConfig = {"refresh_on_read": True, "sweep_interval_minutes": SWEEP_MINUTES}
# How long the service's end waits for a sweep under way.
SWEEPER_STOP_S = 5.0


@asynccontextmanager
async def open_memory(settings: Settings) -> AsyncIterator[BaseStore]:
    """LangGraph's store on AGENT_DB, set up, its expired items swept while it is open."""
    db = settings.agent_db
    if isinstance(db, PostgresDb):
        async with _open_postgres(db, settings.agent_db_timeout_s) as store:
            yield store
        return
    timeout = settings.agent_db_timeout_s
    await asyncio.to_thread(_migrate_sqlite, db.path, timeout)
    async with aiosqlite.connect(db.path, isolation_level=None, timeout=timeout) as conn:
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        sqlite_store = AsyncSqliteStore(conn, ttl=TTL)
        await sqlite_store.setup()  # nothing left to migrate: registers its SQL function
        async with _swept(sqlite_store):
            yield sqlite_store


def _migrate_sqlite(path: Path, timeout_s: float) -> None:
    """LangGraph's store migrations not yet applied to the file, in one transaction that
    holds the file's write lock (as `AsyncSqliteStore.setup` would apply them)."""
    private_files(path)
    conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS store_migrations (v INTEGER PRIMARY KEY)")
            row = conn.execute("SELECT max(v) FROM store_migrations").fetchone()
            done = -1 if row is None or row[0] is None else int(row[0])
            for version, statement in enumerate(AsyncSqliteStore.MIGRATIONS):
                if version > done:
                    conn.execute(statement)
                    conn.execute("INSERT INTO store_migrations (v) VALUES (?)", (version,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


@asynccontextmanager
async def _open_postgres(db: PostgresDb, wait_s: float) -> AsyncIterator[BaseStore]:
    # Imported here: an SQLite deployment never loads the PostgreSQL stack.
    from langgraph.store.postgres.aio import AsyncPostgresStore
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool, PoolTimeout

    from app.core.storage.postgres.connection import connect_kwargs, setup_lock, unreachable

    kwargs = connect_kwargs(db, prepare=False)
    pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
        db.url,
        kwargs={**kwargs, "row_factory": dict_row},
        min_size=1,
        max_size=POOL_SIZE,
        timeout=wait_s,
        open=False,
        name="agent-store",
    )
    try:
        await pool.open(wait=True, timeout=wait_s)
    except PoolTimeout as exc:  # the database named, never its password
        raise unreachable(db, exc) from None
    try:
        store = AsyncPostgresStore(pool, ttl=TTL)
        async with await AsyncConnection.connect(db.url, **kwargs) as locking:
            if not await _postgres_current(locking, len(AsyncPostgresStore.MIGRATIONS)):
                async with setup_lock(locking):
                    await store.setup()  # idempotent: a replica that did it leaves nothing
        async with _swept(store):
            yield store
    finally:
        await pool.close()


async def _postgres_current(conn: AsyncConnection[Any], migrations: int) -> bool:
    """Whether LangGraph's store tables are there with every migration applied."""
    cursor = await conn.execute("SELECT to_regclass('store_migrations') IS NOT NULL")
    row = await cursor.fetchone()
    if row is None or not row[0]:
        return False
    cursor = await conn.execute("SELECT max(v) FROM store_migrations")
    row = await cursor.fetchone()
    return row is not None and row[0] == migrations - 1


@asynccontextmanager
async def _swept(store: AsyncSqliteStore | AsyncPostgresStore) -> AsyncIterator[None]:
    await store.start_ttl_sweeper()
    try:
        yield
    finally:
        await store.stop_ttl_sweeper(timeout=SWEEPER_STOP_S)
