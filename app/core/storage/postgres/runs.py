"""The run store on PostgreSQL: the AGENT_DB database, beside the checkpoints.

`PostgresRunStore(pool)` shares the saver's pool: every operation takes one pooled
connection. A write runs all its statements in one transaction there; the two on every
run's path take fewer round trips: a log write is one statement (`write`), a decision
two (`_decide`: the lock and the reads, then the writes and the commit, each a pipeline
of prepared statements). The queries are `app.core.storage.sql`'s, `?` placeholders
turned into psycopg's `%s`. Times stay epoch seconds (`double precision`), so records
read the same as on SQLite. A run's end is announced by a NOTIFY in the transaction that
records it, heard by every process (`hear_ends`, `app.core.storage.postgres.listen`).
`setup()` is idempotent and runs under the set-up lock
(`app.core.storage.postgres.connection.open_pool`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any, ClassVar

from psycopg import AsyncConnection, AsyncCursor
from psycopg.rows import tuple_row

from app.core.errors import StorageUnavailable
from app.core.storage.assistants import ASSISTANTS_SCHEMA, ASSISTANTS_TABLES, SqlAssistantStore
from app.core.storage.postgres.connection import Pool
from app.core.storage.postgres.listen import NOTIFY_ADMITTED, NOTIFY_END, Connect, listening
from app.core.storage.runs import (
    HeardAdmission,
    HeardEnd,
    RunEnd,
    renamed,
    storable,
    threads_from_runs,
)
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
from app.core.storage.users import THREADS_BY_USER, USERS_SCHEMA, USERS_TABLES, SqlUserStore

# agent_runs.rowid: insertion order, named after SQLite's implicit column so that the
# shared queries break ties between runs created in the same instant the same way.
SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS agent_runs (
    thread_id text NOT NULL,
    run_id text NOT NULL,
    graph text NOT NULL,
    status text NOT NULL,
    created_at double precision NOT NULL,
    finished_at double precision,
    error_code text,
    error_message text,
    owner text NOT NULL,
    request text NOT NULL,
    checkpoint_before text,
    rowid bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (thread_id, run_id)
);
CREATE INDEX IF NOT EXISTS agent_runs_active ON agent_runs (created_at, rowid)
    WHERE status IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS agent_runs_finished ON agent_runs (finished_at);
CREATE TABLE IF NOT EXISTS agent_run_events (
    thread_id text NOT NULL,
    run_id text NOT NULL,
    seq integer NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (thread_id, run_id, seq)
);
CREATE TABLE IF NOT EXISTS agent_thread_leases (
    thread_id text PRIMARY KEY,
    run_id text NOT NULL,
    owner text NOT NULL,
    expires_at double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_thread_leases_owner ON agent_thread_leases (owner);
CREATE TABLE IF NOT EXISTS agent_replicas (
    owner text PRIMARY KEY,
    expires_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_messages (
    thread_id text NOT NULL,
    message_id text NOT NULL,
    type text NOT NULL,
    data bytea NOT NULL,
    rowid bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (thread_id, message_id)
);
CREATE INDEX IF NOT EXISTS agent_messages_order ON agent_messages (thread_id, rowid);
CREATE TABLE IF NOT EXISTS agent_created_threads (
    thread_id text PRIMARY KEY,
    metadata text NOT NULL,
    created_at double precision NOT NULL,
    user_id text NOT NULL DEFAULT 'admin'
);
ALTER TABLE agent_runs ADD COLUMN IF NOT EXISTS rollback_from text;
ALTER TABLE agent_runs ADD COLUMN IF NOT EXISTS cancel_requested integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS agent_schema (version integer NOT NULL);
"""
    + USERS_SCHEMA
    + ASSISTANTS_SCHEMA
)
# The schema's version, written last by `setup`: a database that has it (and every
# table) needs no set-up. Raise it with each change to the tables above.
# 2: agent_replicas, agent_runs.rollback_from/cancel_requested; 3: agent_messages;
# 4: agent_threads.title_by/origin; 5: users (app.core.storage.users), agent_threads.user_id,
# agent_created_threads; 6: agent_assistants, agent_assistant_versions
# (app.core.storage.assistants)
SCHEMA_VERSION = 6
TABLES = (
    "agent_runs",
    "agent_run_events",
    "agent_threads",
    "agent_thread_leases",
    "agent_replicas",
    "agent_messages",
    "agent_created_threads",
    "agent_schema",
    *USERS_TABLES,
    *ASSISTANTS_TABLES,
)
# What a prune's VACUUM covers: the tables deletions leave dead rows in (LangGraph's and ours).
VACUUMED = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "agent_runs",
    "agent_run_events",
    "agent_threads",
    "agent_thread_leases",
    "agent_messages",
)
# Created, and filled from the runs already recorded, when missing (as on SQLite).
THREADS_SCHEMA = """
CREATE TABLE agent_threads (
    thread_id text PRIMARY KEY,
    graph text NOT NULL,
    title text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX agent_threads_updated ON agent_threads (graph, updated_at);
"""
READ_ONLY = "the database takes no writes (a standby in recovery)"
# A log write is one statement (one round trip, its own transaction): the events, and
# with run ends every table a run's end changes (in data-modifying CTEs), as one JSON array
# parameter each, which costs the client a third of typed arrays' CPU.
EVENT_ROWS = "SELECT e->>0, e->>1, (e->>2)::integer, e->>3 FROM json_array_elements(%s::json) AS e"
INSERT_EVENTS = (
    f"INSERT INTO agent_run_events (thread_id, run_id, seq, data) {EVENT_ROWS}"
    " ON CONFLICT DO NOTHING"
)
WRITE_ENDS = (
    f"WITH events AS ({INSERT_EVENTS}),"
    " ended AS (SELECT e->>0 AS thread_id, e->>1 AS run_id, e->>2 AS status,"
    " (e->>3)::double precision AS finished_at, e->>4 AS error_code, e->>5 AS error_message,"
    " e->>6 AS owner FROM json_array_elements(%s::json) AS e),"
    " runs AS (UPDATE agent_runs r SET status=e.status, finished_at=e.finished_at,"
    " error_code=e.error_code, error_message=e.error_message FROM ended e"
    " WHERE r.thread_id=e.thread_id AND r.run_id=e.run_id AND r.owner=COALESCE(e.owner, r.owner)"
    " RETURNING r.thread_id, r.owner),"
    " leases AS (DELETE FROM agent_thread_leases l USING ended e WHERE l.thread_id=e.thread_id"
    " AND l.run_id=e.run_id AND l.owner=COALESCE(e.owner, l.owner)),"
    # one row per thread: an UPDATE ... FROM would take any one of several ends
    " threads AS (UPDATE agent_threads t SET updated_at=GREATEST(t.updated_at, e.finished_at)"
    " FROM (SELECT thread_id, max(finished_at) AS finished_at FROM ended GROUP BY thread_id) e"
    " WHERE t.thread_id=e.thread_id),"
    # Sent at the commit, to the processes whose runs wait for these threads
    # (`app.core.storage.postgres.listen`); only a select that reads it runs it.
    f" notified AS (SELECT {NOTIFY_END.format(thread='thread_id', owner='owner')} FROM runs)"
    " SELECT count(*) FROM notified"
)
# Every end is heard (NOTIFY) while the listening connection is up, and when it comes
# back everyone re-checks: this only covers a listener that cannot connect at all.
RECHECK_S = 5.0
# The second key keeps these locks apart from any other user of one-key advisory locks.
LOCK_THREAD = "SELECT pg_advisory_xact_lock(hashtext(%s), 7)"


