"""Where `/mcp` is routed: the MCP stack (`app.http.mcp.endpoint`) loads after start-up."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route
from starlette.types import ASGIApp

from app.http.background import LaterApp

PATH = "/mcp"


def mount_mcp(app: FastAPI) -> LaterApp:
    """Route PATH to the agents' MCP server; enter the result's `running()` in the lifespan."""

    @asynccontextmanager
    async def build() -> AsyncIterator[ASGIApp]:
        module = await asyncio.to_thread(importlib.import_module, "app.http.mcp.endpoint")
        endpoint = module.McpEndpoint(app)
        async with endpoint.running():
            yield endpoint

    later = LaterApp("MCP", build)
    # A Route (not a Mount): `/mcp` itself is the endpoint, and this app redirects no slashes.
    app.router.routes.append(
        Route(PATH, later, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
    return later
