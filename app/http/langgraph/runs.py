"""Runs through LangGraph's API: each one started by `AgentService.start_run`, so it is a
run record like any other (listed by `/api/threads/{thread_id}/runs`, cancelled from the
page, resumed after a crash), and streamed from its log through `encoding.StreamEncoder`.

Input: `input.messages` (user messages: `{"role": "user"}` or `{"type": "human"}`), or
`command`: `resume` (a value answers the first pending interrupt, a mapping of pending
interrupt ids answers each; a bare value is shorthand for `{"value": ...}`, as on
`/api`), `update` and `goto` (LangGraph's `Command`); or neither (`input` absent or
null): the run goes on from where the thread stands, as after a breakpoint
(`interrupt_before`/`interrupt_after`) or a state update.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Annotated, Any, Literal, cast

from ag_ui.core import Message, ResumeEntry, RunErrorEvent, UserMessage
from fastapi import Header, Query, Request
from fastapi.responses import Response
from langchain_core.messages import AnyMessage, convert_to_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

from app.core.errors import Conflict, Invalid, NotFound
from app.core.runs.log import Entry, is_terminal
from app.core.runs.prepare import NOTHING_PENDING
from app.core.runs.run import Run
from app.core.runs.service import COMMAND_KEY, NO_INPUT_KEY, PROTOCOL_KEY, AgentService
from app.core.runs.threads import RUN_KEY, run_config
from app.core.storage.runs import MultitaskStrategy
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.assistants import GraphConfig, resolve, run_settings
from app.http.langgraph.common import (
    NAMED,
    STARTS,
    Agents,
    RunId,
    ThreadId,
    answer,
    body_doc,
    body_of,
    router,
)
from app.http.langgraph.encoding import (
    ERROR_KEY,
    INTERRUPT_KEY,
    RUN_STATUS,
    Checkpoints,
    Part,
    StreamEncoder,
    human_messages,
    metadata_part,
    parse_event_id,
    run_resource,
    state_resource,
    stream_modes,
)
from app.http.openapi import EVENT_STREAM, errors
from app.http.routes import MAX_THREADS, takes_no_body

logger = logging.getLogger(__name__)
api = router()
NOT_USER = (
    "input.messages[{index}] is not a user message: this server takes the user's messages "
    "(role user / type human); the thread keeps the rest"
)
RUN_BODY = (
    "A run as langgraph-sdk sends it: `input.messages` (the user's messages), or "
    "`command` (`resume`: answers to the pending interrupts; `update`, `goto`), not both; "
    "or neither, to go on from where the thread stands, as after a breakpoint or a state "
    "update (422 `no_user_message` when no step is next)."
)
INPUT_XOR_COMMAND = "send input (a new message) or command (answers), not both"
NO_NODE = "interrupt_before/after names no node of this graph: {nodes} (its nodes: {known})"
# How often, and how long at most, a stream looks for a checkpoint LangGraph is writing.
CHECKPOINT_POLL_S = 0.02
CHECKPOINT_WAIT_S = 10.0
BAD_EVENT_ID = "invalid Last-Event-ID header {value!r}: use the id of an event received"


# What the run core takes, as the schema can say it: the user's messages (text), or a
# command (`resume`, `update`, `goto`: a node name, a `{"node", "input"}`, or a list).
TEXT_PARTS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
    },
}
CONTENT = {"anyOf": [{"type": "string"}, TEXT_PARTS]}
USER_MESSAGE = {
    "anyOf": [
        {"type": "string"},
        {
            "type": "object",
            "required": ["role", "content"],
            "properties": {"role": {"const": "user"}, "content": CONTENT, "id": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["type", "content"],
            "properties": {
                "type": {"const": "human"},
                "content": CONTENT,
                "id": {"type": "string"},
            },
        },
    ]
}
# A `Send`: the node to go to, with its input.
GOTO_SEND = {
    "type": "object",
    "required": ["node"],
    "properties": {"node": {"type": "string"}, "input": {}},
}
RUN_RULES: dict[str, Any] = {
    "input": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "required": ["messages"],
                "properties": {"messages": {"type": "array", "minItems": 1, "items": USER_MESSAGE}},
            },
        ]
    },
    "command": {
        "anyOf": [
            {"type": "null"},
            {
                "type": "object",
                "properties": {
                    "update": {"anyOf": [{"type": "null"}, {"type": "object"}]},
                    "goto": {
                        "anyOf": [
                            {"type": "null"},
                            {"type": "string"},
                            GOTO_SEND,
                            {"type": "array", "items": {"anyOf": [{"type": "string"}, GOTO_SEND]}},
                        ]
                    },
                },
            },
        ]
    },
}


def _run_schema(schema: dict[str, Any]) -> None:
    schema["properties"].update(RUN_RULES)
    # `input.messages` and `command` exclude each other (else 422 `invalid_body`), and
    # neither needs a thread with something to run (else 422 `no_user_message`): said in
    # words only, as schemathesis cannot generate from the schemas that say it
    # (a top-level anyOf/oneOf loses the object's `required`; if/then/else breaks its
    # fuzzing of every other operation).
    schema["description"] = RUN_BODY


class RunCommand(BaseModel):
    model_config = ConfigDict(extra="ignore")

    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(BaseModel):
    """A run as langgraph-sdk sends it (the fields this server reads; others are ignored)."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_run_schema)

    assistant_id: str
    input: dict[str, Any] | None = None
    command: RunCommand | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: str | list[str] | None = None
    multitask_strategy: MultitaskStrategy = "enqueue"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    if_not_exists: Literal["create", "reject"] | None = Field(
        None, description="`reject`: 404 for a thread there is not; else it is made"
    )
    checkpoint_id: str | None = Field(None, description="run from this checkpoint: a fork")
    checkpoint: dict[str, Any] | None = Field(None, description="its `checkpoint_id`, as above")
    stream_subgraphs: bool = Field(
        False, description="taken: these graphs have no subgraphs, so parts carry no namespace"
    )
    interrupt_before: Literal["*"] | list[str] | None = Field(
        None, description='pause before these nodes ("*": every node)'
    )
    interrupt_after: Literal["*"] | list[str] | None = Field(
        None, description='pause after these nodes ("*": every node)'
    )
    config: GraphConfig | None = Field(None, description="over the assistant's config")
    context: dict[str, Any] | None = Field(None, description="over the assistant's context")


