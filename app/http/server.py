"""The FastAPI application: the run core served over HTTP, plus the web UI.

The lifespan opens the run core (`app.core.runs.service.open_service`) once, resuming the
runs a stopped process left, and closes it with the shutdown grace period; the routes
(`app.http.routes`) reach it through a dependency. Every refusal is a
`app.core.errors.ServiceError`, answered by one handler as JSON
`{"detail": <readable message>, "code": <machine code>}` with its status; a parameter
FastAPI refuses (422 `invalid_request`) and Starlette's own refusals (an unknown path:
404 `not_found`, a wrong method: 405 `method_not_allowed`) get the same shape. A path
with a trailing slash is 404 like any other unknown path, not a redirect (whose absolute
`Location` would repeat the request's `Host`). A request addressed to a host name not in
AGENT_ALLOWED_HOSTS is refused first (`app.http.hosts`); a body that is not in by its
deadline is 408 (`app.http.deadlines`). A request the database failed
(`app.core.storage.failures`: gone, locked, no connection within AGENT_DB_TIMEOUT_S) is
503 `storage_unavailable` with `Retry-After`; any other failure is 500 `internal_error`,
JSON too, its traceback logged. What `/openapi.json` and `/docs` say is `app.http.openapi`.
The app's telemetry (metrics, traces: `app.core.observability.telemetry`) is made here,
once, with the probes and the request counting of `app.http.observability`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from ag_ui.core import RunAgentInput
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException
from starlette.routing import compile_path

from app.core.errors import ErrorCode, Invalid, ServiceError, storage_unavailable
from app.core.observability.telemetry import Telemetry
from app.core.registry import start_mcp_servers
from app.core.runs.service import open_service
from app.core.storage.failures import failures
from app.core.storage.retention import periodic_prune
from app.core.users.access import Access
from app.http.a2a.mount import mount_a2a
from app.http.deadlines import BodyDeadline
from app.http.hosts import HostGuard
from app.http.langgraph import langgraph_api
from app.http.langgraph.studio import allow_origins
from app.http.mcp.mount import mount_mcp
from app.http.observability import add_probes, count_requests, trace_requests
from app.http.openapi import CONNECTION_REFUSALS, errors, key_docs, mount_docs, operation_id
from app.http.routes import BODY_RULES, ID_SCHEMA, ChatRequest, api, summary
from app.http.webui import mount_web_ui
from app.settings import Settings, get_settings
from tools.secrets import redactor_for

INVALID_REQUEST = "invalid request: {errors}"
# The ids of a run request's body, held to the id rule in the schema as in the run core.
ID_FIELDS = ("threadId", "runId")
INTERNAL = "internal error (the server's log has the details)"
STORAGE_FAILED = "%s %s: the database does not answer (%s: %s)"
logger = logging.getLogger(__name__)
# Starlette's and FastAPI's own refusals (the routes read bodies themselves; a static file
# the process may not read is Starlette's 401).
HTTP_CODES: dict[int, ErrorCode] = {
    400: "http_400",
    401: "http_401",
    404: "not_found",
    405: "method_not_allowed",
}


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the ASGI app; `settings` (default: the environment's) reach every graph and tool."""
    settings = settings or get_settings()
    telemetry = Telemetry.from_settings(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            async with (
                open_service(settings, recover=True, telemetry=telemetry) as service,
                periodic_prune(service.saver, service.store, settings),
                httpx.AsyncClient() as http,  # the identity provider's keys (JWKS)
                mcp.running(),
                a2a.running(),
            ):
                app.state.service = service
                app.state.access = Access(settings, service.store, http)
                # Configured MCP servers start beside the service, never in its way.
                servers = asyncio.create_task(start_mcp_servers(settings, list(service.graphs)))
                try:
                    yield
                finally:
                    servers.cancel()
        finally:
            telemetry.close()

    app = FastAPI(
        title="react-agent",
        summary="LangGraph ReAct agents over AG-UI 1.0 (SSE) and plain JSON.",
        lifespan=lifespan,
        # /docs is served from local files (`mount_docs`); ReDoc and OAuth2 are not used.
        docs_url=None,
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        generate_unique_id_function=operation_id,
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.add_middleware(BodyDeadline, timeout_s=settings.agent_body_timeout_s)
    allow_origins(app, settings)  # AGENT_CORS_ORIGINS, and Studio's with AGENT_STUDIO
    allowed_hosts = settings.allowed_hosts
    if allowed_hosts is not None:
        app.add_middleware(HostGuard, allowed=allowed_hosts)  # outside CORS: checked first
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(HTTPException, _http_error)
    for failure in failures(settings.agent_db):
        app.add_exception_handler(failure, _storage_failure)
    # Starlette answers the rest with a plain-text 500 (and logs the traceback): JSON too.
    app.add_exception_handler(Exception, _internal_error)
    if telemetry.metrics is not None:
        count_requests(app, telemetry.metrics)
    if telemetry.tracing is not None:
        trace_requests(app, telemetry.tracing)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # Keys can be added while the service runs (`react-agent users add`): every API route
    # may answer 401, whatever the start-up configuration.
    key = key_docs()
    add_probes(app, key=key, measured=telemetry.metrics is not None)
    # Any request may be refused before a route sees it, and every /api route but the
    # graph list reads the database: 503 when it does not answer.
    responses = {**CONNECTION_REFUSALS, **errors(503), **key.responses}
    app.include_router(api, responses=responses, dependencies=key.dependencies)
    # LangGraph's own API at the root, for langgraph-sdk and Studio (`app.http.langgraph`).
    app.include_router(langgraph_api(), responses=responses, dependencies=key.dependencies)
    _document_bodies(app, {"/api/agents/{graph_id}": RunAgentInput, "/api/chat": ChatRequest})
    mcp = mount_mcp(app)  # the agents as MCP tools (app.http.mcp), same key as /api
    a2a = mount_a2a(app)  # the agents over A2A (app.http.a2a), same key as /api
    mount_docs(app)
    mount_web_ui(app)
    return app


def _document_bodies(app: FastAPI, bodies: dict[str, type[BaseModel]]) -> None:
    """Show the request schemas of routes that parse their own body in /docs."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        for path, model in bodies.items():
            body_schema = model.model_json_schema(
                by_alias=True, ref_template="#/components/schemas/{model}"
            )
            schemas.update(body_schema.pop("$defs", {}))
            for name in ID_FIELDS:  # the id rule the run core checks (422 `bad_thread_id`...)
                if name in body_schema["properties"]:
                    body_schema["properties"][name].update(ID_SCHEMA)
            body_schema.update(BODY_RULES.get(model.__name__, {}))
            schemas[model.__name__] = body_schema
            ref = {"$ref": f"#/components/schemas/{model.__name__}"}
            schema["paths"][path]["post"]["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": ref}},
            }
        _never_null(schema)
        _tags_required(schemas)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _tags_required(schemas: dict[str, Any]) -> None:
    """A union's tag is required in each of its members: pydantic reads the tag first (a
    message without `role` is refused), though each member's model gives it a default."""

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            found = node.get("discriminator")
            if isinstance(found, dict):
                tag = found["propertyName"]
                for ref in found.get("mapping", {}).values():
                    member = schemas.get(ref.rsplit("/", 1)[-1], {})
                    required = member.setdefault("required", [])
                    if tag not in required:
                        required.append(tag)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schemas)


