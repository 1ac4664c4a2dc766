"""LangGraph's thread-scoped streaming protocol ("v2"; @langchain/react's `useStream`,
@langchain/langgraph-sdk's `client.threads.stream`) over HTTP and SSE:

- `POST /threads/{thread_id}/commands`: one command `{id, method, params}`, answered
  `{"type": "success", id, result}`; a refused one with its 4xx status and
  `{"type": "error", id, error, message}` (with this server's `detail` and `code`).
  `run.start` starts a run (new messages; with none, the thread goes on; a non-message
  input on a thread with a pending interrupt answers it), `input.respond` answers
  pending interrupts (with `update`/`goto`), `state.get` reads the thread's values.
  Each is a run of the run core (`runs.start`), as on the run-scoped routes.
- `POST /threads/{thread_id}/stream/events`: the body is the subscription (`channels`,
  `namespaces`, `depth`, `since`); the connection follows the thread's runs, one after
  the other, each encoded from its log by `channels.ChannelEncoder`, until the client
  leaves.

Cursor: every event's `seq` (and SSE `id`) is `run number * RUN_SPAN + entry seq *
ENTRY_SPAN + n`, the run's number its place among the thread's runs, oldest first (1,
2, ...), `n` the event's place among those its log entry makes. So `since` names a run
and a place in it: a stream with `since` starts at that run and sends what follows;
one without starts at the thread's first active run, else at its latest (a client that
started a run and then subscribes sees it whole). Deleting a run renumbers the later
ones. WebSocket is not served.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing, suppress
from typing import Annotated, Any, Final

from fastapi import Request
from fastapi.responses import Response
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
)
from sse_starlette import EventSourceResponse

from app.core.errors import Conflict, Gone, Invalid, NotFound, ServiceError
from app.core.runs.log import Entry
from app.core.runs.service import PROTOCOL_KEY, AgentService
from app.core.storage.runs import RunRecord
from app.core.users.identity import Caller
from app.http.auth import CallerOf
from app.http.langgraph.channels import CHANNELS, FOLDED_MODES, ChannelEncoder, channel_of
from app.http.langgraph.common import Agents, ThreadId, answer, body_of, router
from app.http.langgraph.encoding import StreamEncoder, dumps, state_resource
from app.http.langgraph.runs import RunCreate, encoder_for, start

api = router()
# The cursor (see above): room for 10^8 entries a run, 90 000 runs a thread, within the
# integers JavaScript holds exactly.
RUN_SPAN: Final = 10**11
ENTRY_SPAN: Final = 1000
# How soon a stream sees the thread's next run: one this process holds (a command sent
# here), and one only the database knows of (another replica's).
NOT_SERVED = "{method} is a command of LangGraph's protocol this server does not serve"
UNKNOWN_COMMAND = "unknown command {method!r}: send run.start, input.respond or state.get"
NO_ASSISTANT = "run.start needs params.assistant_id (a graph id or an assistant id)"
NOT_PENDING = "interrupt {interrupt_id!r} is not pending on thread {thread_id}"
NO_ANSWER = "input.respond needs interrupt_id and response (or responses: a list of both)"
NO_RUN = "thread {thread_id} has no run: start one with run.start before input.respond"
NOT_INPUT = (
    "run.start takes input.messages (new messages), no input, or (a thread with a pending "
    "interrupt) its answer"
)
BAD_CHANNEL = "unknown channel {channel!r}: one of {known}, or custom:<name>"
# The channels whose events need the thread's history where a run started.
HISTORY_CHANNELS: Final = frozenset({"values", "updates", "tools"})
# Commands of the protocol not served here (the WebSocket's, and the rest).
PROTOCOL_COMMANDS: Final = frozenset(
    {
        "subscription.subscribe",
        "subscription.unsubscribe",
        "subscription.reconnect",
        "agent.getTree",
        "input.inject",
        "state.listCheckpoints",
        "state.fork",
    }
)
# This server's error codes as the protocol's.
PROTOCOL_ERROR: Final = {
    "unknown_interrupt": "no_such_interrupt",
    "nothing_pending": "no_such_interrupt",
    "unknown_run": "no_such_run",
}


# A command's handler: (agents, thread id, params, caller) -> its result.
Handler = Callable[[AgentService, str, dict[str, Any], Caller], Awaitable[dict[str, Any]]]


def _no_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a number is needed, not a boolean")
    return value


class Command(BaseModel):
    """One command as the client sends it."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[StrictInt, Field(ge=0)]
    method: str = Field(min_length=1, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)


