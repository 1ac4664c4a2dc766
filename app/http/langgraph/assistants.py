"""Assistants: one system assistant per graph, and the assistants users create.

A system assistant's id is `uuid5(6ba7b821-9dad-11d1-80b4-00c04fd430c8, graph_id)`, as
LangGraph's own servers derive it; the bare graph id is taken too. It has no config and
cannot be changed or deleted (409 `system_assistant`).

A created assistant (`POST /assistants`) is a graph with a `config` and a `context` of
its own, stored in the database (`app.core.storage.assistants`) with every version a
change made. It is its creator's: another user's is one there is not (404), as their
threads are; an admin reaches everyone's. A run of it runs its graph with its config
under the run's own (`run_settings`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.errors import Conflict, Invalid, NotFound
from app.core.runs.service import AgentService
from app.core.storage.assistants import AssistantRow, SqlAssistantStore, assistant_store
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.common import (
    NAMED,
    READS_BODY,
    UNKNOWN_ASSISTANT,
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

ASSISTANT_EXISTS = "assistant {assistant_id} already exists"
SYSTEM_ASSISTANT = "assistant {assistant_id} is the system assistant of graph {graph_id!r}: {what}"
NO_VERSION = "assistant {assistant_id} has no version {version}"
NO_GRAPH = "graph_id: no graph {graph_id!r} here (graphs: {available})"
BOTH_CONFIGURABLE_AND_CONTEXT = (
    "send config.configurable or context, not both (context replaces configurable)"
)
NO_DELETE_THREADS = "delete_threads is not supported: delete the threads themselves"
# The run's own keys in `configurable`: set by the service, never by an assistant or a run.
OWN_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"})
CHANGES = errors((404, "no such assistant"), (409, "a system assistant"), 400, 408, 413, 415, 422)


class GraphConfig(BaseModel):
    """The graph config an assistant or a run may give (other keys are ignored):
    `configurable` (keys starting `__` and the run's own, such as `thread_id`, are
    dropped), `recursion_limit`, `tags`, `metadata`, `run_name`."""

    model_config = ConfigDict(extra="ignore")

    configurable: dict[str, Any] | None = None
    recursion_limit: int | None = Field(None, ge=1, le=1000)
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    run_name: str | None = Field(None, max_length=200)

    @field_validator("configurable")
    @classmethod
    def _not_the_runs_own(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        return {k: v for k, v in value.items() if not k.startswith("__") and k not in OWN_KEYS}

    def plain(self) -> dict[str, Any]:
        """The config as stored and answered: the keys given."""
        return self.model_dump(exclude_none=True)


class AssistantSearch(BaseModel):
    """`POST /assistants/search` and `/count`."""

    model_config = ConfigDict(extra="ignore")

    graph_id: str | None = None
    name: str | None = None
    metadata: dict[str, Any] | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


class AssistantCreate(BaseModel):
    """`POST /assistants`: a graph (by its id) with a config and context of its own."""

    model_config = ConfigDict(extra="ignore")

    graph_id: str = Field(min_length=1, max_length=128)
    assistant_id: uuid.UUID | None = Field(None, description="a UUID (default: a new one)")
    config: GraphConfig | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)
    if_exists: Literal["raise", "do_nothing"] = "raise"


class AssistantPatch(BaseModel):
    """`PATCH /assistants/{assistant_id}`: what changes (metadata is merged)."""

    model_config = ConfigDict(extra="ignore")

    graph_id: str | None = Field(None, min_length=1, max_length=128)
    config: GraphConfig | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = Field(None, max_length=200)
    description: str | None = Field(None, max_length=2000)


class VersionSearch(BaseModel):
    """`POST /assistants/{assistant_id}/versions`."""

    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, Any] | None = None
    limit: Count = Field(10, ge=1, le=1000)
    offset: Count = Field(0, ge=0)


class LatestVersion(BaseModel):
    """`POST /assistants/{assistant_id}/latest`."""

    model_config = ConfigDict(extra="forbid")

    version: Count = Field(ge=1)


@dataclass(frozen=True, slots=True)
class Resolved:
    """What an assistant id names: its graph, and for a created assistant its record."""

    graph_id: str
    row: AssistantRow | None = None
    config: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)


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


def created(row: AssistantRow) -> dict[str, Any]:
    """A created assistant (or one version of it) as langgraph-sdk's `Assistant`."""
    return {
        "assistant_id": row.assistant_id,
        "graph_id": row.graph_id,
        "config": row.config,
        "context": row.context,
        "metadata": row.metadata,
        "name": row.name,
        "description": row.description,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
        "version": row.version,
    }


