"""LangGraph's `AsyncSqliteSaver`, its two writes each one transaction on our writer.

`WriterSqliteSaver(conn, writer)` reads through LangGraph's own code on `conn` (an
aiosqlite connection) and has the same tables, rows and conflict rules. Its `aput` (a
step's checkpoint) and `aput_writes` (a task's writes) run as one transaction on the
process's writer connection (`app.core.storage.sqlite.connection`) instead of a
statement and a commit sent one at a time, which held the file's write lock while the
event loop came back between them: another process's writers slept in SQLite's busy
handler meanwhile (with `serve --workers` their cores idle), and a run cancelled between
the statement and its commit left the lock held until that connection's next commit. Its
measured worth: bench/RESULTS.md, issue 27.3.

Every run writes both at each step, and the last of them delays the run's end.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from app.core.storage.sqlite.connection import SqliteConnection

# The saver's own statements.
PUT_CHECKPOINT = (
    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,"
    " parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_PUT_WRITES = (
    "INSERT OR {action} INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id,"
    " task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
UPSERT_WRITES = _PUT_WRITES.format(action="REPLACE")  # special channels (an interrupt)
INSERT_WRITES = _PUT_WRITES.format(action="IGNORE")


class WriterSqliteSaver(AsyncSqliteSaver):
    """`AsyncSqliteSaver` whose `aput` and `aput_writes` are each one transaction on the
    process's writer connection."""

    def __init__(self, conn: aiosqlite.Connection, writer: SqliteConnection) -> None:
        super().__init__(conn)
        self.writer = writer

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        await self.setup()
        configurable = config["configurable"]
        thread_id, checkpoint_ns = configurable["thread_id"], configurable["checkpoint_ns"]
        type_, serialized = self.serde.dumps_typed(checkpoint)
        row = (
            str(thread_id),
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            serialized,
            json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False).encode(
                "utf-8", "ignore"
            ),
        )
        await self.writer.transaction(lambda conn: conn.execute(PUT_CHECKPOINT, row))
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
        await self.setup()
        query = UPSERT_WRITES if all(w[0] in WRITES_IDX_MAP for w in writes) else INSERT_WRITES
        configurable = config["configurable"]
        key = (
            str(configurable["thread_id"]),
            str(configurable["checkpoint_ns"]),
            str(configurable["checkpoint_id"]),
            task_id,
            task_path,
        )
        rows = [
            (*key, WRITES_IDX_MAP.get(channel, idx), channel, *self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]

        def put(conn: sqlite3.Connection) -> None:
            conn.executemany(query, rows)

        await self.writer.transaction(put)
