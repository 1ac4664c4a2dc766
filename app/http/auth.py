"""Who may call a route: the one check every API route goes through (`authorize`).

It runs as a dependency of each router (the API, the probes' `/metrics`, and every
protocol mounted beside them): it finds the caller (`app.core.users.access.Access`),
counts the request against the caller's rate, and, on a route whose path names a
`thread_id`, answers 404 when the thread is another user's (a run's path names its
thread, so its runs are covered too). Routes that need the caller itself (to own what
it creates, to list what it owns) declare `CallerOf`, which FastAPI resolves once per
request with the router's.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from opentelemetry import trace

from app.core.errors import Forbidden
from app.core.observability.logs import bind_user
from app.core.users.access import Access
from app.core.users.identity import Caller

ADMIN_ONLY = "only an admin may read this"
USER_ATTRIBUTE = "enduser.id"


def access_of(request: Request) -> Access:
    found: Access = request.app.state.access
    return found


async def authorize(request: Request) -> Caller:
    """The request's caller; 401 without a valid credential, 429 beyond its rate, 404 for
    a path naming another user's thread."""
    cached: Caller | None = getattr(request.state, "caller", None)
    if cached is not None:  # a second router's check on the same request
        return cached
    access = access_of(request)
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    bearer = credential.strip() if scheme.lower() == "bearer" else None
    # LangGraph's SDKs and Studio send their `api_key` as `x-api-key`: the same credential.
    bearer = bearer or request.headers.get("x-api-key", "").strip()
    header = request.app.state.settings.agent_trusted_user_header
    caller = await access.caller(
        bearer=bearer or None,
        proxy_user=request.headers.get(header) if header else None,
        peer=request.client.host if request.client else None,
    )
    request.state.caller = caller
    bind_user(caller.user_id)
    # The request's span (when traced) names its user, as OpenTelemetry's conventions do.
    trace.get_current_span().set_attribute(USER_ATTRIBUTE, caller.user_id)
    service = request.app.state.service
    await service.fair_use.request(caller)
    thread_id = request.path_params.get("thread_id")
    if isinstance(thread_id, str):
        await service.check_owner(thread_id, caller)
    return caller


async def admin_only(caller: Annotated[Caller, Depends(authorize)]) -> Caller:
    """`authorize`, then 403 unless the caller is an admin."""
    if not caller.admin:
        raise Forbidden("admin_only", ADMIN_ONLY)
    return caller


CallerOf = Annotated[Caller, Depends(authorize)]
