"""What the LangGraph API's route modules share: the router's guards, bodies, answers and
the assistant ids (a system assistant per graph, or the bare graph id)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel, BeforeValidator
from starlette.convertors import StringConvertor, register_url_convertor

from app.core.errors import NotFound, UnsupportedMediaType
from app.core.runs.prepare import THREAD_ID
from app.core.runs.service import AgentService
from app.http.auth import authorize
from app.http.langgraph.encoding import assistant_id, dumps
from app.http.langgraph.studio import require_json_or_studio
from app.http.openapi import errors
from app.http.routes import (
    BODY,
    NOT_JSON,
    STARTS_RUN,
    _body,
    _parse,
    known_query,
    service,
)

UNKNOWN_ASSISTANT = "unknown assistant {assistant_id!r}: use a graph id ({available}) or its id"

Model = TypeVar("Model", bound=BaseModel)
Agents = Annotated[AgentService, Depends(service)]
ID_RULE = "1-128 of `A-Za-z0-9._:@-`, starting with a letter or digit"
ThreadId = Annotated[
    str,
    Path(
        description=f"the thread id: {ID_RULE}",
        json_schema_extra={"pattern": f"^{THREAD_ID.pattern}$"},
    ),
]
RunId = Annotated[
    str,
    Path(
        description=f"the run id: {ID_RULE}",
        json_schema_extra={"pattern": f"^{THREAD_ID.pattern}$"},
    ),
]


# What the routes answer besides their success, by group (`app.http.openapi.errors`).
NAMED = errors((404, "no such assistant, thread, run or checkpoint"), (422, "a bad id or query"))
READS_BODY = {**BODY, **errors((404, "no such assistant, thread or checkpoint"))}
STARTS = {**STARTS_RUN, **errors((404, "no such assistant, or (a resume) no such thread"))}


def _whole(value: Any) -> Any:
    """A count as JSON Schema's `integer` has it: 3 and 3.0, never `true`."""
    if isinstance(value, bool):
        raise ValueError("a number is needed, not a boolean")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# A page's `limit` or `offset` in a body.
Count = Annotated[int, BeforeValidator(_whole)]


def body_doc(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """`openapi_extra` documenting a body a route reads itself (`body_of`)."""
    return {
        "requestBody": {
            "required": required,
            "content": {"application/json": {"schema": _inlined(model.model_json_schema())}},
        }
    }


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its `$defs` put where they are used: a `#/$defs/...` reference means
    nothing inside the API document (the bodies' models have no cycles)."""
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    return inlined


def _id_but(*reserved: str) -> StringConvertor:
    """A path segment that is not one of `reserved`: LangGraph's paths put an id where
    other routes have a word (`/threads/search`, `/runs/stream`), and a request for one
    of those with another method must be 405, not a thread named "search"."""
    regex = f"(?!(?:{'|'.join(reserved)})(?:/|$))[^/]+"
    convertor: StringConvertor = type("IdBut", (StringConvertor,), {"regex": regex})()
    return convertor


# Use as `{thread_id:thread}`, `{run_id:run}`, `{assistant_id:assistant}`.
register_url_convertor("thread", _id_but("search", "count"))
register_url_convertor("run", _id_but("stream", "wait"))
register_url_convertor("assistant", _id_but("search", "count"))


def router() -> APIRouter:
    """A router behind the same guards as `/api` (who calls, JSON bodies, known query;
    Studio's text/plain JSON with AGENT_STUDIO: `studio`)."""
    return APIRouter(
        dependencies=[
            Depends(authorize),
            Depends(require_json_or_studio),
            Depends(known_query),
        ],
        tags=["langgraph"],
    )


def graph_of(agents: AgentService, assistant: str) -> str:
    """The graph id an assistant id names (a system assistant's id, or the graph id)."""
    if assistant in agents.graphs:
        return assistant
    for graph_id in agents.graphs:
        if assistant_id(graph_id) == assistant:
            return graph_id
    available = ", ".join(agents.graphs) or "none"
    raise NotFound(
        "unknown_graph", UNKNOWN_ASSISTANT.format(assistant_id=assistant[:100], available=available)
    )


async def body_of(request: Request, agents: AgentService, model: type[Model]) -> Model:
    """The request's JSON body as `model` (400/413/422 as on `/api`); none is `{}` (a
    route whose body is optional takes none without a Content-Type: `takes_no_body`)."""
    raw = await _body(request, agents.settings.agent_max_body_bytes)
    if raw and request.headers.get("content-type") is None:
        raise UnsupportedMediaType("unsupported_media_type", NOT_JSON.format(got="none"))
    return _parse(model, raw or b"{}")


def answer(
    agents: AgentService,
    data: Any,
    *,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """`data` as JSON, any secret a reply quoted masked."""
    text = dumps(data)
    if agents.redact.found(text):
        text = dumps(agents.redact.value(json.loads(text)))
    return Response(text, status_code=status, media_type="application/json", headers=headers)
