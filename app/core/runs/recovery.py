"""This process among the others on the database: recovery, heartbeats, cancel watching.

At start-up `Recovery.recover` takes over the runs that dead processes left active. Two
background tasks then run for the service's life: the heartbeat renews this process's
thread leases every third of AGENT_RUN_LEASE_S, suspends the runs whose lease another
process took (it resumes them), and, on a server, takes over the runs of processes that
stopped renewing (a beat that fails has the database's tables checked, and put back if
they are gone: `AgentService.schema`); the cancel watcher stops the runs held here that
a cancel sent to another process named. Taking a run over is the service's
(`AgentService.take_over`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from contextlib import suppress
from typing import TYPE_CHECKING

from app.core.runs.run import RunPhase
from app.core.storage.runs import StoredRun

if TYPE_CHECKING:
    from app.core.runs.service import AgentService

logger = logging.getLogger(__name__)

HOST = socket.gethostname()
CANCEL_POLL_S = 0.25  # how soon a cancel sent to another process reaches a run held here
# The phases in which a run may still write to its thread: a lost lease stops them. A run
# recording its end writes only its record, which the store refuses to a lost owner.
LEASE_USERS: frozenset[RunPhase] = frozenset({"underway", "cancelling"})


def this_process() -> str:
    """This process as a run's owner: `host:pid`."""
    return f"{HOST}:{os.getpid()}"


class Recovery:
    """The service's part in the database's one run per thread: recover, beat, watch."""

    def __init__(self, service: AgentService) -> None:
        self._service = service
        self._heartbeat: asyncio.Task[None] | None = None
        self._cancel_watcher: asyncio.Task[None] | None = None

    async def recover(self) -> int:
        """Take over every run a dead process left queued or running; return how many.

        Known dead: a process of this machine that is gone (at once, whatever its
        lease says), or one that stopped renewing (`adopt`).
        """
        count = 0
        for stored in await self._service.store.active():
            if _dead(stored.owner) and await self._adopt(stored, force=True):
                count += 1
        return count + await self._adopt_orphans()

    def start(self, *, adopt: bool) -> None:
        """Start the heartbeat (leases; with `adopt`, takeovers) and the cancel watcher."""
        self._heartbeat = asyncio.create_task(self._beat(adopt), name="heartbeat")
        self._cancel_watcher = asyncio.create_task(self._watch_cancels(), name="cancel watcher")

    async def stop(self) -> None:
        """Stop both background tasks."""
        tasks = [task for task in (self._heartbeat, self._cancel_watcher) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _adopt_orphans(self) -> int:
        service = self._service
        count = 0
        for stored in await service.store.orphans():
            if service.closing:
                break
            if service.held(stored.record.thread_id, stored.record.run_id) is not None:
                continue  # held here: a renewal came late
            if await self._adopt(stored, force=_dead(stored.owner)):
                count += 1
        return count

    async def _adopt(self, stored: StoredRun, *, force: bool) -> bool:
        service = self._service
        if not await service.store.adopt(stored, service.owner, service.lease_s, force=force):
            return False
        thread_id, run_id = stored.record.thread_id, stored.record.run_id
        logger.info("taking over run %s on thread %s from %s", run_id, thread_id, stored.owner)
        await service.take_over(stored)
        return True

    async def _beat(self, adopt: bool) -> None:
        """Every third of the lease: renew ours, suspend the runs whose lease another
        process took, and with `adopt` take the runs no live process holds."""
        service = self._service
        while True:
            try:
                asked = time.monotonic()
                held = set(await service.store.renew(service.owner, service.lease_s))
                for run in service.held_runs():
                    leased = run.leased_at is not None and run.leased_at < asked
                    if leased and run.thread_id not in held and run.phase in LEASE_USERS:
                        logger.warning(
                            "lost the lease of thread %s: leaving run %s to its new holder",
                            run.thread_id,
                            run.run_id,
                        )
                        run.suspend()
                if adopt and not service.closing:
                    await self._adopt_orphans()
            except Exception:  # the next beat tries again; the lease outlives a few misses
                logger.exception("the heartbeat failed")
                # A database re-created empty gets its tables back without a readiness probe.
                with suppress(Exception):
                    await service.schema()
            await asyncio.sleep(service.lease_s / 3)

    async def _watch_cancels(self) -> None:
        """Cancel the runs held here that another process was asked to cancel."""
        service = self._service
        while True:
            await asyncio.sleep(CANCEL_POLL_S)
            if not service.held_runs():
                continue
            try:
                for thread_id, run_id in await service.store.cancel_requests(service.owner):
                    run = service.held(thread_id, run_id)
                    if run is not None:
                        run.cancel()
            except Exception:  # the next poll tries again
                logger.exception("could not read the cancel requests")


def _dead(owner: str) -> bool:
    """Whether the process that owned a run is gone (only known for this machine's)."""
    host, _, pid_text = owner.rpartition(":")
    if host != HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():  # a former process that had our pid (a container restart)
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