def _user_messages(run_input: dict[str, Any] | None) -> list[Message]:
    messages = (run_input or {}).get("messages") or []
    if not isinstance(messages, list):
        messages = [messages]
    found: list[Message] = []
    for index, message in enumerate(messages):
        if isinstance(message, str):
            message = {"role": "user", "content": message}
        if not isinstance(message, dict) or (
            message.get("role") != "user" and message.get("type") != "human"
        ):
            raise Invalid("invalid_body", NOT_USER.format(index=index))
        found.append(
            UserMessage(
                id=str(message.get("id") or uuid.uuid4()), content=message.get("content") or ""
            )
        )
    return found


async def _answers(agents: AgentService, thread_id: str, resume: Any) -> list[ResumeEntry]:
    pending = [i.id for i in (await agents.thread(thread_id)).interrupts]
    if not pending:
        raise Conflict("nothing_pending", NOTHING_PENDING.format(thread_id=thread_id))
    if isinstance(resume, dict) and resume and set(resume) <= set(pending):
        chosen = resume
    else:
        chosen = {pending[0]: resume}
    return [
        ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=value)
        for interrupt_id, value in chosen.items()
    ]


async def start(
    agents: AgentService,
    thread_id: str,
    body: RunCreate,
    caller: Caller,
    *,
    stream_tokens: bool = True,
) -> Run:
    """Start the run the body asks for on `thread_id` as `caller`, through the run core,
    with its assistant's config and context under its own: new messages, answers
    (`command.resume`) with `command.update`/`goto` or those alone, or no input at all
    (the thread goes on from where it stands, as after a breakpoint or a state update;
    `no_user_message` when nothing is to run there). `stream_tokens=False`: the model
    answers in one piece (a client waiting for the outcome)."""
    resolved = await resolve(agents, body.assistant_id, caller)
    config, context = run_settings(resolved, body.config, body.context)
    graph_id = resolved.graph_id
    if body.if_not_exists == "reject":
        await agents.runs(thread_id, must_exist=True)  # NotFound for a thread there is not
    command = body.command
    resuming = command is not None and "resume" in command.model_fields_set
    directed = {} if command is None else _directions(command)
    if (resuming or directed) and body.input:
        raise Invalid("invalid_body", INPUT_XOR_COMMAND)
    messages = _user_messages(body.input)
    resume = None
    if command is not None and resuming:
        resume = await _answers(agents, thread_id, command.resume)
    return await agents.start_run(
        graph_id,
        thread_id=thread_id,
        run_id=str(uuid.uuid4()),
        messages=messages,
        resume=resume,
        stream_tokens=stream_tokens,
        multitask_strategy=body.multitask_strategy,
        caller=caller,
        checkpoint_id=body.checkpoint_id or (body.checkpoint or {}).get("checkpoint_id"),
        interrupt_before=_nodes(agents, graph_id, body.interrupt_before),
        interrupt_after=_nodes(agents, graph_id, body.interrupt_after),
        command=directed,
        no_input=not (messages or resuming or directed),
        config=config,
        context=context,
        protocol={
            "assistant_id": body.assistant_id,
            "metadata": body.metadata or {},
            "stream_mode": list(stream_modes(body.stream_mode)),
            "multitask_strategy": body.multitask_strategy,
        },
    )


