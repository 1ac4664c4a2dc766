"""Queued runs waiting for their thread's turn, woken by the ending rather than a poll.

The turn is the database's (`RunStore.claim_head`: the thread's oldest active run, once
none runs). Of the runs this process holds queued on one thread, only one at a time
asks the database (the asker); the others wait in-process for a grant or for the asker
to leave. The asker asks again when it is woken (`wake`: this process saw a run of the
thread end, or the store heard one end elsewhere, `RunStore.hear_ends`), else every
`RunStore.recheck_s`: the slow poll that finds what no one told it of (an end in
another process on SQLite, the end of a run a dead process left, once taken over).
A claim may grant another of the runs waiting here (the database admitted them in
another order than they started): that one goes, and the asker waits for its end.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field

from app.core.storage.runs import RunStore


@dataclass
class _Queue:
    """One thread's runs waiting here, in the order they came to wait."""

    waiting: list[str] = field(default_factory=list)
    granted: set[str] = field(default_factory=set)  # given the thread by a claim
    asker: str | None = None
    granted_here: bool = False  # since the last end: the next ask would find it running
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # a run ended: ask again
    stirred: asyncio.Event = field(default_factory=asyncio.Event)  # a grant, or no asker

    def stir(self) -> None:
        self.stirred.set()
        self.stirred = asyncio.Event()


class Turns:
    """The turns this process's queued runs wait for, one queue per thread."""

    def __init__(self, store: RunStore, owner: str, lease_s: float) -> None:
        self._store = store
        self._owner = owner
        self._lease_s = lease_s
        self._queues: dict[str, _Queue] = {}

    async def take(self, thread_id: str, run_id: str) -> None:
        """Return once the database has given the queued run its thread (leased to this
        process's owner). Cancelling the wait leaves the run queued."""
        queue = self._queues.setdefault(thread_id, _Queue())
        queue.waiting.append(run_id)
        try:
            while run_id not in queue.granted:
                if queue.asker is None:
                    queue.asker = run_id
                if queue.asker == run_id:
                    await self._ask(thread_id, queue)
                else:
                    await queue.stirred.wait()
        finally:
            queue.waiting.remove(run_id)
            queue.granted.discard(run_id)
            if queue.asker == run_id:
                queue.asker = None
                queue.stir()  # another becomes the asker
            if not queue.waiting and self._queues.get(thread_id) is queue:
                del self._queues[thread_id]

    async def _ask(self, thread_id: str, queue: _Queue) -> None:
        """Claim the thread for whichever waiting run is its head, else wait for an end."""
        changed = queue.changed  # an end while it asks is not missed
        if queue.granted_here:  # a run granted here holds the thread: wait for its end
            queue.granted_here = False
            await _wait(changed, self._store.recheck_s)
            return
        candidates = [run_id for run_id in queue.waiting if run_id not in queue.granted]
        claim = asyncio.ensure_future(
            self._store.claim_head(thread_id, candidates, self._owner, self._lease_s)
        )
        # Delivered even if the asker is cancelled meanwhile: the run it granted holds
        # the thread in the database and must learn so, or it would hold it for ever.
        claim.add_done_callback(lambda done: _grant(queue, done))
        claimed = await asyncio.shield(claim)
        if claimed is not None and claimed in queue.waiting:
            queue.granted.add(claimed)  # (its callback did so already, and told the others)
        if claimed == queue.asker:
            return
        await _wait(changed, self._store.recheck_s)

    def wake(self, thread_id: str | None) -> None:
        """A run of the thread ended (None: of any thread): its asker asks again now."""
        if thread_id is None:
            queues = list(self._queues.values())
        else:
            queues = [q for q in (self._queues.get(thread_id),) if q is not None]
        for queue in queues:
            queue.granted_here = False
            queue.changed.set()
            queue.changed = asyncio.Event()


async def _wait(event: asyncio.Event, timeout_s: float) -> None:
    with suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await event.wait()


def _grant(queue: _Queue, claim: asyncio.Future[str | None]) -> None:
    if claim.cancelled() or claim.exception() is not None:
        return  # the asker's own await raises it (or, cancelled, has no run to fail)
    claimed = claim.result()
    if claimed is not None and claimed in queue.waiting:
        queue.granted.add(claimed)
        queue.granted_here = True
        queue.stir()
