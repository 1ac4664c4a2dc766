"""Assistants: one system assistant per graph, its graph drawing and its schemas.

An assistant's id is `uuid5(6ba7b821-9dad-11d1-80b4-00c04fd430c8, graph_id)`, as
LangGraph's own servers derive it; the bare graph id is taken too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import Response
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field

from app.core.runs.service import AgentService
from app.http.langgraph.common import (
    NAMED,
    READS_BODY,
    Agents,
    Count,
    answer,
    body_doc,
    body_of,
    graph_of,
    router,
)
from app.http.langgraph.encoding import assistant_id, iso
from app.http.openapi import errors
from app.http.routes import takes_no_body

api = router()
logger = logging.getLogger(__name__)
# System assistants exist as long as the process: they are "created" when it started.
STARTED_AT = time.time()


class AssistantSearch(BaseModel):
    """`POST /assistants/search` and `/count`."""

    model_config = ConfigDict(extra="ignore")

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


def assistant(agents: AgentService, graph_id: str) -> dict[str, Any]:
    """The system assistant of `graph_id` as langgraph-sdk's `Assistant`."""
    description = next((g.description for g in agents.listing if g.id == graph_id), None)
    return {
        "assistant_id": assistant_id(graph_id),
        "graph_id": graph_id,
        "config": {},
        "context": {},
        "metadata": {"created_by": "system"},
        "name": graph_id,
        "description": description,
        "created_at": iso(STARTED_AT),
        "updated_at": iso(STARTED_AT),
        "version": 1,
    }


def _matching(agents: AgentService, search: AssistantSearch) -> list[dict[str, Any]]:
    found = [assistant(agents, graph_id) for graph_id in agents.graphs]
    if search.graph_id is not None:
        found = [a for a in found if a["graph_id"] == search.graph_id]
    if search.name is not None:
        found = [a for a in found if search.name.lower() in a["name"].lower()]
    for key, value in (search.metadata or {}).items():
        found = [a for a in found if a["metadata"].get(key) == value]
    return found


@api.post(
    "/assistants/search",
    responses=errors(400, 408, 413, 415, 422),
    openapi_extra=body_doc(AssistantSearch, required=False),
)
@takes_no_body
async def search_assistants(request: Request, agents: Agents) -> Response:
    """The assistants matching the body's `graph_id`, `name`, `metadata`, a page of them."""
    search = await body_of(request, agents, AssistantSearch)
    found = _matching(agents, search)
    page = found[search.offset : search.offset + search.limit]
    return answer(agents, page, headers={"X-Pagination-Total": str(len(found))})


@api.post(
    "/assistants/count",
    responses=errors(400, 408, 413, 415, 422),
    openapi_extra=body_doc(AssistantSearch, required=False),
)
@takes_no_body
async def count_assistants(request: Request, agents: Agents) -> Response:
    """How many assistants match (the body as for search)."""
    return answer(agents, len(_matching(agents, await body_of(request, agents, AssistantSearch))))


@api.get("/assistants/{assistant_id:assistant}", responses=NAMED)
async def get_assistant(assistant_id: str, agents: Agents) -> Response:
    """One assistant (404 `unknown_graph` for none)."""
    return answer(agents, assistant(agents, graph_of(agents, assistant_id)))


@api.post("/assistants/{assistant_id:assistant}/versions", responses=READS_BODY)
@takes_no_body
async def assistant_versions(assistant_id: str, agents: Agents) -> Response:
    """A system assistant has one version."""
    return answer(agents, [assistant(agents, graph_of(agents, assistant_id))])


def _graph(agents: AgentService, assistant: str) -> CompiledStateGraph:
    return agents.graph(graph_of(agents, assistant))


@api.get("/assistants/{assistant_id:assistant}/graph", responses=NAMED)
async def assistant_graph(
    assistant_id: str,
    agents: Agents,
    xray: Annotated[
        bool | int, Query(description="draw subgraphs too (true, or how many levels)")
    ] = False,
) -> Response:
    """The assistant's graph as nodes and edges (LangGraph's drawable JSON)."""
    drawable = await _graph(agents, assistant_id).aget_graph(xray=xray)
    return answer(agents, drawable.to_json())


@api.get("/assistants/{assistant_id:assistant}/schemas", responses=NAMED)
async def assistant_schemas(assistant_id: str, agents: Agents) -> Response:
    """The JSON schemas of the graph's input, output, state, config and context."""
    graph_id = graph_of(agents, assistant_id)
    graph = agents.graph(graph_id)
    return answer(
        agents,
        {
            "graph_id": graph_id,
            "input_schema": _schema(graph.get_input_jsonschema),
            "output_schema": _schema(graph.get_output_jsonschema),
            # The state is the agents' output: every key of it is theirs to show.
            "state_schema": _schema(graph.get_output_jsonschema),
            "config_schema": _schema(lambda: graph.config_schema().model_json_schema()),
            "context_schema": _schema(graph.get_context_jsonschema),
        },
    )


def _schema(make: Callable[[], dict[str, Any] | None]) -> dict[str, Any] | None:
    """A schema, or None (logged) when pydantic cannot write it: as LangGraph's servers
    answer, so one schema that cannot be drawn leaves the others."""
    try:
        return make()
    except Exception:  # pydantic's refusals have no common type
        logger.exception("could not write a graph schema")
        return None


@api.get("/assistants/{assistant_id:assistant}/subgraphs", responses=NAMED)
async def assistant_subgraphs(
    assistant_id: str,
    agents: Agents,
    recurse: Annotated[bool, Query(description="subgraphs of subgraphs too")] = False,
    namespace: Annotated[str | None, Query(description="only this namespace's")] = None,
) -> Response:
    """The graph's subgraphs by namespace (the agents have none)."""
    graph = _graph(agents, assistant_id)
    found: dict[str, dict[str, Any]] = {
        name: {} for name, _ in graph.get_subgraphs(namespace=namespace, recurse=recurse)
    }
    return answer(agents, found)