def _nodes(agents: AgentService, graph_id: str, asked: str | list[str] | None) -> list[str]:
    """Breakpoint nodes as LangGraph takes them: "*" or names of the graph's nodes."""
    if not asked:
        return []
    if asked == "*" or "*" in asked:
        return ["*"]
    known = set(agents.graph(graph_id).nodes) - {"__start__"}
    unknown = [node for node in asked if node != "*" and node not in known]
    if unknown:
        raise Invalid("unknown_node", NO_NODE.format(nodes=unknown[:5], known=sorted(known)))
    return list(asked)


def _directions(command: RunCommand) -> dict[str, Any]:
    """`command.update` and `command.goto` as given (the run core checks the nodes), each
    message of `update.messages` with an id: the state and the stream show it by that id."""
    update = command.update
    if isinstance(update, dict) and isinstance(update.get("messages"), list):
        update = {
            **update,
            "messages": [
                {**m, "id": str(uuid.uuid4())} if isinstance(m, dict) and not m.get("id") else m
                for m in update["messages"]
            ],
        }
    return {
        key: value
        for key, value in (("update", update), ("goto", command.goto))
        if value is not None
    }


def _updated_messages(request: Mapping[str, Any]) -> list[AnyMessage]:
    """The messages a run's `command.update` adds (none when they cannot be read)."""
    update = (request.get(COMMAND_KEY) or {}).get("update")
    messages = update.get("messages") if isinstance(update, dict) else None
    if not isinstance(messages, list):
        return []
    try:
        return cast(list[AnyMessage], convert_to_messages(messages))
    except (ValueError, TypeError, NotImplementedError):  # the run refused them too
        return []


