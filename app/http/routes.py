"""The HTTP API: AG-UI runs over SSE, plain-JSON chat, runs, threads, graphs.

Routes only translate: they parse the request, call the run core
(`app.core.service.AgentService`, reached through `service()`), and encode what it
returns. Bodies are read here, with the size limit, so that a bad one gets a clear
400/413/422 rather than FastAPI's generic answer. Every event stream goes through
sse-starlette, one `ServerSentEvent` per logged event with its sequence number as `id`.
"""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Annotated, Any, Literal, TypeVar

from ag_ui.core import Interrupt, Message, ResumeEntry, RunAgentInput, UserMessage
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import ClientDisconnect

from app.core.errors import BadRequest, Invalid, RunFailed, TooLarge, Unauthorized
from app.core.runlog import Entry
from app.core.runs import RunRecord
from app.core.service import AgentService, MultitaskStrategy, new_run_id
from app.core.threads import ThreadView

BODY_TOO_LARGE = "request body exceeds {limit} bytes"
BAD_LENGTH = "invalid Content-Length header"
CLIENT_LEFT = "the client closed the connection before the body arrived"
MALFORMED_JSON = "request body is not valid JSON: {reason}"
INVALID_BODY = "invalid request body: {errors}"
UNAUTHORIZED = "missing or wrong bearer key (Authorization: Bearer <AGENT_API_KEY>)"
MESSAGE_XOR_RESUME = "give exactly one of `message` or `resume`"
BAD_PROPS = "invalid forwardedProps: {errors}"
BAD_LAST_EVENT_ID = "invalid Last-Event-ID header {value!r}: use the id of an event received"

Model = TypeVar("Model", bound=BaseModel)
logger = logging.getLogger(__name__)
EVENT_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {"text/event-stream": {}}, "description": "AG-UI events, each with its id"}
}


def service(request: Request) -> AgentService:
    """The run core the lifespan opened (a dependency of every API route)."""
    found: AgentService = request.app.state.service
    return found


async def require_key(request: Request) -> None:
    """Refuse with 401 unless the bearer key matches AGENT_API_KEY (when one is set)."""
    key = service(request).settings.agent_api_key
    if key is None:
        return
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    wanted = key.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), wanted):
        raise Unauthorized("unauthorized", UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})


Agents = Annotated[AgentService, Depends(service)]

api = APIRouter(prefix="/api", dependencies=[Depends(require_key)], tags=["api"])


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class GraphOut(_Camel):
    id: str
    description: str


class RunOptions(_Camel):
    """What a run request may add in `forwardedProps` (other keys are ignored)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    multitask_strategy: MultitaskStrategy = Field(
        "reject", description="what to do when the thread has a queued or running run"
    )
    on_disconnect: Literal["continue", "cancel"] = Field(
        "continue", description="whether the run goes on when its client goes away"
    )


class ChatRequest(_Camel):
    """`POST /api/chat`: a new message, or answers to the pending interrupts."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    graph: str
    thread_id: str | None = None
    run_id: str | None = None
    message: str | None = None
    resume: list[ResumeEntry] | None = Field(
        default=None, description="same shape as RunAgentInput.resume"
    )
    multitask_strategy: MultitaskStrategy = "reject"


class ChatReply(_Camel):
    """What one `/api/chat` run produced."""

    thread_id: str
    run_id: str
    status: Literal["done", "interrupted"]
    messages: list[Message]
    interrupts: list[Interrupt]


@api.get("/graphs", response_model=list[GraphOut])
async def list_graphs(agents: Agents) -> list[GraphOut]:
    """The agents this service offers."""
    return [GraphOut(id=info.id, description=info.description) for info in agents.listing]


@api.post("/agents/{graph_id}", response_class=EventSourceResponse, responses=EVENT_STREAM)
async def run_agent(graph_id: str, request: Request, agents: Agents) -> Response:
    """Run an agent: AG-UI `RunAgentInput` in, a stream of AG-UI 1.0 events out."""
    agents.graph(graph_id)  # an unknown graph is a 404 before the body is read
    limit = agents.settings.agent_max_body_bytes
    run_input = _parse(RunAgentInput, await _body(request, limit))
    options = _options(run_input.forwarded_props)
    run = await agents.start_run(
        graph_id,
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        messages=run_input.messages,
        resume=run_input.resume,
        multitask_strategy=options.multitask_strategy,
    )
    on_abort = run.cancel if options.on_disconnect == "cancel" else None
    return _event_stream(agents, run.entries(), on_abort)


@api.get("/threads/{thread_id}/runs", response_model=list[RunRecord])
async def list_runs(thread_id: str, agents: Agents) -> Response:
    """The thread's runs, newest first."""
    records = await agents.runs(thread_id)
    body = b"[" + b",".join(r.model_dump_json(by_alias=True).encode() for r in records) + b"]"
    return Response(body, media_type="application/json")


@api.get("/threads/{thread_id}/runs/{run_id}", response_model=RunRecord)
async def get_run(thread_id: str, run_id: str, agents: Agents) -> Response:
    """One run: its status, times and (for `error`) its RUN_ERROR code and message."""
    record = await agents.run_record(thread_id, run_id)
    return Response(record.model_dump_json(by_alias=True), media_type="application/json")


