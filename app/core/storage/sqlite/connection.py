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

Its files hold users' conversations: `private_files(path)` creates the database file
0600 before SQLite opens it (SQLite gives its `-wal` and `-shm` files the main file's
mode, whatever the umask), its directory 0700 when it makes it; the writer, once open,
takes the group's and others' bits off the files an older version left readable
(`tighten`, each logged). Every
connection sets `secure_delete` (deleted rows are overwritten with zeros, not left in
free pages); `truncate_wal(conn)`, after a deletion, copies the WAL into the file and
empties it, so the WAL's older frames no longer hold what was deleted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import TypeVar

from app.core.errors import StorageUnavailable
from tools.files import PRIVATE_FILE, create_private, private_dir

T = TypeVar("T")
logger = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 30.0
# Every connection to the file: WAL lets a reader (another process, a `GET
# /api/threads`) see a consistent file while a run writes; NORMAL sync is durable across
# process crashes; secure_delete zeroes what a DELETE frees (some builds, Debian's
# among them, have it on by default, others not).
PRAGMAS = ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA secure_delete=ON")
# How long a WAL truncation after a deletion waits for other connections' reads (and
# another process's write) to end; it holds the writer meanwhile. Not done then, the WAL
# keeps those frames until writes reuse their place or the next truncation empties it.
TRUNCATE_WAIT_S = 1.0
SIDE_FILES = ("-wal", "-shm", "-journal")
TIGHTENED = "%s was readable by others (mode %o), made %o: only its owner may read a database file"
CANNOT_TIGHTEN = "%s is readable by others (mode %o) and cannot be made %o: %s"


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


def private_files(path: Path) -> None:
    """Create the database file at `path` private, before SQLite opens it: a missing file
    empty and 0600 (SQLite takes an empty file as a new database, and gives the
    `-wal`/`-shm` files it creates the same mode), a missing directory 0700. OSError when
    the file cannot be created (the caller says why)."""
    private_dir(path.parent)
    with suppress(FileExistsError):
        os.close(create_private(path))


def tighten(path: Path) -> None:
    """Take the group's and others' bits off the database file and its side files as an
    older version left them (0644 under the usual umask), each logged. Called once the
    file has opened as a database: a file that is not one is not ours to change."""
    for file in (path, *(path.with_name(path.name + side) for side in SIDE_FILES)):
        _tighten(file)


def _tighten(file: Path) -> None:
    try:
        found = os.stat(file)
    except FileNotFoundError:
        return
    mode = stat.S_IMODE(found.st_mode)
    if not stat.S_ISREG(found.st_mode) or not mode & ~PRIVATE_FILE & 0o777:
        return  # a directory is the caller's error to report; a private file stays as it is
    private = mode & PRIVATE_FILE
    try:
        os.chmod(file, private)
    except OSError as exc:  # not its owner: the operator's to fix, the service goes on
        logger.warning(CANNOT_TIGHTEN, file, mode, private, exc.strerror or exc)
        return
    logger.warning(TIGHTENED, file, mode, private)


def truncate_wal(conn: sqlite3.Connection) -> bool:
    """Checkpoint the WAL into the database file and empty it; False when other
    connections' reads kept it from finishing within TRUNCATE_WAIT_S (then it stays)."""
    busy = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout={int(TRUNCATE_WAIT_S * 1000)}")
    try:
        row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        restored = busy[0] if busy is not None else int(BUSY_TIMEOUT_S * 1000)
        conn.execute(f"PRAGMA busy_timeout={int(restored)}")
    return row is not None and row[0] == 0


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
async def open_sqlite(
    path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S
) -> AsyncIterator[SqliteConnection]:
    """The writer connection to the database file at `path` (created if needed, private);
    a write waits at most `busy_timeout_s` for another process's lock, then fails."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
    loop = asyncio.get_running_loop()

    def writer() -> sqlite3.Connection:
        private_files(path)
        # Autocommit (transactions are explicit); wait for another process's lock
        # rather than fail.
        conn = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        for pragma in PRAGMAS:
            conn.execute(pragma)
        tighten(path)  # after the PRAGMAs: it is a database, and its -wal/-shm are there
        return conn

    conn = await loop.run_in_executor(pool, writer)
    try:
        yield SqliteConnection(conn, pool)
    finally:
        await loop.run_in_executor(pool, conn.close)
        pool.shutdown(wait=True)


CANNOT_OPEN = (
    "cannot open the SQLite file {path} ({reason}): set AGENT_DB to a file path in a "
    "directory this process can write to"
)


def check(path: Path) -> None:
    """Open (or create) the database file at `path` once; StorageUnavailable naming it
    and the reason when that fails (a directory, a file that is not a database...)."""
    try:
        private_files(path)
        conn = sqlite3.connect(path, timeout=5.0)
        try:
            conn.execute("PRAGMA schema_version").fetchone()  # reads the header: a real file
        finally:
            conn.close()
    except (OSError, sqlite3.Error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise StorageUnavailable(
            "database_unreachable", CANNOT_OPEN.format(path=path, reason=reason)
        ) from None


async def missing_tables(path: Path, tables: Sequence[str], timeout_s: float) -> list[str]:
    """Which of `tables` the file at `path` lacks (all of them when it is gone), read on a
    connection of its own within `timeout_s`; never creates the file."""

    def read() -> list[str]:
        uri = path.absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout_s)
        except sqlite3.OperationalError:  # no file there any more
            return list(tables)
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        finally:
            conn.close()
        found = {row[0] for row in rows}
        return [table for table in tables if table not in found]

    async with asyncio.timeout(timeout_s):
        return await asyncio.to_thread(read)