async def encoder_for(
    agents: AgentService, thread_id: str, run_id: str, modes: tuple[str, ...] | None
) -> StreamEncoder:
    """An encoder for the run, from the thread's history where it started."""
    started = await agents.run_start(thread_id, run_id)
    request = started.request
    before: list[Any] = []
    values: dict[str, Any] = {}
    if started.checkpoint_before is not None:
        try:
            state = await agents.state(thread_id, started.checkpoint_before)
            before, values = state.messages, dict(state.snapshot.values or {})
        except NotFound:  # pruned since (`react-agent prune`): the run's own parts remain
            pass
    known = {message.id for message in before}
    added: list[AnyMessage] = [
        m for m in human_messages(request.get("messages") or []) if m.id not in known
    ]
    added += _updated_messages(request)
    asked = (request.get(PROTOCOL_KEY) or {}).get("stream_mode")
    # A run with new input shows its input's checkpoint and the first step's before its
    # first step; a resumed one (answers, or no input) the checkpoint it goes on from.
    goes_on = bool(request.get("resume") or request.get(NO_INPUT_KEY) or request.get(COMMAND_KEY))
    graph = agents.graphs.get(started.record.graph)
    return StreamEncoder(
        modes or stream_modes(asked),
        thread_id=thread_id,
        run_id=run_id,
        graph_id=started.record.graph,
        before=before,
        added=added,
        values=values,
        checkpoints=None
        if graph is None
        else _checkpoints_of(
            agents,
            graph,
            thread_id,
            started.record.graph,
            run_id,
            started.checkpoint_before if goes_on else None,
        ),
        first_due=1 if goes_on else 2,
    )


def _checkpoints_of(
    agents: AgentService,
    graph: CompiledStateGraph,
    thread_id: str,
    graph_id: str,
    run_id: str,
    goes_on_from: str | None,
) -> Checkpoints:
    """The run's checkpoints, oldest first: the one it goes on from (if it does), then
    those its metadata names. Asked for the first `need`, it waits (polling: LangGraph
    writes them in the background) until they and their predecessors' task results are
    in, or the run has ended, so that every fold shows the same ones at the same place."""
    config = run_config(thread_id, graph_id)
    loop = asyncio.get_running_loop()
    settled: list[StateSnapshot] = []  # the first ones, which will not change any more

    async def newer() -> list[StateSnapshot]:
        """The run's checkpoints after the settled ones, oldest first."""
        last = _checkpoint_id(settled[-1]) if settled else None
        found: list[StateSnapshot] = []
        if goes_on_from is not None and not settled:
            at = run_config(thread_id, graph_id)
            at["configurable"]["checkpoint_id"] = goes_on_from
            found.append(await graph.aget_state(at))
        own: list[StateSnapshot] = []
        history = cast(
            AsyncGenerator[StateSnapshot, None],
            graph.aget_state_history(config, filter={RUN_KEY: run_id}),
        )
        async with aclosing(history):  # newest first: the settled ones are read no more
            async for snapshot in history:
                if _checkpoint_id(snapshot) == last:
                    break
                own.append(snapshot)
        return [*found, *reversed(own)]

    async def read(need: int | None) -> Sequence[StateSnapshot]:
        deadline = loop.time() + CHECKPOINT_WAIT_S
        while True:
            found = [*settled, *await newer()]
            # A checkpoint followed by another, its tasks' results all in, is final.
            while len(settled) < len(found) - 1 and _ended(found[len(settled)]):
                settled.append(found[len(settled)])
            if need is None or _complete(found, need) or loop.time() > deadline:
                return found
            if not await _active(agents, thread_id, run_id):
                return found
            await asyncio.sleep(CHECKPOINT_POLL_S)

    async def guarded(need: int | None) -> Sequence[StateSnapshot]:
        try:
            return await read(need)
        except Exception:  # the database went away: the log's own parts still go out
            logger.exception("could not read the checkpoints of run %s", run_id)
            return ()

    return guarded


def _complete(found: Sequence[StateSnapshot], need: int) -> bool:
    """Whether the first `need` checkpoints are in, and the results of the tasks of all
    but the last are written (a checkpoint follows a step all of whose tasks finished)."""
    return len(found) >= need and all(_ended(snapshot) for snapshot in found[: need - 1])


def _ended(snapshot: StateSnapshot) -> bool:
    return all(task.result is not None or task.error is not None for task in snapshot.tasks)


def _checkpoint_id(snapshot: StateSnapshot) -> str | None:
    checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
    return str(checkpoint_id) if checkpoint_id is not None else None


async def _active(agents: AgentService, thread_id: str, run_id: str) -> bool:
    if agents.held(thread_id, run_id) is not None:
        return True
    return (await agents.run_record(thread_id, run_id)).active


