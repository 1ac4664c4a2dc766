"""What `/openapi.json` and `/docs` say: every route's real answers, and Swagger UI served here.

- Every refusal is `ErrorBody` (`{"detail", "code"}`, `app.core.errors`). `errors(...)`
  makes a route's `responses=` entries for the statuses it can refuse with, so each route
  documents exactly what it answers: FastAPI's own 422 (`HTTPValidationError`, an array
  of errors) never appears, because the server never sends it (`app.http.server` answers
  a bad parameter as `ErrorBody` too). The 401 is added where the server includes the
  API (only when `AGENT_API_KEY` is set, with the bearer security scheme), and so is the
  503 every `/api` route may answer when the database does not (`storage_unavailable`).
- Operation ids are the route functions' names in camelCase (`getThread`); the answers
  that carry a run's ids link to the operations about that thread and run (`follow`), which
  is also how schemathesis's stateful phase chains real calls.
- `/docs` is Swagger UI from the files the `fastapi-offline` package ships (no CDN: it
  works offline), under a Content-Security-Policy that lets the page run only this
  origin's scripts and talk only to this origin. Its start-up script is a file too
  (`/docs/init.js`): the page has no inline script. `/redoc` and the OAuth2 redirect
  page are off.

`tests/service/test_openapi.py` holds the schema to the server's answers with schemathesis.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request, Security
from fastapi.responses import HTMLResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from pydantic.alias_generators import to_camel

Responses = dict[int | str, dict[str, Any]]

# Swagger UI's files (its bundle and CSS as FastAPI would load them from a CDN).
SWAGGER_ASSETS = Path(fastapi_offline.__file__).parent / "static"
DOCS_URL = "/docs"
DOCS_ASSETS_URL = "/docs/assets"
DOCS_INIT_URL = "/docs/init.js"

# Swagger UI styles elements inline and draws icons as data: images; everything else,
# scripts included, comes from this origin, and "Try it out" calls only this origin.
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
DOCS_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": DOCS_CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} - API</title>
<link rel="icon" href="{assets}/favicon.png">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
</head><body>
<div id="swagger-ui" data-openapi-url="{openapi_url}"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{init}"></script>
</body></html>
"""

# FastAPI's Swagger UI settings, without the validator badge (it calls a remote service).
DOCS_INIT = """"use strict";
(function () {
  var node = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: node.dataset.openapiUrl,
    domNode: node,
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
"""


class ErrorBody(BaseModel):
    """Every refusal and failure the server answers (`app.core.errors.ServiceError`)."""

    detail: str = Field(description="a readable message")
    code: str = Field(description="a stable machine code, e.g. `unknown_thread`")


# What each status means, after the rule in `app.core.errors`.
WHY: dict[int, str] = {
    400: "the body cannot be read (not JSON, a bad Content-Length, the client left)",
    408: "the body did not arrive within `AGENT_BODY_TIMEOUT_S`; the connection is closed",
    401: 'no valid credential: `Authorization: Bearer <key or token>` (README "Users and access")',
    403: "only an admin may read this",
    404: "no such graph, thread or run (another user's thread or run is answered as none)",
    409: "the thread's state refuses it now; nothing was changed",
    410: "the run's events are no longer kept (`AGENT_RUN_EVENTS_TTL_S`)",
    413: "the body is over `AGENT_MAX_BODY_BYTES` (or its messages over "
    "`AGENT_MAX_MESSAGES_PER_REQUEST`)",
    415: "the body is not declared JSON (`Content-Type: application/json`)",
    422: "the request itself is wrong; nothing was changed",
    429: "too many runs already wait for their turn: retry after `Retry-After` seconds",
    431: "the request head (line and headers) is over 64 KiB; the connection is closed",
    502: "the run failed: `code` is its RUN_ERROR code",
    503: "the service is shutting down (`shutting_down`: retry on the next one), its "
    "database does not answer now (`storage_unavailable`), or it has "
    "`AGENT_MAX_CONNECTIONS` connections open (`too_many_connections`); retry after "
    "`Retry-After` seconds",
}


def errors(*statuses: int | tuple[int, str]) -> Responses:
    """`responses=` entries answering `ErrorBody`: a status (described by WHY) or (status, why)."""
    documented: Responses = {}
    for entry in statuses:
        status, why = entry if isinstance(entry, tuple) else (entry, WHY[entry])
        documented[status] = {"model": ErrorBody, "description": why}
    return documented


# What any request may be refused with before a route sees it (`app.http.deadlines`).
CONNECTION_REFUSALS: Responses = errors(431, 503)


def operation_id(route: APIRoute) -> str:
    """Each operation's id: its function's name in camelCase (`get_thread` -> `getThread`)."""
    return to_camel(route.name)


def follow(ids: str) -> dict[str, Any]:
    """OpenAPI links from a run's `threadId` and `runId` in `ids` (a runtime expression such
    as `$response.body`) to what can be asked about them."""
    thread = {"thread_id": f"{ids}#/threadId"}
    run = {**thread, "run_id": f"{ids}#/runId"}
    return {
        "thread": {"operationId": "getThread", "parameters": thread},
        "runs": {"operationId": "listRuns", "parameters": thread},
        "run": {"operationId": "getRun", "parameters": run},
        "events": {"operationId": "joinRun", "parameters": run},
        "cancel": {"operationId": "cancelRun", "parameters": run},
        "rename": {"operationId": "renameThread", "parameters": thread},
        "forget": {"operationId": "forgetThread", "parameters": thread},
    }


EVENT_STREAM: Responses = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "AG-UI 1.0 events as server-sent events, each with its sequence number "
        "as `id`, and keep-alive comments",
    }
}

# The bearer key, shown in /docs (its "Authorize" button) when the server requires one.
# It only documents: `app.http.auth.authorize` checks the credential.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="AgentApiKey",
    description="a key (AGENT_API_KEY, or one `react-agent users add` printed) or an identity "
    "provider's JWT, sent as `Authorization: Bearer <key or token>`",
)


@dataclass(frozen=True)
class KeyDocs:
    """What routes behind `authorize` add to their documentation: 401, 429 and the scheme."""

    responses: Responses = field(default_factory=dict)
    dependencies: list[Any] = field(default_factory=list)


def key_docs() -> KeyDocs:
    """The 401 (no valid credential), the 429 of a user's request rate, and the bearer scheme."""
    rate = (429, "too many requests, or a user's limit reached: retry after `Retry-After` seconds")
    return KeyDocs(responses=errors(401, rate), dependencies=[Security(BEARER)])


def mount_docs(app: FastAPI) -> None:
    """`/docs`: Swagger UI from local files under a CSP (make the app with `docs_url=None`)."""
    assets_page = html.escape(DOCS_ASSETS_URL)

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = html.escape(request.scope.get("root_path", ""))
        page = DOCS_PAGE.format(
            title=html.escape(app.title),
            assets=root + assets_page,
            init=root + DOCS_INIT_URL,
            openapi_url=root + html.escape(app.openapi_url or ""),
        )
        return HTMLResponse(page, headers=DOCS_HEADERS)

    @app.get(DOCS_INIT_URL, include_in_schema=False)
    async def docs_init() -> Response:
        return Response(DOCS_INIT, media_type="text/javascript", headers=DOCS_HEADERS)

    app.mount(DOCS_ASSETS_URL, StaticFiles(directory=SWAGGER_ASSETS), name="docs-assets")
