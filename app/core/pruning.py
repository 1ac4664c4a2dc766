"""The server's periodic prune: `app.core.retention` every AGENT_PRUNE_EVERY_S seconds.

Off unless AGENT_PRUNE_EVERY_S is set. The first prune runs at start-up (a server that
restarts more often than the period still prunes), in the background; a failed prune
is logged and the next one tries again (with several workers each prunes: one that
collides with another's fails, and the next period does it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from langgraph.checkpoint.base import BaseCheckpointSaver

from app.core.retention import DAY_S, prune
from app.core.runs import RunStore
from app.settings import Settings

logger = logging.getLogger(__name__)


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
