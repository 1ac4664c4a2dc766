"""LangGraph's `AsyncPostgresSaver` on our pool, its two writes made one statement each.

`PooledPostgresSaver(pool, size=)` is the saver with the same tables, rows and conflict
rules; it differs where the saver assumes one shared connection or pays per row:

- its instance lock, which serialises every read and write of the process (langgraph
  issue 7259), is a semaphore of the pool's size;
- `aput` (a step's checkpoint and its channel blobs) and `aput_writes` (a task's writes)
  serialise their values here instead of on a worker thread (a thread hop per write for
  a few small values) and send one statement, the rows as arrays, instead of a pipeline
  of one statement per row.

Every run writes both at each step, and the last of them delays the run's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
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
UPSERT_WRITES = _WRITES.format(
    action="DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob"
)
INSERT_WRITES = _WRITES.format(action="DO NOTHING")

WriteRow = tuple[str, str, str, str, str, int, str, str, bytes]  # as the saver dumps them


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


class PooledPostgresSaver(AsyncPostgresSaver):
    """`AsyncPostgresSaver` on a pool of `size` connections (see the module)."""

    def __init__(self, pool: Pool, *, size: int) -> None:
        super().__init__(pool)
        self.lock = asyncio.Semaphore(size)  # type: ignore[assignment]

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
        async with self._cursor() as cur:
            await cur.execute(PUT_CHECKPOINT, params)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

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
        query = UPSERT_WRITES if all(w[0] in WRITES_IDX_MAP for w in writes) else INSERT_WRITES
        async with self._cursor() as cur:
            await cur.execute(query, _write_params(*key, rows))