def event_stream(
    agents: AgentService,
    thread_id: str,
    run_id: str,
    batches: AsyncGenerator[list[Entry], None],
    *,
    modes: tuple[str, ...] | None,
    after: tuple[int, int] | None = None,
    on_abort: Callable[[], None] | None = None,
    headers: dict[str, str] | None = None,
) -> EventSourceResponse:
    """The run's log as LangGraph stream parts, a batch per write to the socket."""

    async def parts() -> AsyncIterator[bytes]:
        ended = False
        try:
            if after is None:
                yield metadata_part(run_id).sse().encode()
            encoder: StreamEncoder | None = None
            async with aclosing(batches):
                async for batch in batches:
                    if encoder is None:  # the run has started: where it started is known
                        encoder = await encoder_for(agents, thread_id, run_id, modes)
                    made: list[Part] = []
                    for entry in batch:
                        await encoder.read(entry)
                        made += encoder.parts(entry, after)
                    if made:
                        yield _masked(agents, "".join(part.sse() for part in made))
            ended = True
        finally:
            if not ended and on_abort is not None and not agents.closing:
                on_abort()

    settings = agents.settings
    return EventSourceResponse(
        parts(),
        ping=settings.agent_sse_keepalive_s,
        sep="\n",
        send_timeout=max(30.0, 2 * settings.agent_sse_keepalive_s),
        shutdown_grace_period=settings.agent_shutdown_grace_s,
        headers=headers,
    )


def _masked(agents: AgentService, text: str) -> bytes:
    """Stream text with any secret masked: the log is masked already, but the values
    parts carry the thread's history from its checkpoints (a reply that quoted one)."""
    if agents.redact and agents.redact.found(text):
        text = agents.redact(text)
    return text.encode()


def _links(thread_id: str, run_id: str, then: str) -> dict[str, str]:
    base = f"/threads/{thread_id}/runs/{run_id}"
    return {"Content-Location": base, "Location": f"{base}/{then}"}


async def _wait(agents: AgentService, thread_id: str, run_id: str) -> RunErrorEvent | None:
    """Until the run's last event; its error, if it failed."""
    last: Entry | None = None
    async with aclosing(await agents.join(thread_id, run_id)) as entries:
        async for entry in entries:
            last = entry
    if last is not None and is_terminal(last):
        event = last.typed()
        return event if isinstance(event, RunErrorEvent) else None
    return None


async def final_values(agents: AgentService, thread_id: str, run_id: str) -> dict[str, Any]:
    """What `/wait` and `/join` answer once the run has ended: the thread's values (the
    whole history), its pending interrupts under `__interrupt__`, or `__error__`."""
    error = await _wait(agents, thread_id, run_id)
    if error is not None:
        return {ERROR_KEY: {"error": error.code or "run_failed", "message": error.message}}
    state = await agents.state(thread_id)
    values: dict[str, Any] = state_resource(state.snapshot, state.messages)["values"]
    pending = [{"value": i.value, "id": i.id} for i in state.snapshot.interrupts]
    if pending:
        values[INTERRUPT_KEY] = pending
    return values


# --- on a thread -------------------------------------------------------------------


async def _run_body(request: Request, agents: AgentService) -> RunCreate:
    """The run's body; on a stateless route, its thread new whatever `if_not_exists` says
    (as LangGraph's servers take it)."""
    body = await body_of(request, agents, RunCreate)
    if getattr(request.state, "new_thread", False):
        body.if_not_exists = "create"
    return body


