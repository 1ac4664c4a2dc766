"""A run reads its thread's checkpoint once: the check's read also starts the graph.

`prepare_run` reads the thread's latest checkpoint to check a request; the graph read
the same checkpoint again as it started: one more round trip to the database, and one
more decoding of the whole history, on every run. Nothing writes the thread between the
two reads: the database admitted the run to it, and a run that finds another run ended
since its read (`Admission.stale`) or waits its turn reads the thread again when it may
start.

`keep(kept)` around the check makes the saver record its read in `kept`; `reuse(kept)`
in the run's task answers the graph's first read of the same checkpoint from it, once.
Any other read, and every read after it, goes to the database. Both savers
(`app.core.storage.sqlite.saver`, `app.core.storage.postgres.saver`) read through `FirstReadReused`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

ReadKey = tuple[str, str, str | None]  # thread, namespace, checkpoint asked for (None: latest)


@dataclass(slots=True)
class KeptRead:
    """A checkpoint read: `open` until the saver records one, `used` once reused."""

    state: Literal["open", "kept", "used"] = "open"
    key: ReadKey | None = None
    found: CheckpointTuple | None = None


_current: ContextVar[KeptRead | None] = ContextVar("kept_read", default=None)


@contextmanager
def keep(kept: KeptRead) -> Iterator[KeptRead]:
    """Record in `kept` the first checkpoint read of the block."""
    token = _current.set(kept)
    try:
        yield kept
    finally:
        _current.reset(token)


def reuse(kept: KeptRead | None) -> None:
    """Answer this task's first read of `kept`'s checkpoint from it (None: read as usual)."""
    _current.set(kept)


def _key(config: RunnableConfig) -> ReadKey:
    configurable = config.get("configurable", {})
    return (
        str(configurable.get("thread_id")),
        configurable.get("checkpoint_ns", ""),
        configurable.get("checkpoint_id"),
    )


class FirstReadReused(BaseCheckpointSaver[str]):
    """Put before a saver class: its `aget_tuple` keeps and reuses reads (see the module)."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        kept = _current.get()
        if kept is None or kept.state == "used":
            return await super().aget_tuple(config)
        key = _key(config)
        if kept.state == "kept":
            if kept.key != key:
                return await super().aget_tuple(config)
            kept.state = "used"
            found, kept.found = kept.found, None
            return found
        found = await super().aget_tuple(config)
        kept.state, kept.key, kept.found = "kept", key, found
        return found
