"""What a lost database looks like from above the storage layer: its exceptions, by backend.

`failures(db)` are the exception types that mean "the database does not answer now"
on AGENT_DB's backend (the HTTP server answers them 503 `storage_unavailable`);
`is_lost(exc)` says whether one of them (of either backend) is `exc` or caused it (a
run's RUN_ERROR says `storage_unavailable` then). A lost connection, a pool that hands
out none within AGENT_DB_TIMEOUT_S, a database dropped, locked or read-only, its tables
gone: not the constraint or type errors of a bug, which stay internal errors. An SQLite
deployment never loads psycopg for this.
"""

from __future__ import annotations

import sqlite3
import sys

from app.core.errors import StorageUnavailable
from app.settings import PostgresDb, SqliteDb

# SQLite's "database is locked", "unable to open database file", "no such table", I/O.
SQLITE_FAILURES: tuple[type[Exception], ...] = (sqlite3.OperationalError,)


def _postgres_failures() -> tuple[type[Exception], ...]:
    import psycopg
    from psycopg import errors

    # OperationalError covers psycopg_pool.PoolTimeout and a terminated connection;
    # InterfaceError a connection already closed; UndefinedTable the schema gone;
    # ReadOnlySqlTransaction a primary that failed over to a standby.
    return (
        psycopg.OperationalError,
        psycopg.InterfaceError,
        errors.UndefinedTable,
        errors.ReadOnlySqlTransaction,
    )


def failures(db: SqliteDb | PostgresDb) -> tuple[type[Exception], ...]:
    """The exception types of `db`'s backend that mean the database does not answer now."""
    if isinstance(db, PostgresDb):
        return _postgres_failures()
    return SQLITE_FAILURES


def is_lost(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, says the database does not answer now."""
    kinds = SQLITE_FAILURES + (_postgres_failures() if "psycopg" in sys.modules else ())
    seen: BaseException | None = exc
    for _ in range(5):  # a wrapper's cause, not an endless chain
        if seen is None:
            return False
        if isinstance(seen, kinds) or (
            isinstance(seen, StorageUnavailable) and seen.code == "storage_unavailable"
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
