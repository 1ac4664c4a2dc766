"""A lean `text/event-stream` response: encoded events out, keep-alives, cancel on disconnect.

Each event is one ASGI send with no per-event task or cancel scope (the costs the
benchmark found in sse-starlette's path). Idle streams get a `: ping` comment so that
proxies do not cut them, and a client that goes away cancels the producer at once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

PING = b": ping\n\n"


class EventStreamResponse(Response):
    """Stream `chunks` (already SSE-encoded) to the client."""

    media_type = "text/event-stream"

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        *,
        ping_s: float,
        on_disconnect: Callable[[], None],
        on_close: Callable[[], None],
    ) -> None:
        # No `super().__init__`: without a body there is no Content-Length (a stream).
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._chunks = chunks
        self._ping_s = ping_s
        self._on_disconnect = on_disconnect
        self._on_close = on_close
        self._last_send = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            self._last_send = time.monotonic()
            async with anyio.create_task_group() as group:
                group.start_soon(self._watch_disconnect, receive, group.cancel_scope)
                group.start_soon(self._keep_alive, send)
                async for chunk in self._chunks:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    self._last_send = time.monotonic()
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        except OSError:
            self._on_disconnect()  # the socket went away between two events
        finally:
            self._on_close()

    async def _watch_disconnect(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self._on_disconnect()
        scope.cancel()

    async def _keep_alive(self, send: Send) -> None:
        while True:
            await anyio.sleep(max(0.0, self._last_send + self._ping_s - time.monotonic()))
            if time.monotonic() - self._last_send >= self._ping_s:
                await send({"type": "http.response.body", "body": PING, "more_body": True})
                self._last_send = time.monotonic()