def _store(agents: AgentService) -> SqlAssistantStore:
    return assistant_store(agents.store)


def _system_graph(agents: AgentService, wanted: str) -> str | None:
    try:
        return graph_of(agents, wanted)
    except NotFound:
        return None


def _unknown(agents: AgentService, wanted: str) -> NotFound:
    available = ", ".join(agents.graphs) or "none"
    return NotFound(
        "unknown_graph", UNKNOWN_ASSISTANT.format(assistant_id=wanted[:100], available=available)
    )


async def _own(agents: AgentService, wanted: str, caller: Caller) -> AssistantRow:
    """The caller's created assistant `wanted` (any user's for an admin), else 404."""
    row = await _store(agents).assistant(wanted) if _is_uuid(wanted) else None
    if row is None or not (caller.admin or row.user_id == caller.user_id):
        raise _unknown(agents, wanted)
    return row


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


async def resolve(agents: AgentService, wanted: str, caller: Caller) -> Resolved:
    """The assistant id `wanted`: a system assistant's (or a graph id), or a created
    assistant the caller may use; 404 `unknown_graph` otherwise."""
    graph_id = _system_graph(agents, wanted)
    if graph_id is not None:
        return Resolved(graph_id)
    row = await _own(agents, wanted, caller)
    return Resolved(row.graph_id, row, row.config, row.context)


def run_settings(
    resolved: Resolved, config: GraphConfig | None, context: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and context a run uses: the assistant's, with the run's own over them
    (`configurable`, `metadata` and `context` merged key by key)."""
    own = config.plain() if config is not None else {}
    merged = {**resolved.config, **own}
    for key in ("configurable", "metadata"):
        if key in resolved.config or key in own:
            merged[key] = {**resolved.config.get(key, {}), **own.get(key, {})}
    return merged, {**resolved.context, **(context or {})}


def _in_step(
    config: GraphConfig | None,
    context: dict[str, Any] | None,
    current: AssistantRow | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """An assistant's config and context (each the `current` one's when not given) kept
    in step, as LangGraph's servers keep them: `context` is what `configurable` says, or
    the reverse (422 when both are given)."""
    plain = config.plain() if config is not None else {}
    configurable = plain.get("configurable") or {}
    if configurable and context:
        raise Invalid("invalid_body", BOTH_CONFIGURABLE_AND_CONTEXT)
    if config is None and current is not None:
        plain = dict(current.config)
    if configurable:
        return plain, dict(configurable)
    if context is None:
        return plain, dict(current.context) if current is not None else {}
    if context:
        plain["configurable"] = dict(context)
    return plain, dict(context)


def _matches(found: dict[str, Any], search: AssistantSearch | VersionSearch) -> bool:
    if isinstance(search, AssistantSearch):
        if search.graph_id is not None and found["graph_id"] != search.graph_id:
            return False
        if search.name is not None and search.name.lower() not in found["name"].lower():
            return False
    return all(found["metadata"].get(k) == v for k, v in (search.metadata or {}).items())


async def _matching(
    agents: AgentService, search: AssistantSearch, caller: Caller
) -> list[dict[str, Any]]:
    """The caller's created assistants (everyone's for an admin), newest first, then the
    system ones, those matching `search`."""
    rows = await _store(agents).assistants(None if caller.admin else caller.user_id)
    found = [created(row) for row in rows]
    found += [assistant(agents, graph_id) for graph_id in agents.graphs]
    return [a for a in found if _matches(a, search)]


@api.post("/assistants", responses=CHANGES, openapi_extra=body_doc(AssistantCreate))
async def create_assistant(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Create an assistant of `graph_id` owned by the caller (`if_exists: do_nothing`
    answers the one there is; `raise`, the default, 409 `assistant_exists`)."""
    body = await body_of(request, agents, AssistantCreate)
    agents.graph(body.graph_id)  # 404 `unknown_graph` for a graph there is not
    config, context = _in_step(body.config, body.context)
    wanted = str(body.assistant_id or uuid.uuid4())
    system = _system_graph(agents, wanted)
    if system is not None:
        if body.if_exists == "do_nothing":
            return answer(agents, assistant(agents, system))
        raise Conflict("assistant_exists", ASSISTANT_EXISTS.format(assistant_id=wanted))
    now = time.time()
    row = AssistantRow(
        assistant_id=wanted,
        user_id=caller.user_id,
        version=1,
        graph_id=body.graph_id,
        name=body.name or "Untitled",
        description=body.description,
        config=config,
        context=context,
        metadata=body.metadata or {},
        created_at=now,
        updated_at=now,
    )
    made = await _store(agents).create_assistant(row)
    if made is not None:
        return answer(agents, created(made))
    existing = await _own(agents, wanted, caller)  # another user's: one there is not
    if body.if_exists == "do_nothing":
        return answer(agents, created(existing))
    raise Conflict("assistant_exists", ASSISTANT_EXISTS.format(assistant_id=wanted))


