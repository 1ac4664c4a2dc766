"""Checkpoint retention: prune one database's checkpoints and idle threads.

LangGraph's savers keep every checkpoint forever. `prune(saver, store, keep=N,
idle_s=S)` does, for one database (SQLite or PostgreSQL, the saver's own tables):

- per thread and checkpoint namespace, it keeps the latest `keep` checkpoints (by
  checkpoint id, LangGraph's own order) and deletes the older ones together with their
  pending writes; on PostgreSQL also the channel blobs that only deleted checkpoints
  referenced (blobs are shared between checkpoints by channel and version). A kept
  checkpoint whose parent is deleted is left with no parent. The latest checkpoint
  always stays, with its writes: a pending question (interrupt) can still be answered.
- with `idle_s`, a thread whose latest activity (its latest checkpoint, or its latest
  run's start or end) is older than `idle_s` seconds is removed entirely: checkpoints,
  writes, blobs, and through the run store its runs, event logs and list entry.
- a thread with a `queued` or `running` run is skipped entirely: such a run may still
  fork from (rollback) or compare with (recovery) the checkpoint it started from.
  Whether a thread has one is read after the checkpoints are, and what is deleted is
  only what was older than the kept ones then: a run that starts meanwhile starts from
  a checkpoint that stays.

After deleting anything it scrubs the store (`RunStore.scrub`: on SQLite the WAL is
emptied, the deleted rows having been zeroed in the file). `react-agent prune` then
compacts the database (`RunStore.compact`: VACUUM); the server's periodic prune does not,
since a VACUUM holds every writer of the file (SQLite) for as long as it takes.

`dry_run` counts without deleting. The counts: threads seen (with checkpoints or runs),
threads skipped (a run in progress), checkpoints removed (idle threads' included) and
threads removed.

`periodic_prune(saver, store, settings)` is the server's own schedule: `prune` every
AGENT_PRUNE_EVERY_S seconds (off unless set). The first prune runs at start-up (a
server that restarts more often than the period still prunes), in the background; a
failed prune is logged and the next one tries again (with several workers each prunes:
one that collides with another's fails, and the next period does it).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from app.core.storage.runs import RunStore
from app.settings import Settings

logger = logging.getLogger(__name__)

DAY_S = 86400.0
# UUID v6 counts 100 ns ticks from 1582-10-15; this many of them before the Unix epoch.
_UUID_EPOCH_TICKS = 0x01B21DD213814000
UNSUPPORTED = "checkpoint retention supports the SQLite and PostgreSQL savers, not {saver}"

# One row per (thread, namespace): its checkpoint count, its latest checkpoint id and
# the `keep`-th latest one (NULL when it has no more than `keep`): the oldest it keeps.
_SCAN = """
SELECT thread_id, checkpoint_ns, COUNT(*), MAX(checkpoint_id),
       MAX(CASE WHEN rank = {keep} THEN checkpoint_id END)
FROM (
    SELECT thread_id, checkpoint_ns, checkpoint_id, ROW_NUMBER() OVER (
        PARTITION BY thread_id, checkpoint_ns ORDER BY checkpoint_id DESC
    ) AS rank
    FROM checkpoints
) AS ranked
GROUP BY thread_id, checkpoint_ns
"""


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one prune did (or, dry, would do)."""

    threads_seen: int
    threads_skipped: int
    checkpoints_removed: int
    threads_removed: int


@dataclass(frozen=True, slots=True)
class Surplus:
    """A namespace of a thread with more than `keep` checkpoints: those older than
    `oldest_kept` go."""

    thread_id: str
    checkpoint_ns: str
    oldest_kept: str
    count: int


@dataclass(slots=True)
class _Scan:
    """The checkpoint tables as read once: per thread its checkpoint count and latest id."""

    counts: dict[str, int]
    latest: dict[str, str]
    surplus: list[Surplus]


class _Tables(Protocol):
    """One saver's tables."""

    async def scan(self, keep: int) -> _Scan: ...

    async def trim(self, thread_id: str, namespaces: list[Surplus]) -> int:
        """Delete the thread's checkpoints older than each namespace's oldest kept one,
        in one transaction; how many went."""
        ...


def _scan(rows: Iterable[tuple[Any, ...]], keep: int) -> _Scan:
    scan = _Scan(counts=defaultdict(int), latest={}, surplus=[])
    for thread_id, ns, count, latest, oldest_kept in rows:
        scan.counts[thread_id] += int(count)
        scan.latest[thread_id] = max(latest, scan.latest.get(thread_id, latest))
        if count > keep:
            scan.surplus.append(Surplus(thread_id, ns, oldest_kept, int(count)))
    return scan


