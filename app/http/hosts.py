"""The `Host` allow-list: a request addressed to a name this server does not answer to is
refused, before any route sees it.

Without it, a page on any site can rebind its own name to this server's address (DNS
rebinding) and read every thread through the visitor's browser: the browser thinks it
talks to that site. `AGENT_ALLOWED_HOSTS` (`Settings.allowed_hosts`) lists the names;
the port is ignored. A request with another `Host` (or none) is 400 `bad_host`.

The probes (`/healthz`, `/readyz`) are exempt: orchestrators call them by the pod's or
container's address (Kubernetes, Docker's and Caddy's health checks), which no list set
up front knows, and they tell nothing but "up" or "not ready". `/metrics` is not: a
scraper that calls by address needs that address in the list (or `*`).
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import BadRequest
from app.settings import host_name

BAD_HOST = (
    "this server does not answer to the host {host!r}: add it to AGENT_ALLOWED_HOSTS "
    "(comma-separated names, or * for any)"
)
# Paths answered whatever the Host: orchestrators probe by address.
PROBES = frozenset({"/healthz", "/readyz"})
SHOWN = 100  # characters of a refused Host quoted in the message


class HostGuard:
    """ASGI middleware: 400 `bad_host` unless the request's Host is one of `allowed`."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        raw = next((value for name, value in scope["headers"] if name == b"host"), b"")
        host = raw.decode("latin-1")
        if host_name(host) in self.allowed:
            await self.app(scope, receive, send)
            return
        refusal = BadRequest("bad_host", BAD_HOST.format(host=host[:SHOWN]))
        response = JSONResponse(
            {"detail": refusal.message, "code": refusal.code}, status_code=refusal.status
        )
        await response(scope, receive, send)
