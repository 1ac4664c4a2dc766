"""LangGraph's `AsyncPostgresSaver` on our pool, its two writes made one statement each.

`PooledPostgresSaver(pool, size=)` is the saver with the same tables, rows and conflict
rules; it differs where the saver assumes one shared connection or pays per row:

- its instance lock, which serialises every read and write of the process (langgraph
  issue 7259), is a semaphore of the pool's size;
- `aput` (a step's checkpoint and its channel blobs) and `aput_writes` (a task's writes)
  serialise their values here instead of on a worker thread (a thread hop per write for
  a few small values) and send one statement, the rows as arrays, instead of a pipeline
  of one statement per row;
- a task's writes wait `MERGE_TURNS` turns of the event loop for the thread's next
  checkpoint (after the thread's checkpoint being written, if one is): the loop puts a
  step's checkpoint right after its task's writes, and both then go in one statement,
  one transaction instead of two. Either way `aput_writes` returns once its rows are
  committed; writes to the special channels (an error, an interrupt) never wait.

Every run writes both at each step, and the last of them delays the run's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.postgres.base import WRITES_IDX_MAP
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from psycopg.types.json import Jsonb

from app.core.storage.first_read import FirstReadReused
from app.core.storage.postgres.connection import Pool

# The saver's UPSERT_CHECKPOINT_BLOBS_SQL and UPSERT_CHECKPOINTS_SQL in one statement.
_BLOBS = """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT %(thread_id)s, %(ns)s, * FROM unnest(
    %(channels)s::text[], %(versions)s::text[], %(types)s::text[], %(blobs)s::bytea[])
ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING
"""
_CHECKPOINT = """
INSERT INTO checkpoints
    (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
VALUES (%(thread_id)s, %(ns)s, %(id)s, %(parent)s, %(checkpoint)s, %(metadata)s)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id)
DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata
"""
# The saver's UPSERT_CHECKPOINT_WRITES_SQL / INSERT_CHECKPOINT_WRITES_SQL, rows as arrays.
_WRITES = """
INSERT INTO checkpoint_writes
    (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob)
SELECT %(thread_id)s, %(ns)s, * FROM unnest(
    %(w_checkpoints)s::text[], %(w_tasks)s::text[], %(w_paths)s::text[],
    %(w_idx)s::integer[], %(w_channels)s::text[], %(w_types)s::text[], %(w_blobs)s::bytea[])
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {action}
"""
PUT_CHECKPOINT = f"WITH blobs AS ({_BLOBS}) {_CHECKPOINT}"
PUT_CHECKPOINT_AND_WRITES = (
    f"WITH blobs AS ({_BLOBS}), writes AS ({_WRITES.format(action='DO NOTHING')}) {_CHECKPOINT}"
)
UPSERT_WRITES = _WRITES.format(
    action="DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
)
INSERT_WRITES = _WRITES.format(action="DO NOTHING")
# Enough for the loop's `aput` of a step: in the bench graph's runs 18 of every 20 task
# writes went with a checkpoint.
MERGE_TURNS = 3

WriteRow = tuple[str, str, str, str, str, int, str, str, bytes]  # as the saver dumps them


@dataclass(slots=True)
class _Waiting:
    """A thread's writes waiting for its next checkpoint; `done` once committed."""

    rows: list[WriteRow]
    done: asyncio.Future[None]


def _write_params(thread_id: str, ns: str, rows: Sequence[WriteRow]) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "ns": ns,
        "w_checkpoints": [row[2] for row in rows],
        "w_tasks": [row[3] for row in rows],
        "w_paths": [row[4] for row in rows],
        "w_idx": [row[5] for row in rows],
        "w_channels": [row[6] for row in rows],
        "w_types": [row[7] for row in rows],
        "w_blobs": [row[8] for row in rows],
    }


def _settle(waiting: _Waiting, error: BaseException | None) -> None:
    if waiting.done.done():
        return
    if error is None:
        waiting.done.set_result(None)
    else:
        waiting.done.set_exception(error)
        waiting.done.exception()  # its writers may all be gone: never "not retrieved"


