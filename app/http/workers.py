"""`serve --workers N`: worker processes on one socket that share connections by load.

On a listening socket shared by several processes, the kernel wakes every worker for a
new connection and whichever loop calls accept() first takes it, uvloop every pending
one at once. Under load that splits connections unevenly: one worker queues runs while
another idles (per-worker CPU split up to 1.8 : 1 in a batch of 300 runs here). So each
worker accepts on its own task: when a connection waits, a worker holding more open
connections than the least loaded other one (counts on a board in shared memory, one
slot per worker, written by its worker only) leaves it to that one for `DEFER_S`, and
takes it only if it is still waiting then: a busy or stalled peer cannot stop the
socket. A dead peer's slot is ignored until its replacement takes it over.

`supervise(config, sock)` runs uvicorn's supervisor (signals, restarts, health checks)
with these workers; each serves `config.app` with uvicorn's own HTTP protocol.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import socket
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess, multiprocess

logger = logging.getLogger(__name__)

DEFER_S = 0.005
ACCEPT_RETRY_S = 0.1  # after accept() failed (out of file descriptors, say)

# The parent's board and the slots its live workers use, set by `supervise`.
_board: Any = None
_slots: dict[int, BalancedProcess] = {}


class Board:
    """Open connections per worker slot: `pid, count` pairs in shared memory."""

    def __init__(self, shared: Any) -> None:
        self._shared = shared
        self.size = len(shared) // 2

    def take(self, slot: int, pid: int) -> None:
        self._shared[2 * slot] = pid
        self._shared[2 * slot + 1] = 0

    def publish(self, slot: int, count: int) -> None:
        self._shared[2 * slot + 1] = count

    def least_other(self, slot: int) -> float:
        """The lowest count of the other live workers (infinite when there is none)."""
        least = float("inf")
        for other in range(self.size):
            pid, count = self._shared[2 * other], self._shared[2 * other + 1]
            if other == slot or pid == 0 or count >= least:
                continue
            if _alive(pid):
                least = count
        return least


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or its pid reused by another user
        return False
    return True


class BalancedServer(uvicorn.Server):
    """A worker's uvicorn server that accepts on its own task, when its turn comes."""

    def __init__(self, config: uvicorn.Config, board: Board, slot: int) -> None:
        super().__init__(config)
        self._board = board
        self._slot = slot
        self._accepting: asyncio.Task[None] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the app's start-up, no listener of uvicorn's
        if not sockets:
            return
        protocol = partial(
            self.config.http_protocol_class,  # type: ignore[call-arg]  # uvicorn's own call
            config=self.config,
            server_state=self.server_state,
            app_state=self.lifespan.state,
        )
        self._board.take(self._slot, os.getpid())
        self._accepting = asyncio.create_task(self._accept(sockets[0], protocol), name="accept")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with suppress(asyncio.CancelledError):
                await self._accepting
        await super().shutdown(sockets=sockets)

    async def _accept(self, sock: socket.socket, protocol: Callable[[], asyncio.Protocol]) -> None:
        loop = asyncio.get_running_loop()
        sock.listen(self.config.backlog)  # the parent only binds it (as for uvicorn's listener)
        sock.setblocking(False)
        while True:
            await _readable(loop, sock)  # a connection waits, for whichever worker takes it
            count = len(self.server_state.connections)
            self._board.publish(self._slot, count)
            if count > self._board.least_other(self._slot):
                await asyncio.sleep(DEFER_S)  # a less loaded worker takes it meanwhile
            try:
                conn, _ = sock.accept()
            except BlockingIOError:  # another worker took it
                continue
            except OSError:
                logger.exception("could not accept a connection")
                await asyncio.sleep(ACCEPT_RETRY_S)  # what failed may free up: retry
                continue
            try:
                conn.setblocking(False)
                # What uvicorn's own listener does: small SSE writes go out at once.
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.connect_accepted_socket(protocol, conn)
            except OSError:  # the client left already: this connection only, not the loop
                logger.debug("a connection closed as it was accepted", exc_info=True)
                conn.close()
            self._board.publish(self._slot, len(self.server_state.connections))


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


class BalancedProcess(multiprocess.Process):
    """uvicorn's worker process, serving with a `BalancedServer` in its board slot."""

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket]) -> None:
        # In the parent: the board and a slot no live worker holds go to the child with us.
        self.board = _board
        self.slot = next(
            slot
            for slot in range(len(_board) // 2)
            if slot not in _slots or not _slots[slot].process.is_alive()
        )
        _slots[self.slot] = self
        super().__init__(config, sockets)

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = BalancedServer(self.config, Board(self.board), self.slot)
        return self._server


def supervise(config: uvicorn.Config, sock: socket.socket) -> Multiprocess:
    """Run `config.workers` balanced workers on `sock` until they stop; the supervisor."""
    global _board
    _board = multiprocessing.get_context("spawn").RawArray("q", 2 * config.workers)
    _slots.clear()
    # uvicorn's supervisor makes (and remakes) its workers from this module's Process.
    default = multiprocess.Process
    multiprocess.Process = BalancedProcess  # type: ignore[misc]
    try:
        supervisor = Multiprocess(config, sockets=[sock])
        supervisor.run()
    finally:
        multiprocess.Process = default  # type: ignore[misc]
    return supervisor