class _SqliteTables:
    """AsyncSqliteSaver's `checkpoints` and `writes`, on its connection, under its lock."""

    def __init__(self, saver: AsyncSqliteSaver) -> None:
        self.saver = saver

    async def scan(self, keep: int) -> _Scan:
        async with self.saver.lock, self.saver.conn.execute(_SCAN.format(keep=int(keep))) as cur:
            rows = await cur.fetchall()
        return _scan((tuple(row) for row in rows), keep)

    async def trim(self, thread_id: str, namespaces: list[Surplus]) -> int:
        conn = self.saver.conn
        removed = 0
        async with self.saver.lock:
            # IMMEDIATE: take the write lock first, so another process's writer is
            # waited for instead of failing the transaction half-way.
            await conn.execute("BEGIN IMMEDIATE")
            try:
                for ns in namespaces:
                    key = (thread_id, ns.checkpoint_ns, ns.oldest_kept)
                    where = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?"
                    await conn.execute(f"DELETE FROM writes {where}", key)
                    cursor = await conn.execute(f"DELETE FROM checkpoints {where}", key)
                    removed += cursor.rowcount
                    await conn.execute(
                        "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = ?"
                        " AND checkpoint_ns = ? AND parent_checkpoint_id < ?",
                        key,
                    )
            except BaseException:
                await conn.rollback()
                raise
            await conn.commit()
        return removed


class _PostgresTables:
    """AsyncPostgresSaver's `checkpoints`, `checkpoint_writes` and `checkpoint_blobs`.

    Statements are not prepared: planned with their values, an `= ANY(array)` uses the
    index (a generic plan checks each row against the array, LangGraph's prune notes).
    """

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        from psycopg_pool import AsyncConnectionPool

        conn = getattr(self.saver, "conn")  # noqa: B009 (typed as either)
        if isinstance(conn, AsyncConnectionPool):
            async with conn.connection() as pooled:
                yield pooled
        else:  # one connection: the saver's lock keeps its statements apart from ours
            async with getattr(self.saver, "lock"):  # noqa: B009
                yield conn

    async def scan(self, keep: int) -> _Scan:
        from psycopg.rows import tuple_row

        async with self._connection() as conn, conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute(_SCAN.format(keep=int(keep)), prepare=False)
            rows = await cur.fetchall()
        return _scan(rows, keep)

    async def trim(self, thread_id: str, namespaces: list[Surplus]) -> int:
        from psycopg.rows import tuple_row

        removed = 0
        async with (
            self._connection() as conn,
            conn.transaction(),
            conn.cursor(row_factory=tuple_row) as cur,
        ):
            for ns in namespaces:
                key = (thread_id, ns.checkpoint_ns, ns.oldest_kept)
                where = "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id < %s"
                await cur.execute(f"DELETE FROM checkpoint_writes {where}", key, prepare=False)
                # Each deleted checkpoint's (channel, version) pairs, as text: how the
                # saver itself matches them with blobs (jsonb_each_text).
                await cur.execute(
                    f"DELETE FROM checkpoints {where} RETURNING (SELECT array_agg(ARRAY[v.key,"
                    " v.value]) FROM jsonb_each_text(checkpoint -> 'channel_versions') AS v)",
                    key,
                    prepare=False,
                )
                deleted = await cur.fetchall()
                removed += len(deleted)
                await cur.execute(
                    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE thread_id = %s"
                    " AND checkpoint_ns = %s AND parent_checkpoint_id < %s",
                    key,
                    prepare=False,
                )
                freed = {(ch, v) for (pairs,) in deleted for ch, v in pairs or ()}
                if not freed:
                    continue
                # Blobs are shared by (channel, version): only those no remaining
                # checkpoint references go. A checkpoint saved meanwhile references
                # new versions or ones the kept checkpoints reference: never these.
                await cur.execute(
                    "SELECT DISTINCT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL"
                    " jsonb_each_text(c.checkpoint -> 'channel_versions') AS v"
                    " WHERE c.thread_id = %s AND c.checkpoint_ns = %s",
                    key[:2],
                    prepare=False,
                )
                garbage = freed - {(ch, v) for ch, v in await cur.fetchall()}
                by_channel: dict[str, list[str]] = defaultdict(list)
                for channel, version in garbage:
                    by_channel[channel].append(version)
                for channel, versions in by_channel.items():
                    await cur.execute(
                        "DELETE FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s"
                        " AND channel = %s AND version = ANY(%s)",
                        (*key[:2], channel, versions),
                        prepare=False,
                    )
        return removed


