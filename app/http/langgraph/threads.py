"""Threads, their state and history, as LangGraph's API shows them, read from the same
checkpoints and run records as `/api/threads`.

A thread exists once it has a checkpoint, a run, or was created by `POST /threads`,
which keeps the metadata given (`AgentService.create_thread`). Besides that metadata, a
thread's are its `graph_id`, `assistant_id` and `title`; `PATCH` merges metadata into
it (`metadata.title` renames it). The search lists the threads with runs
(`/api/threads`' list) and those created without one yet.

`POST /threads/{id}/state` (a state update, Studio's "re-run from here") and
`POST /threads/{id}/copy` go through the service (`AgentService.update_state`,
`copy_thread`): refused while a run is active, the transcript kept.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import Conflict, NotFound
from app.core.runs.prepare import THREAD_ID
from app.core.runs.service import AgentService
from app.core.runs.threads import ThreadState
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.common import (
    NAMED,
    READS_BODY,
    Agents,
    Count,
    ThreadId,
    answer,
    body_doc,
    body_of,
    graph_of,
    router,
)
from app.http.langgraph.encoding import (
    interrupts_of,
    state_resource,
    summary_resource,
    thread_resource,
    thread_status,
)
from app.http.openapi import errors
from app.http.routes import BODY, MAX_THREADS, takes_no_body

api = router()
# The agents have no subgraphs: their states are the same either way.
Subgraphs = Annotated[bool, Query(description="include subgraphs' states (the agents have none)")]
UNKNOWN_THREAD = "thread {thread_id} not found"
THREAD_EXISTS = 'thread {thread_id} exists already (if_exists: "do_nothing" returns it)'


class ThreadCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    thread_id: str | None = Field(None, json_schema_extra={"pattern": f"^{THREAD_ID.pattern}$"})
    metadata: dict[str, Any] | None = None
    if_exists: Literal["raise", "do_nothing"] = "raise"


class ThreadSearch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: dict[str, Any] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    ids: list[str] | None = None
    limit: Count = Field(10, ge=1, le=MAX_THREADS)
    offset: Count = Field(0, ge=0)


class ThreadMetadata(BaseModel):
    """Metadata to merge into the thread's; `title`, if given, renames it."""

    model_config = ConfigDict(extra="allow")

    title: str | None = Field(
        None,
        description="1-200 characters once leading and trailing spaces are trimmed",
        json_schema_extra={"pattern": r"\S"},
    )


class ThreadPatch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    metadata: ThreadMetadata


class StateUpdate(BaseModel):
    """langgraph-sdk's `threads.update_state`: `values` written as node `as_node` wrote
    them (`__copy__` with no values: the checkpoint copied, for a run with no input)."""

    model_config = ConfigDict(extra="ignore")

    values: dict[str, Any] | list[Any] | None = None
    as_node: str | None = Field(None, max_length=200)
    checkpoint_id: str | None = Field(None, max_length=200)
    checkpoint: dict[str, Any] | None = None


class HistoryQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: Count = Field(10, ge=1, le=1000)
    before: dict[str, Any] | str | None = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None


async def _state_or_none(agents: AgentService, thread_id: str) -> ThreadState | None:
    try:
        return await agents.state(thread_id)
    except NotFound:
        return None


async def read_thread(agents: AgentService, thread_id: str) -> dict[str, Any]:
    """The thread as langgraph-sdk's `Thread`, its values the whole history; NotFound."""
    state = await _state_or_none(agents, thread_id)
    records = await agents.runs(thread_id)
    created = await agents.created_thread(thread_id)
    if state is None and not records and created is None:
        raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
    metadata, created_at = created or ({}, None)
    times = [r.created_at for r in records] + [r.finished_at or 0.0 for r in records]
    first = created_at or min((r.created_at for r in records), default=time.time())
    values = state_resource(state.snapshot, state.messages)["values"] if state else None
    graph_id = state.graph_id if state else records[0].graph if records else None
    status = thread_status(records)
    if state is not None and status in ("idle", "interrupted"):
        # As LangGraph's servers set it after a run or a state update: `interrupted` while
        # a step is next (a question, a breakpoint, a copied checkpoint to re-run).
        status = "interrupted" if state.snapshot.next else "idle"
    return thread_resource(
        thread_id,
        graph_id=graph_id,
        created_at=first,
        updated_at=max(times, default=first),
        status=status,
        values=values,
        interrupts=interrupts_of(state.snapshot) if state else {},
        metadata=metadata,
    )