class EventStreamRequest(BaseModel):
    """A subscription: the channels to send, and from where (`since`: a `seq` received)."""

    model_config = ConfigDict(extra="ignore")

    channels: list[str] = Field(min_length=1, max_length=20)
    namespaces: list[list[str]] | None = Field(
        None, description="prefixes of the namespaces to send (these graphs' are all `[]`)"
    )
    depth: Annotated[int | None, BeforeValidator(_no_bool), Field(ge=0)] = None
    since: Annotated[int | None, BeforeValidator(_no_bool), Field(ge=0)] = None

    @field_validator("channels")
    @classmethod
    def _known(cls, channels: list[str]) -> list[str]:
        for channel in channels:
            if channel not in CHANNELS and not (
                channel.startswith("custom:") and len(channel) > len("custom:")
            ):
                known = ", ".join(sorted(CHANNELS))
                raise ValueError(BAD_CHANNEL.format(channel=channel[:60], known=known))
        return channels

    def needs_history(self) -> bool:
        """Whether its channels show the thread's state (or a resumed run's tool names)."""
        return any(
            channel in HISTORY_CHANNELS or channel.startswith("custom") for channel in self.channels
        )

    def wants(self, method: str, data: Any) -> bool:
        """Whether an event of the root namespace, of `method`, is for this subscription."""
        if self.namespaces is not None and [] not in self.namespaces:
            return False
        channel = channel_of(method)
        if channel in self.channels:
            return True
        name = data.get("name") if isinstance(data, dict) else None
        return channel == "custom" and f"custom:{name}" in self.channels


# --- commands ------------------------------------------------------------------------


# Both routes are left out of the OpenAPI document (docs/api.md describes them): a
# command's params depend on its method, which a schema cannot say, and an event stream
# ends only when its client leaves; and a schema with them moves the schema fuzzing's
# fixed seed onto other paths (tests/service/test_openapi.py).
@api.post("/threads/{thread_id:thread}/commands", include_in_schema=False)
async def command(
    thread_id: ThreadId, request: Request, agents: Agents, caller: CallerOf
) -> Response:
    """Run one command of the thread-scoped protocol; its result, or its refusal."""
    body = await body_of(request, agents, Command)
    handler = COMMANDS.get(body.method)
    try:
        if handler is None:
            raise _unknown(body.method)
        result = await handler(agents, thread_id, body.params, caller)
    except ServiceError as refused:
        return _refusal(agents, body.id, refused)
    return answer(agents, {"type": "success", "id": body.id, "result": result})


async def _start_run(
    agents: AgentService, thread_id: str, params: dict[str, Any], caller: Caller
) -> dict[str, Any]:
    run = await start(agents, thread_id, await _run_start(agents, thread_id, params), caller)
    return {"run_id": run.run_id}


async def _answer(
    agents: AgentService, thread_id: str, params: dict[str, Any], caller: Caller
) -> dict[str, Any]:
    await start(agents, thread_id, await _respond(agents, thread_id, params), caller)
    return {}


async def _state(
    agents: AgentService, thread_id: str, params: dict[str, Any], caller: Caller
) -> dict[str, Any]:
    state = await agents.state(thread_id)
    resource = state_resource(state.snapshot, state.messages)
    checkpoint_id = (resource["checkpoint"] or {}).get("checkpoint_id")
    return {"values": resource["values"]} | (
        {"checkpoint": {"id": checkpoint_id}} if checkpoint_id else {}
    )


COMMANDS: Final[dict[str, Handler]] = {
    "run.start": _start_run,
    "input.respond": _answer,
    "state.get": _state,
}


class _UnknownCommand(Invalid):
    """A method this server does not serve (422 `unsupported`), with the protocol's code."""

    def __init__(self, message: str, protocol_code: str) -> None:
        super().__init__("unsupported", message)
        self.protocol_code = protocol_code


