"""Where A2A is routed: the A2A stack (`app.http.a2a.endpoint`) loads after start-up."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp

from app.http.a2a.paths import CARD_PATH, PATH
from app.http.background import LaterApp


def mount_a2a(app: FastAPI) -> LaterApp:
    """Route the card and the JSON-RPC endpoint; enter the result's `running()` in the
    lifespan, after the run core is open (its agents are the card's skills)."""

    @asynccontextmanager
    async def build() -> AsyncIterator[ASGIApp]:
        module = await asyncio.to_thread(importlib.import_module, "app.http.a2a.endpoint")
        listing = [(info.id, info.description) for info in app.state.service.listing]
        yield module.a2a_app(app, listing)

    later = LaterApp("A2A", build)
    app.router.routes.append(Route(CARD_PATH, later, methods=["GET"], include_in_schema=False))
    app.router.routes.append(Route(PATH, later, methods=["POST"], include_in_schema=False))
    return later