@api.post(
    "/threads",
    responses={**BODY, **errors((409, "the thread exists (`thread_exists`)"))},
    openapi_extra=body_doc(ThreadCreate, required=False),
)
@takes_no_body
async def create_thread(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """A new thread (`thread_id` optional), the caller's; an existing id is 409
    `thread_exists` unless `if_exists` is `do_nothing`; another user's is 404, as a
    thread there is not."""
    body = await body_of(request, agents, ThreadCreate)
    thread_id = str(uuid.uuid4()) if body.thread_id is None else body.thread_id
    await agents.check_owner(thread_id, caller)
    try:
        existing = await read_thread(agents, thread_id)
    except NotFound:
        existing = None
    if existing is not None:
        if body.if_exists == "do_nothing":
            return answer(agents, existing)
        raise Conflict("thread_exists", THREAD_EXISTS.format(thread_id=thread_id))
    if not await agents.create_thread(thread_id, body.metadata or {}, caller=caller):
        raise Conflict("thread_exists", THREAD_EXISTS.format(thread_id=thread_id))
    return answer(agents, await read_thread(agents, thread_id))


async def _search(
    agents: AgentService, search: ThreadSearch, caller: Caller
) -> list[dict[str, Any]]:
    wanted = dict(search.metadata or {})
    graph_id = wanted.pop("graph_id", None)
    if "assistant_id" in wanted:
        graph_id = graph_of(agents, str(wanted.pop("assistant_id")))
    # A user's own threads; an admin's search covers everyone's.
    owner = None if caller.admin else caller.user_id
    summaries = await agents.threads(graph_id, MAX_THREADS, owner)
    created = {
        thread_id: (metadata, created_at, has_runs)
        for thread_id, metadata, created_at, has_runs in await agents.created_threads(
            owner, MAX_THREADS
        )
    }
    dated: list[tuple[float, dict[str, Any]]] = []
    for summary in summaries:
        listed = summary_resource(summary)
        metadata = created.get(summary.thread_id, ({}, 0.0, True))[0]
        listed["metadata"] = {**metadata, **listed["metadata"]}
        dated.append((summary.updated_at, listed))
    for thread_id, (metadata, created_at, has_runs) in created.items():
        if has_runs or (graph_id is not None and metadata.get("graph_id") != graph_id):
            continue  # listed above, with its runs (or not of the graph asked for)
        resource = thread_resource(
            thread_id,
            graph_id=None,
            created_at=created_at,
            updated_at=created_at,
            status="idle",
            metadata=metadata,
        )
        dated.append((created_at, resource))
    dated.sort(key=lambda pair: pair[0], reverse=True)
    found = [resource for _, resource in dated]
    if search.ids is not None:
        found = [t for t in found if t["thread_id"] in search.ids]
    if search.status is not None:
        found = [t for t in found if t["status"] == search.status]
    for key, value in wanted.items():
        found = [t for t in found if t["metadata"].get(key) == value]
    return found


@api.post(
    "/threads/search", responses=READS_BODY, openapi_extra=body_doc(ThreadSearch, required=False)
)
@takes_no_body
async def search_threads(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Threads, newest activity first (one without runs yet: by its creation), by
    `metadata` (`graph_id`, `assistant_id`, `title` or any key given, by equality),
    `status` and `ids`; a page of `limit` from `offset`."""
    search = await body_of(request, agents, ThreadSearch)
    found = await _search(agents, search, caller)
    page = found[search.offset : search.offset + search.limit]
    return answer(agents, page, headers={"X-Pagination-Total": str(len(found))})


@api.post(
    "/threads/count", responses=READS_BODY, openapi_extra=body_doc(ThreadSearch, required=False)
)
@takes_no_body
async def count_threads(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """How many threads match (the body as for search)."""
    search = await body_of(request, agents, ThreadSearch)
    return answer(agents, len(await _search(agents, search, caller)))


@api.get("/threads/{thread_id:thread}", responses=NAMED)
async def show_thread(
    thread_id: ThreadId,
    agents: Agents,
    include: Annotated[str | None, Query(description="taken, not used: fields to add")] = None,
) -> Response:
    """The thread: status, pending interrupts, its values with the whole history."""
    return answer(agents, await read_thread(agents, thread_id))


@api.patch("/threads/{thread_id:thread}", responses=READS_BODY, openapi_extra=body_doc(ThreadPatch))
async def patch_thread(thread_id: ThreadId, request: Request, agents: Agents) -> Response:
    """Merge `metadata` into the thread's; `metadata.title` renames it."""
    body = await body_of(request, agents, ThreadPatch)
    title = body.metadata.title
    others = dict(body.metadata.model_extra or {})
    await read_thread(agents, thread_id)  # NotFound first, for any body
    if title is not None:
        created = await agents.created_thread(thread_id)
        try:
            await agents.rename_thread(thread_id, title)  # a bad title is refused here first
        except NotFound:  # no run yet: its created record holds the title
            if created is None:
                raise
        if created is not None:  # its metadata, shown before and after its first run
            await agents.create_thread(thread_id, {**created[0], "title": title}, replace=True)
    if others:
        await agents.set_thread_metadata(thread_id, others)
    return answer(agents, await read_thread(agents, thread_id))


@api.delete(
    "/threads/{thread_id:thread}",
    status_code=204,
    responses={**NAMED, **errors((409, "the thread has a run in progress"))},
)
async def delete_thread(thread_id: ThreadId, agents: Agents) -> Response:
    """Forget the thread, as `DELETE /api/threads/{thread_id}` does."""
    await agents.forget_thread(thread_id)
    return Response(status_code=204)


@api.get("/threads/{thread_id:thread}/state", responses=NAMED)
async def get_state(thread_id: ThreadId, agents: Agents, subgraphs: Subgraphs = False) -> Response:
    """The thread's latest state; its `messages` are the whole history, as
    `GET /api/threads/{thread_id}` shows it (older ones from the transcript)."""
    state = await agents.state(thread_id)
    return answer(agents, state_resource(state.snapshot, state.messages))


@api.get("/threads/{thread_id:thread}/state/{checkpoint_id}", responses=NAMED)
async def get_state_at(
    thread_id: ThreadId, checkpoint_id: str, agents: Agents, subgraphs: Subgraphs = False
) -> Response:
    """The thread's state at one checkpoint (its working state: what the graph held)."""
    state = await agents.state(thread_id, checkpoint_id)
    return answer(agents, state_resource(state.snapshot))


@api.post(
    "/threads/{thread_id:thread}/history",
    responses=READS_BODY,
    openapi_extra=body_doc(HistoryQuery, required=False),
)
@takes_no_body
async def get_history(thread_id: ThreadId, request: Request, agents: Agents) -> Response:
    """The thread's checkpoints as states, newest first: `limit`, `before` a checkpoint."""
    query = await body_of(request, agents, HistoryQuery)
    before = query.before
    if isinstance(before, dict):
        before = before.get("checkpoint_id") or before.get("configurable", {}).get("checkpoint_id")
    snapshots = await agents.history(thread_id, limit=query.limit, before=before)
    wanted = query.metadata or {}
    found = [
        state_resource(s)
        for s in snapshots
        if all((s.metadata or {}).get(k) == v for k, v in wanted.items())
    ]
    return answer(agents, found)


def _checkpoint_of(config: Mapping[str, Any]) -> dict[str, Any]:
    configurable = config.get("configurable", {})
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


@api.post(
    "/threads/{thread_id:thread}/state",
    responses={
        **READS_BODY,
        **errors((409, "the thread has a run in progress (`thread_busy`)")),
    },
    openapi_extra=body_doc(StateUpdate),
)
async def update_state(thread_id: ThreadId, request: Request, agents: Agents) -> Response:
    """Write `values` to the thread's state as node `as_node` did (LangGraph's
    `update_state`), from its latest checkpoint or `checkpoint_id`; `as_node: "__copy__"`
    with no values copies the checkpoint as the latest, and a run with no input then runs
    from it (Studio's "re-run from here"). The checkpoint written, as `{"checkpoint"}`."""
    body = await body_of(request, agents, StateUpdate)
    checkpoint_id = body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id")
    written = await agents.update_state(
        thread_id,
        body.values,
        as_node=body.as_node,
        checkpoint_id=None if checkpoint_id is None else str(checkpoint_id),
    )
    return answer(agents, {"checkpoint": _checkpoint_of(written)})


@api.post(
    "/threads/{thread_id:thread}/copy",
    responses={
        **NAMED,
        **errors(
            (409, "the thread has a run in progress (`thread_busy`)"),
            (415, "a Content-Type other than JSON"),
        ),
    },
)
@takes_no_body
async def copy_thread(thread_id: ThreadId, agents: Agents, caller: CallerOf) -> Response:
    """A new thread, the caller's, with the thread's checkpoints (its history), runs,
    transcript and metadata."""
    copied = await agents.copy_thread(thread_id, caller)
    return answer(agents, await read_thread(agents, copied))