def _tables(saver: BaseCheckpointSaver) -> _Tables:
    if isinstance(saver, AsyncSqliteSaver):
        return _SqliteTables(saver)
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    if isinstance(saver, AsyncPostgresSaver):
        return _PostgresTables(saver)
    raise TypeError(UNSUPPORTED.format(saver=type(saver).__name__))


def checkpoint_time(checkpoint_id: str) -> float | None:
    """When a checkpoint was made, from its id (LangGraph's are UUID v6: time first);
    None for an id that is not one."""
    try:
        value = uuid.UUID(checkpoint_id)
    except ValueError:
        return None
    if value.version != 6:
        return None
    ticks = ((value.int >> 80) << 12) | ((value.int >> 64) & 0xFFF)
    return (ticks - _UUID_EPOCH_TICKS) / 1e7


async def _latest_time(saver: BaseCheckpointSaver, thread_id: str, checkpoint_id: str) -> float:
    """The time of the thread's latest checkpoint: from its id, else its `ts`; 0 unknown."""
    found = checkpoint_time(checkpoint_id)
    if found is not None:
        return found
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = await saver.aget_tuple(config)  # type: ignore[arg-type]
    ts = saved.checkpoint.get("ts") if saved is not None else None
    try:
        return datetime.fromisoformat(str(ts)).timestamp() if ts else 0.0
    except ValueError:
        return 0.0


async def prune(
    saver: BaseCheckpointSaver,
    store: RunStore,
    *,
    keep: int,
    idle_s: float | None = None,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneResult:
    """Prune the database of `saver` and `store` (see the module); what it removed."""
    if keep < 1:
        raise ValueError("keep must be at least 1: the latest checkpoint always stays")
    tables = _tables(saver)
    now = time.time() if now is None else now
    scan = await tables.scan(keep)
    # Read after the checkpoints: a run that starts later starts from a checkpoint the
    # scan saw as kept (or a newer one), so nothing it needs is deleted.
    summaries = {s.thread_id: s.updated_at for s in await store.threads(None, sys.maxsize)}
    busy = {stored.record.thread_id for stored in await store.active()}
    seen = scan.counts.keys() | summaries.keys()

    idle: set[str] = set()
    if idle_s is not None:
        cutoff = now - idle_s
        for thread_id in seen - busy:
            latest = scan.latest.get(thread_id)
            last = summaries.get(thread_id, 0.0)
            if latest is not None and last < cutoff:
                last = max(last, await _latest_time(saver, thread_id, latest))
            if last < cutoff:
                idle.add(thread_id)

    trims: dict[str, list[Surplus]] = defaultdict(list)
    for surplus in scan.surplus:
        if surplus.thread_id not in busy and surplus.thread_id not in idle:
            trims[surplus.thread_id].append(surplus)
    removed = sum(scan.counts.get(thread_id, 0) for thread_id in idle)
    if dry_run:
        removed += sum(ns.count - keep for namespaces in trims.values() for ns in namespaces)
        return PruneResult(len(seen), len(busy & seen), removed, len(idle))

    for thread_id, namespaces in trims.items():
        removed += await tables.trim(thread_id, namespaces)
    if idle:
        # Read again just before: a run may have started on an idle thread since.
        busy |= {stored.record.thread_id for stored in await store.active()}
    gone = 0
    for thread_id in sorted(idle - busy):
        await saver.adelete_thread(thread_id)
        await store.forget_thread(thread_id)
        gone += 1
    removed -= sum(scan.counts.get(thread_id, 0) for thread_id in idle & busy)
    if removed or gone:
        await store.scrub()
    logger.info(
        "pruned: %d threads seen, %d skipped, %d checkpoints removed, %d threads removed",
        len(seen),
        len(busy & seen),
        removed,
        gone,
    )
    return PruneResult(len(seen), len(busy & seen), removed, gone)


@asynccontextmanager
async def periodic_prune(
    saver: BaseCheckpointSaver, store: RunStore, settings: Settings
) -> AsyncIterator[None]:
    """Prune every `settings.agent_prune_every_s` seconds while inside (unset: never)."""
    every = settings.agent_prune_every_s
    if every is None:
        yield
        return
    task = asyncio.create_task(_prune_every(saver, store, settings, every), name="prune")
    try:
        yield
    finally:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task


async def _prune_every(
    saver: BaseCheckpointSaver, store: RunStore, settings: Settings, every: float
) -> None:
    idle_days = settings.agent_prune_idle_days
    while True:
        try:
            await prune(
                saver,
                store,
                keep=settings.agent_prune_keep,
                idle_s=None if idle_days is None else idle_days * DAY_S,
            )
        except Exception:  # the next period tries again; the service goes on meanwhile
            logger.exception("the periodic prune failed")
        await asyncio.sleep(every)  # the schedule itself, not a wait for a result
