"""Hearing run ends and admissions on PostgreSQL: LISTEN on a connection of the
process's own.

The transaction that records a run's end (`PostgresRunStore.write`) sends
`NOTIFY agent_run_ended` with `[thread_id, owner]`, the one that admits a run
`NOTIFY agent_run_admitted` with its thread's id, delivered at the commit to every
listening process. `listening(connect, heard, admitted)` keeps one connection per
process listening for the block's life: it calls `heard(thread_id, owner)` for each end
and `admitted(thread_id)` for each admission, and when the connection is lost it
reconnects (backing off) and calls `heard(None, None)` and `admitted(None)`, since what
was sent meanwhile reached no one. It never raises: while it cannot listen,
waiters re-check on their own (`RunStore.recheck_s`). Behind a pooler in transaction
mode (pgbouncer) a LISTEN has no session to stay in: nothing is heard, waiters re-check.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any

import psycopg
from psycopg import AsyncConnection

from app.core.storage.postgres.connection import connect_kwargs
from app.core.storage.runs import HeardAdmission, HeardEnd
from app.settings import PostgresDb

logger = logging.getLogger(__name__)

CHANNEL = "agent_run_ended"
# What the ending transaction sends, one per thread whose run it ended: `[thread, owner]`.
NOTIFY_END = f"pg_notify('{CHANNEL}', json_build_array({{thread}}, {{owner}})::text)"
ADMITTED_CHANNEL = "agent_run_admitted"
# What the admitting transaction sends: the thread's id (a statement of its own).
NOTIFY_ADMITTED = f"SELECT pg_notify('{ADMITTED_CHANNEL}', ?)"
READY_S = 5.0  # how long the start waits for the first LISTEN (then goes on without it)
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
LOST = "not hearing run ends (%s); waiting runs re-check on their own; retrying in %.1f s"

Connect = Callable[[], Awaitable[AsyncConnection[Any]]]


def connector(db: PostgresDb) -> Connect:
    """How `listening` connects to `db`: a session of its own, never pooled."""
    kwargs = connect_kwargs(db, prepare=False)  # autocommit: a LISTEN takes effect at once

    async def connect() -> AsyncConnection[Any]:
        return await AsyncConnection.connect(db.url, **kwargs)

    return connect


def _unheard(thread_id: str | None) -> None:
    pass  # no one asked to hear admissions


@asynccontextmanager
async def listening(
    connect: Connect, heard: HeardEnd, admitted: HeardAdmission | None = None
) -> AsyncIterator[None]:
    """Hear run ends (and admissions) for the block's life (see the module)."""
    ready = asyncio.Event()
    task = asyncio.create_task(
        _listen(connect, heard, admitted or _unheard, ready), name="run-end listener"
    )
    try:
        with suppress(TimeoutError):
            async with asyncio.timeout(READY_S):
                await ready.wait()
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _listen(
    connect: Connect, heard: HeardEnd, admitted: HeardAdmission, ready: asyncio.Event
) -> None:
    retry_s, lost = RETRY_FIRST_S, False
    while True:
        try:
            async with await connect() as conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                await conn.execute(f"LISTEN {ADMITTED_CHANNEL}")
                ready.set()
                if lost:
                    heard(None, None)
                    admitted(None)
                retry_s = RETRY_FIRST_S
                async for notify in conn.notifies():
                    if notify.channel == ADMITTED_CHANNEL:
                        _deliver_admission(notify.payload, admitted)
                    else:
                        _deliver(notify.payload, heard)
        except (psycopg.Error, OSError) as exc:
            logger.warning(LOST, " ".join(str(exc).split()) or type(exc).__name__, retry_s)
        ready.set()  # listening or not, the start goes on
        lost = True
        await asyncio.sleep(retry_s)  # backing off a database that refuses us
        retry_s = min(retry_s * 2, RETRY_MAX_S)


def _deliver(payload: str, heard: HeardEnd) -> None:
    try:
        thread_id, owner = json.loads(payload)
    except (ValueError, TypeError):  # not ours: someone else's NOTIFY on the channel
        return
    try:
        heard(str(thread_id), str(owner))
    except Exception:  # a listener's fault must not stop the listening
        logger.exception("handling a run's end failed")


def _deliver_admission(thread_id: str, admitted: HeardAdmission) -> None:
    try:
        admitted(thread_id)
    except Exception:  # a listener's fault must not stop the listening
        logger.exception("handling a run's admission failed")