@api.post(
    "/threads/{thread_id:thread}/runs/stream",
    response_class=EventSourceResponse,
    responses={**EVENT_STREAM, **STARTS},
    openapi_extra=body_doc(RunCreate),
)
async def stream_run(
    thread_id: ThreadId, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """Start a run and stream it: `metadata`, then the asked modes' parts, then `end`."""
    body = await _run_body(request, agents)
    run = await start(agents, thread_id, body, caller)
    on_abort = run.cancel if body.on_disconnect == "cancel" else None
    return event_stream(
        agents,
        thread_id,
        run.run_id,
        run.batches(),
        modes=None,
        on_abort=on_abort,
        headers=_links(thread_id, run.run_id, "stream"),
    )


@api.post("/threads/{thread_id:thread}/runs", responses=STARTS, openapi_extra=body_doc(RunCreate))
async def create_run(
    thread_id: ThreadId, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """Start a run in the background; the answer is the run."""
    run = await start(agents, thread_id, await _run_body(request, agents), caller)
    links = _links(thread_id, run.run_id, "stream")
    return answer(agents, run_resource(run.record, run.request), headers=links)


@api.post(
    "/threads/{thread_id:thread}/runs/wait", responses=STARTS, openapi_extra=body_doc(RunCreate)
)
async def wait_run(
    thread_id: ThreadId, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """Start a run and answer the thread's values once it has ended."""
    body = await _run_body(request, agents)
    # The answer is the values at the end: streaming the model's tokens into the run's
    # log would be paid for by every wait (a stream that joins it gets each text whole).
    run = await start(agents, thread_id, body, caller, stream_tokens=False)
    values = await final_values(agents, thread_id, run.run_id)
    return answer(agents, values, headers=_links(thread_id, run.run_id, "join"))


@api.get(
    "/threads/{thread_id:thread}/runs",
    responses=errors((404, "no such thread (a deleted one included)"), (422, "a bad id or query")),
)
async def list_thread_runs(
    thread_id: ThreadId,
    agents: Agents,
    limit: Annotated[int, Query(ge=1, le=MAX_THREADS)] = 10,
    offset: Annotated[int, Query(ge=0)] = 0,
    status: Annotated[str | None, Query(description="only runs of this status")] = None,
    select: Annotated[list[str] | None, Query(description="taken, not used")] = None,
) -> Response:
    """The thread's runs, newest first, whichever protocol started them."""
    records = await agents.runs(thread_id, must_exist=True)
    if status is not None:
        records = [r for r in records if RUN_STATUS[r.status] == status]
    records = records[offset : offset + limit]
    found = [
        run_resource(r, (await agents.run_start(thread_id, r.run_id)).request) for r in records
    ]
    return answer(agents, found)


@api.get("/threads/{thread_id:thread}/runs/{run_id:run}", responses=NAMED)
async def show_run(thread_id: ThreadId, run_id: RunId, agents: Agents) -> Response:
    """One run."""
    started = await agents.run_start(thread_id, run_id)
    return answer(agents, run_resource(started.record, started.request))


@api.get(
    "/threads/{thread_id:thread}/runs/{run_id:run}/stream",
    response_class=EventSourceResponse,
    responses={**EVENT_STREAM, **NAMED, **errors(410)},
)
async def join_stream(
    thread_id: ThreadId,
    run_id: RunId,
    agents: Agents,
    stream_mode: Annotated[list[str] | None, Query(description="the modes to send")] = None,
    cancel_on_disconnect: Annotated[bool, Query()] = False,
    last_event_id: Annotated[
        str | None,
        Header(
            description="the id of the last part received",
            json_schema_extra={"pattern": r"^[0-9]{1,18}(\.[0-9]{1,9})?$"},
        ),
    ] = None,
) -> Response:
    """The run's parts after `Last-Event-ID` (all without it), then the live ones to its end."""
    try:
        after = parse_event_id(last_event_id)
    except ValueError:
        raise Invalid(
            "bad_last_event_id", BAD_EVENT_ID.format(value=(last_event_id or "")[:40])
        ) from None
    batches = await agents.join_batches(thread_id, run_id, 0)
    modes = tuple(m for m in stream_mode or () if m) or None

    def cancel() -> None:
        run = agents.held(thread_id, run_id)
        if run is not None:
            run.cancel()

    return event_stream(
        agents,
        thread_id,
        run_id,
        batches,
        modes=modes,
        after=after,
        on_abort=cancel if cancel_on_disconnect else None,
        headers={"Content-Location": f"/threads/{thread_id}/runs/{run_id}"},
    )


@api.get("/threads/{thread_id:thread}/runs/{run_id:run}/join", responses={**NAMED, **errors(410)})
async def join_run_values(
    thread_id: ThreadId,
    run_id: RunId,
    agents: Agents,
    request: Request,
    cancel_on_disconnect: Annotated[
        bool, Query(description="cancel the run if the caller leaves before it ends")
    ] = False,
) -> Response:
    """Wait for the run's end; the thread's values then."""
    if not cancel_on_disconnect:
        return answer(agents, await final_values(agents, thread_id, run_id))
    waiting = asyncio.ensure_future(final_values(agents, thread_id, run_id))
    left = asyncio.ensure_future(_caller_left(request))
    try:
        await asyncio.wait((waiting, left), return_when=asyncio.FIRST_COMPLETED)
        ended = waiting.done()
    finally:
        left.cancel()
        waiting.cancel()
    if not ended:
        run = agents.held(thread_id, run_id)
        if run is not None and not agents.closing:
            run.cancel()
        return Response(status_code=204)  # no one is there to read it
    return answer(agents, waiting.result())


async def _caller_left(request: Request) -> None:
    """Until the client closes the connection (a GET's only message before that is its
    empty body)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@api.post(
    "/threads/{thread_id:thread}/runs/{run_id:run}/cancel",
    status_code=202,
    responses={
        **NAMED,
        **errors(
            (409, "the run has ended (`run_finished`); a rollback after a later run"),
            (415, "a Content-Type other than JSON"),
        ),
        204: {"description": "with `wait`: the run has ended (and, with `rollback`, is undone)"},
    },
)
@takes_no_body
async def stop_run(
    thread_id: ThreadId,
    run_id: RunId,
    agents: Agents,
    wait: Annotated[bool, Query(description="answer once the run has ended")] = False,
    action: Annotated[
        Literal["interrupt", "rollback"],
        Query(
            description="`interrupt`: stop it; `rollback`: stop it, then forget it and "
            "take the thread back to where it started"
        ),
    ] = "interrupt",
) -> Response:
    """Stop a queued or running run (409 `run_finished` for an ended one). A rollback
    waits for its end, then undoes it (`AgentService.roll_back_run`): the answer comes
    once it is gone."""
    record = await agents.cancel_run(thread_id, run_id)
    if action == "rollback":
        started = await agents.run_start(thread_id, run_id)  # what it was, before it goes
        await _wait(agents, thread_id, run_id)
        await agents.roll_back_run(thread_id, run_id)
        if wait:
            return Response(status_code=204)
        return answer(agents, run_resource(started.record, started.request), status=202)
    if wait:
        await _wait(agents, thread_id, run_id)
        return Response(status_code=204)
    started = await agents.run_start(thread_id, record.run_id)
    return answer(agents, run_resource(started.record, started.request), status=202)


@api.delete(
    "/threads/{thread_id:thread}/runs/{run_id:run}",
    status_code=204,
    responses={**NAMED, **errors((409, "the run is queued or running (`run_active`)"))},
)
async def delete_run(thread_id: ThreadId, run_id: RunId, agents: Agents) -> Response:
    """Forget an ended run's record and events (the thread's state stays as it is)."""
    await agents.delete_run(thread_id, run_id)
    return Response(status_code=204)


# --- stateless: a thread of their own ------------------------------------------------


@api.post(
    "/runs/stream",
    response_class=EventSourceResponse,
    responses={**EVENT_STREAM, **STARTS},
    openapi_extra=body_doc(RunCreate),
)
async def stream_stateless(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """A run on a new thread, streamed (the thread stays, like any other)."""
    request.state.new_thread = True
    return await stream_run(str(uuid.uuid4()), request, agents, caller)


@api.post("/runs/wait", responses=STARTS, openapi_extra=body_doc(RunCreate))
async def wait_stateless(request: Request, agents: Agents, caller: CallerOf) -> Response:
    """A run on a new thread; its values once it has ended."""
    request.state.new_thread = True
    return await wait_run(str(uuid.uuid4()), request, agents, caller)