def _not_system(agents: AgentService, wanted: str, what: str) -> None:
    graph_id = _system_graph(agents, wanted)
    if graph_id is not None:
        message = SYSTEM_ASSISTANT.format(assistant_id=wanted[:100], graph_id=graph_id, what=what)
        raise Conflict("system_assistant", message)


@api.patch(
    "/assistants/{assistant_id:assistant}",
    responses=CHANGES,
    openapi_extra=body_doc(AssistantPatch),
)
async def update_assistant(
    assistant_id: str, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """A new version of the assistant, in use from now: the fields given replace the
    version in use's (`metadata` is merged into it)."""
    body = await body_of(request, agents, AssistantPatch)
    _not_system(agents, assistant_id, "it cannot be changed; create an assistant of it")
    await _own(agents, assistant_id, caller)
    if body.graph_id is not None and body.graph_id not in agents.graphs:
        # 422, not 404: the assistant is there, the body names a graph that is not.
        available = ", ".join(agents.graphs)
        raise Invalid(
            "invalid_body", NO_GRAPH.format(graph_id=body.graph_id[:100], available=available)
        )
    _in_step(body.config, body.context)  # 422 before anything is written

    def change(current: AssistantRow) -> AssistantRow:
        config, context = _in_step(body.config, body.context, current)
        return current._replace(
            graph_id=body.graph_id or current.graph_id,
            config=config,
            context=context,
            metadata={**current.metadata, **(body.metadata or {})},
            name=body.name if body.name is not None else current.name,
            description=body.description if body.description is not None else current.description,
        )

    row = await _store(agents).change_assistant(assistant_id, change, time.time())
    if row is None:  # deleted meanwhile
        raise _unknown(agents, assistant_id)
    return answer(agents, created(row))


@api.delete(
    "/assistants/{assistant_id:assistant}",
    status_code=204,
    responses=errors((404, "no such assistant"), (409, "a system assistant"), 422),
)
async def delete_assistant(
    assistant_id: str,
    agents: Agents,
    caller: CallerOf,
    delete_threads: Annotated[
        bool,
        Query(
            description="not supported (`true` is 422): delete the threads themselves",
            json_schema_extra={"enum": [False]},
        ),
    ] = False,
) -> Response:
    """Forget the assistant and its versions (its runs and threads stay)."""
    _not_system(agents, assistant_id, "it cannot be deleted")
    if delete_threads:
        raise Invalid("unsupported", NO_DELETE_THREADS)
    await _own(agents, assistant_id, caller)
    if not await _store(agents).delete_assistant(assistant_id):
        raise _unknown(agents, assistant_id)
    return Response(status_code=204)


@api.post(
    "/assistants/{assistant_id:assistant}/latest",
    responses={**READS_BODY, **errors((404, "no such assistant or version"))},
    openapi_extra=body_doc(LatestVersion),
)
async def set_latest_version(
    assistant_id: str, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """Use the assistant's `version` from now on (a system assistant has only 1)."""
    body = await body_of(request, agents, LatestVersion)
    graph_id = _system_graph(agents, assistant_id)
    if graph_id is not None:
        if body.version != 1:
            raise NotFound(
                "unknown_version",
                NO_VERSION.format(assistant_id=assistant_id, version=body.version),
            )
        return answer(agents, assistant(agents, graph_id))
    row = await _own(agents, assistant_id, caller)
    store = _store(agents)
    if not await store.set_assistant_version(row.assistant_id, body.version, time.time()):
        raise NotFound(
            "unknown_version", NO_VERSION.format(assistant_id=assistant_id, version=body.version)
        )
    now = await store.assistant(row.assistant_id)
    if now is None:  # deleted meanwhile
        raise _unknown(agents, assistant_id)
    return answer(agents, created(now))


@api.post(
    "/assistants/search",
    responses=errors(400, 408, 413, 415, 422),
    openapi_extra=body_doc(AssistantSearch, required=False),
)
@takes_no_body
async def search_assistants(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """The assistants matching the body's `graph_id`, `name`, `metadata`, a page of them:
    the caller's created ones (everyone's for an admin) newest first, then the system
    ones."""
    search = await body_of(request, agents, AssistantSearch)
    found = await _matching(agents, search, caller)
    page = found[search.offset : search.offset + search.limit]
    return answer(agents, page, headers={"X-Pagination-Total": str(len(found))})


@api.post(
    "/assistants/count",
    responses=errors(400, 408, 413, 415, 422),
    openapi_extra=body_doc(AssistantSearch, required=False),
)
@takes_no_body
async def count_assistants(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """How many assistants match (the body as for search)."""
    search = await body_of(request, agents, AssistantSearch)
    return answer(agents, len(await _matching(agents, search, caller)))


@api.get("/assistants/{assistant_id:assistant}", responses=NAMED)
async def get_assistant(assistant_id: str, agents: Agents, caller: CallerOf) -> Response:
    """One assistant (404 `unknown_graph` for none)."""
    resolved = await resolve(agents, assistant_id, caller)
    if resolved.row is not None:
        return answer(agents, created(resolved.row))
    return answer(agents, assistant(agents, resolved.graph_id))


@api.post(
    "/assistants/{assistant_id:assistant}/versions",
    responses=READS_BODY,
    openapi_extra=body_doc(VersionSearch, required=False),
)
@takes_no_body
async def assistant_versions(
    assistant_id: str, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """The assistant's versions, newest first, those whose metadata matches (a system
    assistant has one)."""
    search = await body_of(request, agents, VersionSearch)
    resolved = await resolve(agents, assistant_id, caller)
    if resolved.row is None:
        found = [assistant(agents, resolved.graph_id)]
    else:
        rows = await _store(agents).assistant_versions(resolved.row.assistant_id)
        found = [created(row) for row in rows]
    found = [version for version in found if _matches(version, search)]
    return answer(agents, found[search.offset : search.offset + search.limit])


async def _graph(agents: AgentService, wanted: str, caller: Caller) -> CompiledStateGraph:
    return agents.graph((await resolve(agents, wanted, caller)).graph_id)


@api.get("/assistants/{assistant_id:assistant}/graph", responses=NAMED)
async def assistant_graph(
    assistant_id: str,
    agents: Agents,
    caller: CallerOf,
    xray: Annotated[
        bool | int, Query(description="draw subgraphs too (true, or how many levels)")
    ] = False,
) -> Response:
    """The assistant's graph as nodes and edges (LangGraph's drawable JSON)."""
    drawable = await (await _graph(agents, assistant_id, caller)).aget_graph(xray=xray)
    return answer(agents, drawable.to_json())


@api.get("/assistants/{assistant_id:assistant}/schemas", responses=NAMED)
async def assistant_schemas(assistant_id: str, agents: Agents, caller: CallerOf) -> Response:
    """The JSON schemas of the graph's input, output, state, config and context."""
    graph_id = (await resolve(agents, assistant_id, caller)).graph_id
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
    caller: CallerOf,
    recurse: Annotated[bool, Query(description="subgraphs of subgraphs too")] = False,
    namespace: Annotated[str | None, Query(description="only this namespace's")] = None,
) -> Response:
    """The graph's subgraphs by namespace (the agents have none)."""
    graph = await _graph(agents, assistant_id, caller)
    found: dict[str, dict[str, Any]] = {
        name: {} for name, _ in graph.get_subgraphs(namespace=namespace, recurse=recurse)
    }
    return answer(agents, found)
