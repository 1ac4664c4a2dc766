"""What the LangGraph API's route modules share: the router's guards, bodies, answers and
the assistant ids (a system assistant per graph, or the bare graph id)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel

from app.core.errors import NotFound
from app.core.runs.prepare import THREAD_ID
from app.core.runs.service import AgentService
from app.http.langgraph.encoding import assistant_id, dumps
from app.http.routes import (
    _body,
    _parse,
    known_query,
    require_json,
    require_key,
    service,
)

UNKNOWN_ASSISTANT = "unknown assistant {assistant_id!r}: use a graph id ({available}) or its id"

Model = TypeVar("Model", bound=BaseModel)
Agents = Annotated[AgentService, Depends(service)]
ID_RULE = "1-128 of `A-Za-z0-9._:@-`, starting with a letter or digit"
ThreadId = Annotated[
    str,
    Path(description=f"the thread id: {ID_RULE}", json_schema_extra={"pattern": f"^{THREAD_ID.pattern}$"}),
]
RunId = Annotated[
    str,
    Path(description=f"the run id: {ID_RULE}", json_schema_extra={"pattern": f"^{THREAD_ID.pattern}$"}),
]


def router() -> APIRouter:
    """A router behind the same guards as `/api` (bearer key, JSON bodies, known query)."""
    return APIRouter(
        dependencies=[Depends(require_key), Depends(require_json), Depends(known_query)],
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
    """The request's JSON body as `model` (400/413/422 as on `/api`); none is `{}`."""
    raw = await _body(request, agents.settings.agent_max_body_bytes)
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
