"""PostgreSQL for AGENT_DB=postgresql://...: connecting, the pool, the schema set-up lock.

`open_pool(db, size=, prepare=, wait_s=, current=, setup=)` connects once first, on a
connection of its own (a `StorageUnavailable` naming the database, never its password,
when it cannot). When `current(conn)` says the schema is not complete yet (a new
database, an upgrade), it takes the set-up lock there and runs `setup(pool)` (the
saver's migrations and our tables) before releasing it: replicas that start together
create the schema one at a time, and a start on an up-to-date database takes no lock and
changes nothing. `restore_schema` does the same later, for a database that lost its
tables under the running service (dropped and re-created empty). A request waits at
most `wait_s` (AGENT_DB_TIMEOUT_S) for a pooled connection: `PoolTimeout` then, not
the pool's own 30 s, while the pool reconnects in the background.
Pool connections are what LangGraph's saver needs (autocommit, dict rows) and use
prepared statements unless AGENT_DB_PREPARE=false (pgbouncer in transaction mode has no
session to keep them in).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from app.core.errors import StorageUnavailable
from app.settings import PostgresDb

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10
APPLICATION_NAME = "react-agent"
# The schema set-up's advisory lock key: any constant this project owns.
SETUP_LOCK = 0x7265_6163_7400  # "react\0"
LOCK_POLL_S = 0.1
CANNOT_CONNECT = "cannot connect to the PostgreSQL database {where}: {reason}"
LOCK_KEPT = (
    "the schema set-up lock was not released on its own connection (pgbouncer in "
    "transaction mode?); it stays held until that server connection closes"
)

Pool = AsyncConnectionPool[AsyncConnection[Any]]
# Whether the schema on a connection is complete; what sets it up on the pool.
Current = Callable[[AsyncConnection[Any]], Awaitable[bool]]
Setup = Callable[[Pool], Awaitable[None]]


def connect_kwargs(db: PostgresDb, *, prepare: bool) -> dict[str, Any]:
    """libpq and psycopg options for every connection to `db` (the password included)."""
    kwargs: dict[str, Any] = {
        "autocommit": True,
        # LangGraph's own default is 0 (prepare at once); None never prepares.
        "prepare_threshold": 0 if prepare else None,
    }
    if db.password is not None:
        kwargs["password"] = db.password.get_secret_value()
    given = conninfo_to_dict(db.url)
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
    if "application_name" not in given:
        kwargs["application_name"] = APPLICATION_NAME  # how operators find us in pg_stat_activity
    return kwargs


def unreachable(db: PostgresDb, exc: Exception) -> StorageUnavailable:
    """The start-up error for `exc`: the database named without its password."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return StorageUnavailable(
        "database_unreachable", CANNOT_CONNECT.format(where=db.where, reason=reason)
    )


async def check(db: PostgresDb) -> None:
    """Connect to `db` once; StorageUnavailable (naming it, no password) when it refuses."""
    try:
        conn = await AsyncConnection.connect(db.url, **connect_kwargs(db, prepare=False))
    except psycopg.Error as exc:
        raise unreachable(db, exc) from None
    await conn.close()


@asynccontextmanager
async def open_pool(
    db: PostgresDb,
    *,
    size: int,
    prepare: bool,
    wait_s: float,
    current: Current,
    setup: Setup,
) -> AsyncIterator[Pool]:
    """The pool on `db` (at most `size` connections, each waited for at most `wait_s`
    seconds), the schema set up (see the module)."""
    kwargs = connect_kwargs(db, prepare=prepare)
    try:
        locking = await AsyncConnection.connect(db.url, **kwargs)
    except psycopg.Error as exc:
        raise unreachable(db, exc) from None
    pool: Pool = AsyncConnectionPool(
        db.url,
        kwargs={**kwargs, "row_factory": dict_row},
        min_size=1,
        max_size=size,
        timeout=wait_s,
        open=False,
        name="agent-db",
    )
    try:
        async with locking:
            try:
                await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except PoolTimeout as exc:
                raise unreachable(db, exc) from None
            await _set_up(locking, pool, current, setup)
        yield pool
    finally:
        await pool.close()


async def restore_schema(
    db: PostgresDb, pool: Pool, *, prepare: bool, present: Current, setup: Setup
) -> bool:
    """Set the schema up again if its tables are gone (`present` says they are not), as
    `open_pool` does at start-up; True when it was. Checked on a pooled connection, set up
    under the lock on a connection of its own."""
    async with pool.connection() as conn:
        if await present(conn):
            return False
    async with await AsyncConnection.connect(db.url, **connect_kwargs(db, prepare=prepare)) as (
        locking
    ):
        return await _set_up(locking, pool, present, setup)


async def _set_up(
    locking: AsyncConnection[Any], pool: Pool, current: Current, setup: Setup
) -> bool:
    """`setup(pool)` under the set-up lock held on `locking`, unless `current`; True if run."""
    if await current(locking):
        return False
    async with setup_lock(locking):
        if await current(locking):  # another replica may have just done it
            return False
        await setup(pool)
    return True


@asynccontextmanager
async def setup_lock(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """Hold the set-up lock (a session-level advisory lock of `conn`) for the block.

    Polled with pg_try_advisory_lock, outside any transaction: the saver's migrations
    build indexes CONCURRENTLY, which wait for every transaction holding a snapshot
    older than theirs. A replica blocked inside pg_advisory_lock, or a lock held in an
    open transaction, would be one of them while they wait for us: neither would go on.
    """
    waited = False
    while True:
        cursor = await conn.execute("SELECT pg_try_advisory_lock(%s)", (SETUP_LOCK,))
        row = await cursor.fetchone()
        if row is not None and row[0]:
            break
        if not waited:
            logger.info("waiting for another process to finish setting up the database")
            waited = True
        await asyncio.sleep(LOCK_POLL_S)  # polling the lock, not waiting for a result
    try:
        yield
    finally:
        cursor = await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
        row = await cursor.fetchone()
        if row is None or not row[0]:
            logger.warning(LOCK_KEPT)
