"""The durable store on AGENT_DB: checkpoints and runs, on SQLite or PostgreSQL.

`open_storage(settings)` is the one place the backend is chosen, from the parsed
AGENT_DB (`app.settings.SqliteDb` | `PostgresDb`), and yields the checkpointer and the
run store (`app.core.storage.runs.RunStore`) on the same database:

- SQLite: LangGraph's async SQLite saver on the file (WAL mode), its writes made by
  `WriterSqliteSaver` on the process's writer connection
  (`app.core.storage.sqlite.connection`), which the run store uses too;
- PostgreSQL: one pool (AGENT_DB_POOL_SIZE connections at most) shared by LangGraph's
  `AsyncPostgresSaver` and the run store; both schemas are set up (when not current
  yet) under a lock, so replicas may start together. A database that cannot be reached
  at start-up raises `StorageUnavailable`.

Each request waits for the database at most AGENT_DB_TIMEOUT_S (a pooled connection,
SQLite's write lock): a lost database fails its requests within seconds
(`app.core.storage.failures` names how). `Storage.schema()` raises unless the tables are
there; on PostgreSQL it first sets them up again when they are gone (a database dropped
and re-created empty under the service), as at start-up and under the same lock; an
SQLite file cannot lose them under its writer short of someone dropping them, so there
it only checks.

`open_checkpointer(db)` opens a checkpointer alone (graph tests, benchmarks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from app.core.errors import StorageUnavailable
from app.core.storage.assistants import ASSISTANTS_TABLES
from app.core.storage.runs import RunStore
from app.core.storage.sqlite import connection as sqlite_connection
from app.core.storage.sqlite.connection import SqliteConnection, open_sqlite
from app.core.storage.sqlite.runs import open_sqlite_run_store
from app.core.storage.sqlite.saver import WriterSqliteSaver
from app.settings import PostgresDb, Settings, SqliteDb

if TYPE_CHECKING:
    from psycopg import AsyncConnection

logger = logging.getLogger(__name__)

# What `open_checkpointer` (tests, benchmarks: no settings) waits for a pooled connection.
DEFAULT_TIMEOUT_S = Settings.model_fields["agent_db_timeout_s"].default

SCHEMA_RESTORED = (
    "the database had lost its tables (dropped and re-created, or emptied, under the "
    "service): re-created the database schema; what it held is gone"
)
SQLITE_TABLES = (
    "checkpoints",
    "writes",
    "agent_runs",
    "agent_run_events",
    "agent_thread_leases",
    "agent_replicas",
    "agent_threads",
    "agent_messages",
    *ASSISTANTS_TABLES,
)
# LangGraph's PostgreSQL saver's tables (its migrations make them).
CHECKPOINT_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "checkpoint_migrations",
)
TABLES_MISSING = "the database has lost tables ({missing}): restart the service to create them"


class Storage(NamedTuple):
    """The checkpointer and the run store on one database, and its schema's check."""

    saver: BaseCheckpointSaver
    runs: RunStore
    schema: Callable[[], Awaitable[None]]


async def check_database(db: SqliteDb | PostgresDb) -> None:
    """Open AGENT_DB once, before the service starts; StorageUnavailable (naming the file
    or the server, never the password) when it cannot be, so that start-up fails in one
    line rather than in a traceback."""
    if isinstance(db, SqliteDb):
        sqlite_connection.check(db.path)
        return
    from app.core.storage.postgres.connection import check

    await check(db)


@asynccontextmanager
async def open_storage(settings: Settings) -> AsyncIterator[Storage]:
    """The checkpointer and the run store on AGENT_DB, schemas created if needed."""
    db, timeout = settings.agent_db, settings.agent_db_timeout_s
    if isinstance(db, PostgresDb):
        pool_size, prepare = settings.agent_db_pool_size, settings.agent_db_prepare
        async with _open_postgres(db, pool_size, prepare, timeout) as storage:
            yield storage
        return
    async with (
        open_sqlite(db.path, busy_timeout_s=timeout) as writer,
        open_checkpointer(db, writer=writer) as saver,
        open_sqlite_run_store(db.path, writer=writer) as runs,
    ):

        async def schema() -> None:
            missing = await sqlite_connection.missing_tables(db.path, SQLITE_TABLES, timeout)
            if missing:
                raise StorageUnavailable(
                    "storage_unavailable", TABLES_MISSING.format(missing=", ".join(missing))
                )

        yield Storage(saver, runs, schema)