@lru_cache(maxsize=256)
def _pg(sql: str) -> str:
    """`sql` with psycopg's placeholders (the shared queries have no literal `?` or `%`)."""
    return sql.replace("?", "%s")


def _statements(script: str) -> list[str]:
    return [statement for statement in script.split(";") if statement.strip()]


async def _locked_reads(
    conn: AsyncConnection[Any], thread_id: str, reads: Sequence[Step]
) -> list[AsyncCursor[tuple[Any, ...]]]:
    """Queue (in pipeline mode) BEGIN, the thread's lock and `reads`: their cursors."""
    await conn.execute("BEGIN")
    # Held to the transaction's end: one decision per thread at a time, database-wide.
    await conn.execute(LOCK_THREAD, (thread_id,))
    return [
        await conn.cursor(row_factory=tuple_row).execute(_pg(sql), params or None)
        for sql, params in reads
    ]


async def _writes_and_commit(conn: AsyncConnection[Any], steps: Sequence[Step]) -> None:
    for sql, params in steps:
        await conn.execute(_pg(sql), params or None)
    await conn.execute("COMMIT")


async def _rows(cursors: Sequence[AsyncCursor[tuple[Any, ...]]]) -> list[list[Sequence[Any]]]:
    return [list(await cursor.fetchall()) for cursor in cursors]


