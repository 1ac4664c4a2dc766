"""The server's operating surface: `GET /metrics`, `GET /readyz`, request counts, HTTP spans.

Contract:

- `GET /metrics` answers the Prometheus text format of the service's registry
  (`app.core.observability.metrics`); it is an admin's (scrape with
  `Authorization: Bearer <AGENT_API_KEY>` or an admin's key; another user's: 403), and
  404 when `AGENT_METRICS=false`.
- `GET /readyz` answers 200 `{"status": "ready"}` when the database answers and the
  service takes runs, else 503 `{"status": "not_ready", "reason": "draining" | "database"
  | "starting"}`. `/healthz` stays the liveness probe: the process answers.
- `count_requests(app, metrics)` counts every answered request by method, route template
  (never the concrete path: ids stay out of labels) and status, when its answer starts,
  as a plain ASGI middleware (no body buffering: SSE streams pass untouched).
- `trace_requests(app, tracing)` makes each incoming request a server span (OpenTelemetry's
  FastAPI instrumentation), the parent of the runs it starts; probes and scrapes excluded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import NotFound
from app.core.observability.metrics import CONTENT_TYPE, Metrics
from app.http.auth import admin_only
from app.http.openapi import KeyDocs, errors
from app.http.routes import service_of

if TYPE_CHECKING:
    from app.core.observability.tracing import Tracing

NOT_MEASURED = "metrics are off (AGENT_METRICS=false)"
UNMATCHED = "unmatched"  # the route label of a request no route took (a 404)
UNTRACED_URLS = "/healthz,/readyz,/metrics"


class Readiness(BaseModel):
    """`GET /readyz`: `ready`, or `not_ready` and why."""

    status: Literal["ready", "not_ready"]
    reason: Literal["draining", "database", "starting"] | None = None


class RequestCounter:
    """ASGI middleware: `agent_http_requests_total{method, route, status}` per response."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.counter = metrics.http_requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        def count(status: int) -> None:
            route = scope.get("route")
            template = getattr(route, "path", None) or UNMATCHED
            self.counter.labels(scope["method"], template, str(status)).inc()

        async def sending(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                # Counted as the answer starts, so a client that read the whole answer
                # (an event stream to its end) finds it counted.
                answered = True
                count(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if not answered:  # failed before answering: the server answers 500
                count(500)


def count_requests(app: FastAPI, metrics: Metrics) -> None:
    app.add_middleware(RequestCounter, metrics=metrics)


def trace_requests(app: FastAPI, tracing: Tracing) -> None:
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.provider,
        excluded_urls=UNTRACED_URLS,
        exclude_spans=["receive", "send"],  # one span per request, not one per SSE event
    )


def add_probes(app: FastAPI, *, key: KeyDocs, measured: bool) -> None:
    """`/readyz` and `/metrics` (call before the web UI so they win).

    `key` documents the bearer key on `/metrics`; `measured` says whether metrics are on
    (off: `/metrics` answers 404, and says so in the schema).
    """

    @app.get(
        "/readyz",
        tags=["service"],
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "not ready: `reason` says why"}},
    )
    async def readyz(request: Request) -> Response:
        agents = getattr(request.app.state, "service", None)
        reason = "starting" if agents is None else await agents.ready()
        if reason is None:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "not_ready", "reason": reason}, status_code=503)

    @app.get(
        "/metrics",
        tags=["service"],
        dependencies=[Depends(admin_only), *key.dependencies],
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE: {}}, "description": "Prometheus text"},
            **key.responses,
            **errors(403),
            **({} if measured else errors((404, NOT_MEASURED))),
        },
    )
    async def metrics(request: Request) -> Response:
        measured = service_of(request).telemetry.metrics
        if measured is None:
            raise NotFound("metrics_off", NOT_MEASURED)
        return Response(measured.render(), media_type=CONTENT_TYPE)
