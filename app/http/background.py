"""Protocol endpoints whose stacks load after start-up (`/mcp`, `/a2a`).

The MCP and A2A SDKs take most of a second to import; imported at start-up they would
delay the first `/healthz` answer by that much. A `LaterApp` is routed at once, builds
its app in the background once the server runs (the import in a thread, off the event
loop) and keeps it running until shutdown; a request that arrives before it is ready
waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import ServiceError

logger = logging.getLogger(__name__)

NOT_STARTED = "the {name} endpoint failed to start (the server's log has the details)"


class LaterApp:
    """An ASGI app made by `build` (an async context manager: its app lives inside it)."""

    def __init__(self, name: str, build: Callable[[], AbstractAsyncContextManager[ASGIApp]]):
        self._name = name
        self._build = build
        self._app: ASGIApp | None = None
        self._ready: asyncio.Event | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Build the app in the background while the block runs; close it after."""
        ready = self._ready = asyncio.Event()
        stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with self._build() as app:
                    self._app = app
                    ready.set()
                    await stop.wait()
            except Exception:  # the service serves on; this endpoint answers 503
                logger.exception("the %s endpoint failed to start", self._name)
            finally:
                self._app = None
                ready.set()

        task = asyncio.create_task(hold(), name=f"{self._name} endpoint")
        try:
            yield
        finally:
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._ready is not None:
            await self._ready.wait()
        if self._app is None:
            failed = ServiceError("internal_error", NOT_STARTED.format(name=self._name))
            body = {"detail": failed.message, "code": failed.code}
            await JSONResponse(body, failed.status)(scope, receive, send)
            return
        await self._app(scope, receive, send)