def _unknown(method: str) -> _UnknownCommand:
    if method in PROTOCOL_COMMANDS:
        return _UnknownCommand(NOT_SERVED.format(method=method), "not_supported")
    return _UnknownCommand(UNKNOWN_COMMAND.format(method=method[:100]), "unknown_command")


async def _run_start(agents: AgentService, thread_id: str, params: dict[str, Any]) -> RunCreate:
    """`run.start`'s params as a run: `input.messages` are new messages; another input
    answers the thread's pending interrupt (the protocol's "run interrupted: resume")."""
    assistant = params.get("assistant_id")
    if not isinstance(assistant, str) or not assistant:
        raise Invalid("invalid_body", NO_ASSISTANT)
    given = params.get("input")
    fields = _run_fields(params)
    if given is None or (isinstance(given, dict) and "messages" in given):
        return _parsed(RunCreate, {**fields, "assistant_id": assistant, "input": given})
    try:
        pending = (await agents.thread(thread_id)).interrupts
    except NotFound:  # a thread with nothing run yet has nothing to answer
        pending = []
    if not pending:
        raise Invalid("invalid_body", NOT_INPUT)
    resume = {"resume": given}
    return _parsed(RunCreate, {**fields, "assistant_id": assistant, "command": resume})


async def _respond(agents: AgentService, thread_id: str, params: dict[str, Any]) -> RunCreate:
    """`input.respond`'s params (one answer, or `responses`) as a resuming run, on the
    assistant of the thread's latest run (the command names none)."""
    records = await agents.runs(thread_id, must_exist=True)  # 404 for a thread there is not
    entries = params.get("responses")
    if entries is None:
        entries = [params]
    if not isinstance(entries, list) or not entries:
        raise Invalid("invalid_body", NO_ANSWER)
    answers: dict[str, Any] = {}
    for entry in entries:
        interrupt_id = entry.get("interrupt_id") if isinstance(entry, dict) else None
        if not isinstance(interrupt_id, str) or "response" not in entry:
            raise Invalid("invalid_body", NO_ANSWER)
        answers[interrupt_id] = entry["response"]
    pending = {i.id for i in (await agents.thread(thread_id)).interrupts}
    for interrupt_id in answers:
        if interrupt_id not in pending:
            message = NOT_PENDING.format(interrupt_id=interrupt_id[:100], thread_id=thread_id)
            raise Conflict("unknown_interrupt", message)
    if not records:
        raise Conflict("nothing_pending", NO_RUN.format(thread_id=thread_id))
    latest = await agents.run_start(thread_id, records[0].run_id)
    assistant = (latest.request.get(PROTOCOL_KEY) or {}).get("assistant_id") or records[0].graph
    directions = {k: params[k] for k in ("update", "goto") if params.get(k) is not None}
    run = {**_run_fields(params), "assistant_id": assistant}
    return _parsed(RunCreate, run | {"command": {"resume": answers, **directions}})


def _run_fields(params: dict[str, Any]) -> dict[str, Any]:
    """The run settings a command may carry, as `RunCreate` names them."""
    fields = {k: params[k] for k in ("config", "metadata", "context") if params.get(k) is not None}
    strategy = params.get("multitask_strategy") or params.get("multitaskStrategy")
    if strategy is not None:
        fields["multitask_strategy"] = strategy
    return fields


def _parsed(model: type[RunCreate], data: dict[str, Any]) -> RunCreate:
    """`data` as the run body (422 `invalid_body` naming what is wrong)."""
    try:
        return model.model_validate(data)
    except ValidationError as bad:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in bad.errors()[:3]
        )
        raise Invalid("invalid_body", f"params: {where}") from None


def _refusal(agents: AgentService, command_id: int, refused: ServiceError) -> Response:
    if isinstance(refused, _UnknownCommand):
        code = refused.protocol_code
    else:
        code = PROTOCOL_ERROR.get(refused.code) or (
            "invalid_argument" if refused.status < 500 else "unknown_error"
        )
    body = {
        "type": "error",
        "id": command_id,
        "error": code,
        "message": refused.message,
        "detail": refused.message,
        "code": refused.code,
    }
    return answer(agents, body, status=refused.status, headers=refused.headers)


