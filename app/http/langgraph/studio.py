"""LangGraph Studio against this server (`AGENT_STUDIO=true`, off by default).

Studio is a page on `https://smith.langchain.com` that calls the server from the
browser: it needs CORS for its origin (with the private-network preflight Chrome sends
before a public page reaches a local address, and the headers it reads exposed), and it
sends its JSON bodies as `text/plain`. A text body is what any page may send without a
preflight, so one is taken only from Studio's origin (a browser always names the origin
of a cross-site POST), only on LangGraph's API, and only with `AGENT_STUDIO=true`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware

from app.http.routes import require_json
from app.settings import Settings

STUDIO_ORIGIN = "https://smith.langchain.com"
# What the server's answers carry that a page reads (run links, search totals): the
# LangGraph SDK's `useStream` learns its run from Content-Location, its rejoin from Location.
EXPOSED = ["Content-Location", "Location", "X-Pagination-Total"]
# X-Api-Key: the LangGraph SDKs send their `apiKey` in it (agent-chat-ui's pages do).
UI_HEADERS = ["Authorization", "X-Api-Key", "Content-Type", "Accept", "Last-Event-ID"]


def allow_origins(app: FastAPI, settings: Settings) -> None:
    """CORS for AGENT_CORS_ORIGINS, plus Studio's origin with AGENT_STUDIO (whose page
    sends headers of its own, so any header it asks for is allowed)."""
    origins = list(settings.agent_cors_origins)
    if settings.agent_studio:
        origins.append(STUDIO_ORIGIN)
    if not origins:
        return
    cors: dict[str, Any] = {
        "allow_origins": origins,
        "allow_methods": ["GET", "POST", "PUT", "PATCH", "DELETE"],
        # Last-Event-ID: a rejoin (`.../stream`) from the allowed origin says where it left.
        "allow_headers": ["*"] if settings.agent_studio else UI_HEADERS,
        "expose_headers": EXPOSED,
    }
    if settings.agent_studio:
        cors.update(allow_private_network=True)
    app.add_middleware(CORSMiddleware, **cors)


def studio_text(request: Request) -> bool:
    """Whether the request is Studio's JSON sent as text/plain, and Studio is allowed."""
    settings: Settings = request.app.state.settings
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    return (
        settings.agent_studio
        and media == "text/plain"
        and request.headers.get("origin") == STUDIO_ORIGIN
    )


async def require_json_or_studio(request: Request) -> None:
    """`require_json`, but Studio's text/plain JSON passes when it is allowed."""
    if not studio_text(request):
        await require_json(request)