@asynccontextmanager
async def open_checkpointer(
    db: Path | SqliteDb | PostgresDb,
    *,
    pool_size: int = 10,
    prepare: bool = True,
    writer: SqliteConnection | None = None,
) -> AsyncIterator[BaseCheckpointSaver]:
    """A checkpointer on `db` (a path is an SQLite file), set up for use.

    On SQLite it writes through `writer` (one of its own when None).
    """
    if isinstance(db, PostgresDb):
        async with _open_postgres(db, pool_size, prepare, DEFAULT_TIMEOUT_S) as storage:
            yield storage.saver
        return
    path = db.path if isinstance(db, SqliteDb) else db
    async with AsyncExitStack() as stack:
        if writer is None:
            writer = await stack.enter_async_context(open_sqlite(path))
        conn = await stack.enter_async_context(aiosqlite.connect(path))
        # The writer's settings: LangGraph deletes a thread's checkpoints on this one.
        for pragma in sqlite_connection.PRAGMAS:
            await conn.execute(pragma)
        saver = WriterSqliteSaver(conn, writer)
        await saver.setup()
        try:
            yield saver
        finally:
            await settle_cancelled_writes(saver)


@asynccontextmanager
async def _open_postgres(
    db: PostgresDb, pool_size: int, prepare: bool, wait_s: float
) -> AsyncIterator[Storage]:
    # Imported here: an SQLite deployment never loads the PostgreSQL stack.
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import tuple_row

    from app.core.storage.postgres.connection import Pool, open_pool, restore_schema
    from app.core.storage.postgres.listen import connector
    from app.core.storage.postgres.runs import TABLES, PostgresRunStore
    from app.core.storage.postgres.saver import PooledPostgresSaver

    tables = [*CHECKPOINT_TABLES, *TABLES]

    async def present(conn: AsyncConnection[Any]) -> bool:
        # Whether the tables are there at all, whatever their version: one a newer
        # replica upgraded is not one to set up again (that would record the older one).
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute(
            "SELECT bool_and(to_regclass(name) IS NOT NULL) FROM unnest(%s::text[]) AS name",
            (tables,),
        )
        row = await cursor.fetchone()
        return row is not None and bool(row[0])

    async def current(conn: AsyncConnection[Any]) -> bool:
        # Both: a newer langgraph-checkpoint-postgres may bring migrations of its own.
        if not await PostgresRunStore.current(conn):
            return False
        # Tuples: a pooled connection (the schema's later checks) has dict rows.
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute("SELECT to_regclass('checkpoint_migrations') IS NOT NULL")
        row = await cursor.fetchone()
        if row is None or not row[0]:
            return False
        await cursor.execute("SELECT max(v) FROM checkpoint_migrations")
        row = await cursor.fetchone()
        return row is not None and row[0] == len(AsyncPostgresSaver.MIGRATIONS) - 1

    async def setup(pool: Pool) -> None:
        await AsyncPostgresSaver(pool).setup()
        await PostgresRunStore(pool).setup()

    async with open_pool(
        db, size=pool_size, prepare=prepare, wait_s=wait_s, current=current, setup=setup
    ) as pool:
        saver = PooledPostgresSaver(pool, size=pool_size)
        restoring = asyncio.Lock()  # one set-up at a time here; the lock orders replicas

        async def schema() -> None:
            async with restoring:
                if await restore_schema(db, pool, prepare=prepare, present=present, setup=setup):
                    logger.warning(SCHEMA_RESTORED)

        yield Storage(saver, PostgresRunStore(pool, listen=connector(db)), schema)


async def settle_cancelled_writes(saver: BaseCheckpointSaver) -> None:
    """Settle the checkpoint writes a cancelled run left: cut ones rolled back, others committed.

    The SQLite saver's writes that are still LangGraph's own (a thread's deletion) commit
    inside its lock, after their statements: a cancel in between leaves its connection
    inside a transaction that holds the file's write lock against every other connection
    (the writer's), even after `close()` if a cut cursor is still referenced. Under the
    lock, any open transaction is such a cut write. The PostgreSQL saver writes in
    autocommit, and its pool rolls back (or closes) a connection a cancelled statement
    left busy before reusing it: nothing to settle there.
    """
    if isinstance(saver, AsyncSqliteSaver):
        async with saver.lock:
            if saver.conn.in_transaction:
                await saver.conn.rollback()