class PostgresRunStore(SqlRunStore, SqlUserStore, SqlAssistantStore):
    """The run store on the process's PostgreSQL pool."""

    GREATEST: ClassVar[str] = "GREATEST"
    NOW: ClassVar[str] = "extract(epoch from now())::double precision"
    recheck_s: ClassVar[float] = RECHECK_S
    ADMITTED: ClassVar[str | None] = NOTIFY_ADMITTED

    def __init__(self, pool: Pool, *, listen: Connect | None = None) -> None:
        """On `pool`; `listen` opens the connection that hears run ends (none: unheard)."""
        self._pool = pool
        self._listen = listen

    @asynccontextmanager
    async def hear_ends(
        self, heard: HeardEnd, *, admitted: HeardAdmission | None = None
    ) -> AsyncIterator[None]:
        if self._listen is None:
            yield
            return
        async with listening(self._listen, heard, admitted):
            yield

    @staticmethod
    async def current(conn: AsyncConnection[Any]) -> bool:
        """Whether the database has every table of ours at SCHEMA_VERSION."""
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute(
            "SELECT bool_and(to_regclass(name) IS NOT NULL) FROM unnest(%s::text[]) AS name",
            (list(TABLES),),
        )
        row = await cursor.fetchone()
        if row is None or not row[0]:
            return False
        await cursor.execute("SELECT max(version) FROM agent_schema")
        row = await cursor.fetchone()
        return row is not None and row[0] == SCHEMA_VERSION

    async def setup(self) -> None:
        """Create what is missing (idempotent), then record SCHEMA_VERSION, in one
        transaction; run under the set-up lock."""
        async with self._pool.connection() as conn, conn.transaction():
            for statement in _statements(SCHEMA):
                await conn.execute(statement, prepare=False)
            cursor = await conn.execute("SELECT to_regclass('agent_threads') IS NULL")
            row = await cursor.fetchone()
            if row is not None and next(iter(row.values())):
                await self._add_threads_table(conn)
            else:
                await self._add_thread_columns(conn)
            await conn.execute("DELETE FROM agent_schema")
            await conn.execute("INSERT INTO agent_schema (version) VALUES (%s)", (SCHEMA_VERSION,))

    async def _add_threads_table(self, conn: AsyncConnection[Any]) -> None:
        for statement in _statements(THREADS_SCHEMA):
            await conn.execute(statement, prepare=False)
        await self._add_thread_columns(conn)
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute(RUNS_FOR_THREADS)
        rows = threads_from_runs(await cursor.fetchall())
        if rows:
            await cursor.executemany(_pg(INSERT_THREAD), rows)

    async def _add_thread_columns(self, conn: AsyncConnection[Any]) -> None:
        """agent_threads' later columns; where they were missing, a title that is not its
        first message's is the user's."""
        cursor = conn.cursor(row_factory=tuple_row)
        await cursor.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = 'agent_threads' AND column_name = 'title_by'"
        )
        titled = await cursor.fetchone() is not None
        for name, kind in THREAD_COLUMNS.items():
            await conn.execute(
                f"ALTER TABLE agent_threads ADD COLUMN IF NOT EXISTS {name} {kind}", prepare=False
            )
        await conn.execute(THREADS_BY_USER, prepare=False)
        if titled:
            return
        await cursor.execute(TITLES_AND_FIRST_REQUESTS)
        rows = renamed(await cursor.fetchall())
        if rows:
            await cursor.executemany(_pg(MARK_RENAMED), rows)

    async def probe(self, timeout_s: float) -> None:
        """A pooled connection answers within `timeout_s`, on a primary (it takes writes)."""
        async with asyncio.timeout(timeout_s), self._pool.connection(timeout=timeout_s) as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute("SELECT pg_is_in_recovery()")
            row = await cursor.fetchone()
        if row is None or row[0]:
            raise StorageUnavailable("database_read_only", READ_ONLY)

    async def write(
        self, events: Iterable[tuple[str, str, int, str]], ends: Iterable[RunEnd] = ()
    ) -> None:
        rows, ends = list(events), list(ends)
        if not rows and not ends:
            return
        # Event data is JSON text (no raw NUL), a run end's message is `storable`.
        params = [json.dumps(rows, ensure_ascii=False)]
        if ends:
            params.append(
                json.dumps(
                    [
                        (
                            end.thread_id,
                            end.run_id,
                            end.status,
                            end.finished_at,
                            end.error.code if end.error else None,
                            storable(end.error.message) if end.error else None,
                            end.owner,
                        )
                        for end in ends
                    ],
                    ensure_ascii=False,
                )
            )
        await asyncio.shield(self._execute(WRITE_ENDS if ends else INSERT_EVENTS, params))

    async def _execute(self, sql: str, params: Sequence[Any]) -> None:
        async with self._pool.connection() as conn:  # autocommit: the statement's own transaction
            await conn.execute(sql, params)

    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any:
        # Shielded: the transaction completes even when the awaiting task is cancelled,
        # as the SQLite store's thread completes it.
        return await asyncio.shield(self._run_steps(steps, fetch))

    async def _run_steps(self, steps: Sequence[Step], fetch: bool) -> Any:
        async with self._pool.connection() as conn, conn.transaction():
            cursor = conn.cursor(row_factory=tuple_row)
            result: Any = [] if fetch else 0
            for sql, params in steps:
                if isinstance(params, list):
                    if not params:
                        continue
                    await cursor.executemany(_pg(sql), params)
                else:
                    await cursor.execute(_pg(sql), params)
                if fetch:
                    result = await cursor.fetchall() if cursor.description is not None else []
                else:
                    result = cursor.rowcount
            return result

    async def _decide(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None:
        # Shielded: the transaction completes even when the awaiting task is cancelled.
        await asyncio.shield(self._run_decision(thread_id, reads, decide))

    async def _run_decision(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None:
        # Two round trips, however many statements, each a prepared statement: the lock
        # and the reads in one pipeline, then the writes and the commit in another. Each
        # statement still reads what was committed before it: the lock's holder's
        # writes included.
        async with self._pool.connection() as conn:
            try:
                async with conn.pipeline() as pipeline:
                    cursors = await _locked_reads(conn, thread_id, reads)
                    await pipeline.sync()
                    await _writes_and_commit(conn, decide(await _rows(cursors)))
            except BaseException:
                await conn.rollback()
                raise

    async def scrub(self) -> None:
        return  # autovacuum (or `compact`) reclaims the dead rows; nothing is cheap here

    async def compact(self) -> None:
        # VACUUM cannot run in a transaction: the pool's connections are in autocommit.
        async with self._pool.connection() as conn:
            await conn.execute(f"VACUUM {', '.join(VACUUMED)}", prepare=False)

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        async with self._pool.connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(_pg(sql), params)
            return list(await cursor.fetchall())