def _never_null(schema: dict[str, Any]) -> None:
    """A query or header parameter is a string on the wire, never JSON's null: an optional
    one is documented as its type alone (FastAPI writes `anyOf: [type, null]`, and a
    client that sends "null" is refused)."""
    for methods in schema["paths"].values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                found = parameter["schema"]
                kinds = found.get("anyOf", [])
                rest = [kind for kind in kinds if kind != {"type": "null"}]
                if len(rest) == 1 and len(kinds) == 2:
                    del found["anyOf"]
                    found.update(rest[0])


async def _service_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServiceError)
    # A message may quote an upstream (a failed run's provider error): mask secrets.
    redact = redactor_for(request.app.state.settings)
    return JSONResponse(
        {"detail": redact(exc.message), "code": exc.code},
        status_code=exc.status,
        headers=exc.headers,
    )


async def _invalid_request(request: Request, exc: Exception) -> Response:
    """A parameter FastAPI validates (e.g. `?after=-1`): 422 like every other refusal."""
    assert isinstance(exc, RequestValidationError)
    refusal = Invalid("invalid_request", INVALID_REQUEST.format(errors=summary(exc.errors())))
    return await _service_error(request, refusal)


async def _storage_failure(request: Request, exc: Exception) -> Response:
    """The database failed the request: 503 `storage_unavailable`, one line logged (each
    failing request would otherwise log the same traceback)."""
    reason = " ".join(str(exc).split())[:300] or "no message"
    logger.warning(STORAGE_FAILED, request.method, request.url.path, type(exc).__name__, reason)
    return await _service_error(request, storage_unavailable())


async def _internal_error(request: Request, exc: Exception) -> Response:
    """What nothing else handled: 500 `internal_error` as JSON; Starlette logs the traceback."""
    return JSONResponse({"detail": INTERNAL, "code": "internal_error"}, status_code=500)


def has_body(status: int) -> bool:
    """Whether a response with `status` may have a body (not 1xx, 204, 205 or 304)."""
    return status >= 200 and status not in (204, 205, 304)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's refusals (no such path, a wrong method) in the same `{detail, code}`."""
    assert isinstance(exc, HTTPException)
    headers = exc.headers
    if exc.status_code == 405:
        # Starlette names the methods of the first route on the path; a path such as
        # /api/threads/{id} has one route per method.
        headers = {**(headers or {}), "Allow": ", ".join(_methods_of(request))}
    if not has_body(exc.status_code):
        return Response(status_code=exc.status_code, headers=headers)
    code = HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse(
        {"detail": str(exc.detail), "code": code}, status_code=exc.status_code, headers=headers
    )


def _methods_of(request: Request) -> list[str]:
    """Every method the API document gives the request's path."""
    methods: set[str] = set()
    for path, item in request.app.openapi()["paths"].items():
        if compile_path(path)[0].match(request.url.path):
            methods |= {method.upper() for method in item if method != "parameters"}
    return sorted(methods)