@api.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses=EVENT_STREAM,
)
async def join_run(
    thread_id: str,
    run_id: str,
    agents: Agents,
    after: Annotated[int | None, Query(ge=0, description="the last event id received")] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> Response:
    """The run's events after `Last-Event-ID` (or `after`), then live ones to its end."""
    if last_event_id is not None:
        if not last_event_id.strip().isdigit():
            raise Invalid("bad_last_event_id", BAD_LAST_EVENT_ID.format(value=last_event_id[:40]))
        after = int(last_event_id)
    entries = await agents.join(thread_id, run_id, after or 0)
    return _event_stream(agents, entries, None)


@api.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202, response_model=RunRecord)
async def cancel_run(thread_id: str, run_id: str, agents: Agents) -> Response:
    """Stop a queued or running run; its stream ends with RUN_ERROR `cancelled`."""
    record = await agents.cancel_run(thread_id, run_id)
    body = record.model_dump_json(by_alias=True)
    return Response(body, status_code=202, media_type="application/json")


@api.post("/chat", response_model=ChatReply)
async def chat(request: Request, agents: Agents) -> Response:
    """The same runs as plain JSON: send `message` or `resume`, get the new messages."""
    body = _parse(ChatRequest, await _body(request, agents.settings.agent_max_body_bytes))
    agents.graph(body.graph)
    if (body.message is None) == (not body.resume):
        raise Invalid("message_xor_resume", MESSAGE_XOR_RESUME)
    messages: list[Message] = []
    if body.message is not None:
        messages.append(UserMessage(id=str(uuid.uuid4()), content=body.message))
    run = await agents.start_run(
        body.graph,
        # Absent means "start a thread"; an empty id is refused like on /api/agents.
        thread_id=uuid.uuid4().hex if body.thread_id is None else body.thread_id,
        run_id=body.run_id or new_run_id(),
        messages=messages,
        resume=body.resume,
        stream_tokens=False,  # the answer is sent whole: token streaming is waste
        multitask_strategy=body.multitask_strategy,
    )
    result = await run.result()
    if result.error is not None:
        raise RunFailed(result.error.code or "run_failed", result.error.message)
    reply = ChatReply(
        thread_id=run.thread_id,
        run_id=run.run_id,
        status="interrupted" if result.interrupts else "done",
        messages=result.messages,
        interrupts=result.interrupts,
    )
    return Response(reply.model_dump_json(by_alias=True), media_type="application/json")


@api.get("/threads/{thread_id}", response_model=ThreadView)
async def get_thread(thread_id: str, agents: Agents) -> Response:
    """The thread's messages (AG-UI format) and its pending interrupts."""
    view = await agents.thread(thread_id)
    return Response(view.model_dump_json(by_alias=True), media_type="application/json")


@api.delete("/threads/{thread_id}", status_code=204)
async def forget_thread(thread_id: str, agents: Agents) -> Response:
    """Forget the thread and its runs (refused while a run is in progress)."""
    await agents.forget_thread(thread_id)
    return Response(status_code=204)


def _options(forwarded: Any) -> RunOptions:
    if not isinstance(forwarded, dict):
        return RunOptions()
    try:
        return RunOptions.model_validate(forwarded)
    except ValidationError as exc:
        raise Invalid("invalid_body", BAD_PROPS.format(errors=_summary(exc))) from None


def _event_stream(
    agents: AgentService, entries: AsyncGenerator[Entry, None], on_abort: Callable[[], None] | None
) -> EventSourceResponse:
    """The entries as SSE; `on_abort` runs if the client leaves before the last event."""
    settings = agents.settings
    clients = agents.telemetry.metrics.sse_clients if agents.telemetry.metrics else None

    async def events() -> AsyncIterator[ServerSentEvent]:
        ended = False
        if clients is not None:
            clients.inc()
        try:
            async with aclosing(entries):
                async for entry in entries:
                    yield ServerSentEvent(data=entry.data, id=str(entry.seq), sep="\n")
            ended = True
        finally:
            if clients is not None:
                clients.dec()
            # At shutdown streams are cut, not abandoned: the run resumes at the next start.
            if not ended and on_abort is not None and not agents.closing:
                on_abort()

    return EventSourceResponse(
        events(),
        ping=settings.agent_sse_keepalive_s,
        ping_message_factory=_ping,
        sep="\n",
        send_timeout=max(30.0, 2 * settings.agent_sse_keepalive_s),
        shutdown_grace_period=settings.agent_shutdown_grace_s,
    )


def _ping() -> ServerSentEvent:
    return ServerSentEvent(comment="ping", sep="\n")


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length")
    try:
        if declared is not None:
            if not declared.isdigit():
                raise BadRequest("bad_content_length", BAD_LENGTH)
            if int(declared) > limit:
                raise TooLarge("body_too_large", BODY_TOO_LARGE.format(limit=limit))
            return await request.body()
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise TooLarge("body_too_large", BODY_TOO_LARGE.format(limit=limit))
        return bytes(body)
    except ClientDisconnect:
        # Nobody is left to answer and nothing went wrong here: one quiet line.
        logger.info("client left during the upload of %s", request.url.path)
        raise BadRequest("client_disconnected", CLIENT_LEFT) from None


def _parse(model: type[Model], body: bytes) -> Model:
    """Validate the JSON body in one pass; 400 for broken JSON, 422 for a wrong shape."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        broken = next((e for e in errors if e["type"] == "json_invalid"), None)
        if broken is not None:
            reason = str(broken.get("ctx", {}).get("error", broken["msg"]))
            raise BadRequest("malformed_json", MALFORMED_JSON.format(reason=reason)) from None
        raise Invalid("invalid_body", INVALID_BODY.format(errors=_summary(exc))) from None


def _summary(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False, include_input=False)
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}" for e in errors[:5]
    )