# --- the event stream ----------------------------------------------------------------


@api.post("/threads/{thread_id:thread}/stream/events", include_in_schema=False)
async def stream_events(thread_id: ThreadId, request: Request, agents: Agents) -> Response:
    """The thread's events on the channels asked, from `since` (see the module), live
    across its runs until the client leaves."""
    subscription = await body_of(request, agents, EventStreamRequest)
    await agents.runs(thread_id, must_exist=True)  # 404 for a thread there is not
    settings = agents.settings
    return EventSourceResponse(
        _frames(agents, thread_id, subscription),
        ping=settings.agent_sse_keepalive_s,
        sep="\n",
        send_timeout=max(30.0, 2 * settings.agent_sse_keepalive_s),
        shutdown_grace_period=settings.agent_shutdown_grace_s,
    )


async def _frames(
    agents: AgentService, thread_id: str, subscription: EventStreamRequest
) -> AsyncIterator[bytes]:
    since = subscription.since
    number = None if since is None else max(1, since // RUN_SPAN)
    while not agents.closing:
        with agents.admissions(thread_id) as admitted:
            oldest_first = list(reversed(await agents.runs(thread_id)))
            if number is None:
                number = _first_to_send(oldest_first)
            if number is None or number > len(oldest_first):
                # At once when a run is admitted here (this process's, or one heard of),
                # else after the store's recheck interval: what it could not tell.
                with suppress(TimeoutError):
                    await asyncio.wait_for(admitted, agents.store.recheck_s)
                continue
        record = oldest_first[number - 1]
        try:
            batches = await agents.join_batches(thread_id, record.run_id, 0)
        except (Gone, NotFound):  # expired or deleted since: its events are gone
            number += 1
            continue
        async with aclosing(batches):
            encoder: ChannelEncoder | None = None
            async for batch in batches:
                if encoder is None:  # the run has started: where it started is known
                    encoder = await _encoder(agents, record, subscription)
                text = "".join(_events(encoder, record, number, batch, subscription))
                if text:
                    yield _masked(agents, text)
        number += 1


async def _encoder(
    agents: AgentService, record: RunRecord, subscription: EventStreamRequest
) -> ChannelEncoder:
    """The run's encoder; with the thread's history where the run started (read from
    its checkpoints) only for channels that show it: a lifecycle watcher reads none."""
    if not subscription.needs_history():
        bare = StreamEncoder(
            (), thread_id=record.thread_id, run_id=record.run_id, graph_id=record.graph, before=()
        )
        return ChannelEncoder(bare)
    folded = await encoder_for(agents, record.thread_id, record.run_id, FOLDED_MODES)
    return ChannelEncoder(folded)


def _first_to_send(oldest_first: Sequence[RunRecord]) -> int | None:
    """The number of the thread's first active run, else of its latest; None for none."""
    for number, record in enumerate(oldest_first, start=1):
        if record.active:
            return number
    return len(oldest_first) or None


def _events(
    encoder: ChannelEncoder,
    record: RunRecord,
    number: int,
    batch: list[Entry],
    subscription: EventStreamRequest,
) -> list[str]:
    """The SSE frames of one batch, those at or before `since` and those not asked for
    left out."""
    frames: list[str] = []
    since = subscription.since or 0
    for entry in batch:
        event = entry.typed()
        stamp = event.timestamp or int(time.time() * 1000)
        for n, (method, data) in enumerate(encoder.feed(event)):
            seq = number * RUN_SPAN + entry.seq * ENTRY_SPAN + n
            if seq <= since or not subscription.wants(method, data):
                continue
            frame = {
                "type": "event",
                "event_id": f"{record.run_id}:{entry.seq}.{n}",
                "seq": seq,
                "method": method,
                "params": {
                    "namespace": [],
                    "timestamp": stamp,
                    "data": data,
                },
            }
            frames.append(f"event: {method}\ndata: {dumps(frame)}\nid: {seq}\n\n")
    return frames


def _masked(agents: AgentService, text: str) -> bytes:
    """Stream text with any secret masked (the values carry the thread's history)."""
    if agents.redact and agents.redact.found(text):
        text = agents.redact(text)
    return text.encode()
