"""Run an ASGI app under uvicorn in a background thread on 127.0.0.1, port chosen by the OS."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from types import TracebackType
from typing import Any, Literal, Self

import uvicorn
from starlette.requests import Request
from starlette.types import ASGIApp


class ServerThread:
    """One uvicorn server in its own thread and event loop; `start()` returns once it accepts."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        lifespan: Literal["auto", "on", "off"] = "auto",
        startup_timeout_s: float = 10.0,
        graceful_shutdown_s: int = 1,
    ) -> None:
        self._config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan=lifespan,
            ws="none",
            timeout_graceful_shutdown=graceful_shutdown_s,
        )
        self._startup_timeout_s = startup_timeout_s
        self._server = uvicorn.Server(self._config)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.port = 0

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`, without a trailing slash."""
        if not self.port:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The server's event loop (only touch it through `call_soon_threadsafe`)."""
        if self._loop is None:
            raise RuntimeError("server not started")
        return self._loop

    def start(self) -> Self:
        """Bind, start serving and return once the server accepts connections."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name=f"double:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"server on port {self.port} died during startup") from (
                    self._error
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"server on port {self.port} did not start in time")
            self._thread.join(0.005)
        return self

    def stop(self) -> None:
        """Release hanging handlers, stop serving and join the thread."""
        thread = self._thread
        if thread is None:
            return
        self.release_hangs()
        self._server.should_exit = True
        thread.join(timeout=10.0)
        self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def release_hangs(self) -> None:
        """Wake every handler waiting in `hang()` (safe from any thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed between the check and the call
            loop.call_soon_threadsafe(self._open_gate)

    async def hang(self, seconds: float, request: Request | None = None) -> bool:
        """Wait `seconds` unless released, stopped or (with `request`) the client disconnects.

        Returns True when the full time elapsed. Pass `request` only from a handler that does
        not stream: a streaming response already listens for the disconnect itself.
        """
        gate = self._gate()
        waiters: list[asyncio.Task[Any]] = [asyncio.ensure_future(gate.wait())]
        if request is not None:
            waiters.append(asyncio.ensure_future(_until_disconnect(request)))
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in waiters:
                waiter.cancel()
        return not done

    def _gate(self) -> asyncio.Event:
        if self._release is None:
            self._release = asyncio.Event()
        return self._release

    def _open_gate(self) -> None:
        # A fresh event per release, so later hangs wait again.
        gate, self._release = self._release, None
        if gate is not None:
            gate.set()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            assert self._sock is not None
            loop.run_until_complete(self._server.serve(sockets=[self._sock]))
        except BaseException as exc:  # reported by start() when startup fails
            self._error = exc
        finally:
            # Background tasks the app left behind (e.g. sse-starlette's shutdown watcher)
            # would otherwise be destroyed pending, with a warning, when the loop closes.
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class ServedDouble:
    """A test double served by a ServerThread: start/stop and use as a context manager."""

    _server: ServerThread

    def start(self) -> Self:
        """Start serving (idempotent)."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging replies end."""
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