class PooledPostgresSaver(FirstReadReused, AsyncPostgresSaver):
    """`AsyncPostgresSaver` on a pool of `size` connections (see the module)."""

    def __init__(self, pool: Pool, *, size: int) -> None:
        super().__init__(pool)
        self.lock = asyncio.Semaphore(size)  # type: ignore[assignment]
        self._waiting: dict[tuple[str, str], _Waiting] = {}
        self._flushes: set[asyncio.Task[None]] = set()
        self._putting: dict[tuple[str, str], asyncio.Event] = {}  # a thread's aput underway

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = configurable["thread_id"]
        checkpoint_ns = configurable["checkpoint_ns"]
        copy = checkpoint.copy()
        copy["channel_values"] = copy["channel_values"].copy()
        # As the saver does: primitive values stay inline in the checkpoint, the others
        # (and delta snapshots, marked inline) go to the blobs table.
        blob_values: dict[str, Any] = {}
        for key, value in checkpoint["channel_values"].items():
            if isinstance(value, _DeltaSnapshot):
                blob_values[key] = copy["channel_values"].pop(key)
                copy["channel_values"][key] = True
            elif value is None or isinstance(value, str | int | float | bool):
                pass
            else:
                blob_values[key] = copy["channel_values"].pop(key)
        versions = {k: v for k, v in new_versions.items() if k in blob_values}
        rows = self._dump_blobs(thread_id, checkpoint_ns, blob_values, versions)
        params = {
            "thread_id": thread_id,
            "ns": checkpoint_ns,
            "id": checkpoint["id"],
            "parent": configurable.get("checkpoint_id"),
            "channels": [row[2] for row in rows],
            "versions": [row[3] for row in rows],
            "types": [row[4] for row in rows],
            "blobs": [row[5] for row in rows],
            "checkpoint": Jsonb(copy),
            "metadata": Jsonb(get_serializable_checkpoint_metadata(config, metadata)),
        }
        thread = (thread_id, checkpoint_ns)
        waiting = self._waiting.pop(thread, None)
        putting = self._putting[thread] = asyncio.Event()
        try:
            if waiting is None:
                async with self._cursor() as cur:
                    await cur.execute(PUT_CHECKPOINT, params)
            else:
                params.update(_write_params(thread_id, checkpoint_ns, waiting.rows))
                async with self._cursor() as cur:
                    await cur.execute(PUT_CHECKPOINT_AND_WRITES, params)
        except BaseException as exc:
            if waiting is not None:
                _settle(waiting, exc)
            raise
        finally:
            putting.set()
            if self._putting.get(thread) is putting:
                del self._putting[thread]
        if waiting is not None:
            _settle(waiting, None)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def settled(self) -> None:
        """Once every task's writes that wait for a checkpoint are committed (or failed)."""
        while self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        key = (configurable["thread_id"], configurable["checkpoint_ns"])
        rows = self._dump_writes(*key, configurable["checkpoint_id"], task_id, task_path, writes)
        if all(w[0] in WRITES_IDX_MAP for w in writes):
            async with self._cursor() as cur:
                await cur.execute(UPSERT_WRITES, _write_params(*key, rows))
            return
        waiting = self._waiting.get(key)
        if waiting is None:
            waiting = _Waiting([], asyncio.get_running_loop().create_future())
            self._waiting[key] = waiting
            flush = asyncio.create_task(self._flush(key, waiting))
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)
        waiting.rows.extend(rows)
        # Shielded: a cancelled task's committed-or-not writes are decided by the flush.
        await asyncio.shield(waiting.done)

    async def _flush(self, key: tuple[str, str], waiting: _Waiting) -> None:
        """Write `waiting` on its own unless the thread's next `aput` took it meanwhile."""
        for _ in range(MERGE_TURNS):
            await asyncio.sleep(0)
        putting = self._putting.get(key)
        if putting is not None and self._waiting.get(key) is waiting:
            # The loop puts a step's checkpoint after the previous one is committed.
            await putting.wait()
            for _ in range(MERGE_TURNS):
                await asyncio.sleep(0)
        if self._waiting.get(key) is not waiting:
            return
        del self._waiting[key]
        try:
            async with self._cursor() as cur:
                await cur.execute(INSERT_WRITES, _write_params(*key, waiting.rows))
        except BaseException as exc:
            _settle(waiting, exc)
            if not isinstance(exc, Exception):
                raise
            return
        _settle(waiting, None)
