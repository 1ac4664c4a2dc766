"""One run per thread at a time, in this process: a lease per thread."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from app.core.errors import Conflict

THREAD_BUSY = "thread {thread_id} already has a run in progress; wait for it to finish"


class ThreadLocks:
    """One run per thread at a time, in this process."""

    def __init__(self, *, abandoned_wait_s: float = 5.0) -> None:
        self._leases: dict[str, Lease] = {}
        self._abandoned_wait_s = abandoned_wait_s

    def busy(self, thread_id: str) -> bool:
        return thread_id in self._leases

    async def claim(self, thread_id: str) -> Lease:
        """The thread's lease; refuse with 409 while another run holds it.

        A run whose client has gone away is being cancelled: wait (briefly) for it
        to let go instead of refusing, so a "stop, then send" from a UI just works.
        """
        held = self._leases.get(thread_id)
        if held is not None and held.abandoned:
            with suppress(TimeoutError):
                async with asyncio.timeout(self._abandoned_wait_s):
                    await held.released.wait()
            held = self._leases.get(thread_id)
        if held is not None:
            raise Conflict("thread_busy", THREAD_BUSY.format(thread_id=thread_id))
        lease = Lease(self, thread_id)
        self._leases[thread_id] = lease
        return lease

    def _release(self, lease: Lease) -> None:
        if self._leases.get(lease.thread_id) is lease:
            del self._leases[lease.thread_id]


class Lease:
    """A claim on one thread; `release()` is idempotent."""

    __slots__ = ("_locks", "abandoned", "released", "thread_id")

    def __init__(self, locks: ThreadLocks, thread_id: str) -> None:
        self._locks = locks
        self.thread_id = thread_id
        self.abandoned = False
        self.released = asyncio.Event()

    def abandon(self) -> None:
        """The client went away: the run is about to be cancelled."""
        self.abandoned = True

    def release(self) -> None:
        self._locks._release(self)
        self.released.set()
