"""The HTTP API: AG-UI runs over SSE, plain-JSON chat, runs, threads, graphs.

Routes only translate: they parse the request, call the run core
(`app.core.runs.service.AgentService`, reached through `service()`), and encode what it
returns. Bodies are read here, with the size limit, so that a bad one gets a clear
400/413/422 rather than FastAPI's generic answer. A POST or PATCH must say its body is
JSON (`Content-Type: application/json`, or `application/*+json`), else 415: a body sent
as text or a form is what a page on another site can send without asking (no CORS
preflight), and it must change nothing. A POST that reads no body (`@takes_no_body`:
cancel) may send no Content-Type, but never a text or form one. Every event stream goes through
sse-starlette, one `ServerSentEvent` per logged event with its sequence number as `id`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Annotated, Any, Literal, TypeVar

from ag_ui.core import Interrupt, Message, ResumeEntry, RunAgentInput, UserMessage
from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import ClientDisconnect

from app.core.errors import (
    BadRequest,
    Invalid,
    RunFailed,
    TooLarge,
    UnsupportedMediaType,
    run_error_code,
    storage_unavailable,
)
from app.core.runs.log import Entry
from app.core.runs.prepare import THREAD_ID
from app.core.runs.service import AgentService, new_run_id
from app.core.runs.threads import MAX_PAGE_MESSAGES, PAGE_MESSAGES, ThreadPage, page_of
from app.core.storage.runs import MultitaskStrategy, RunRecord, ThreadOrigin, ThreadSummary
from app.core.users.identity import Via
from app.http.auth import CallerOf, authorize
from app.http.openapi import EVENT_STREAM, errors, follow

BODY_TOO_LARGE = "request body exceeds {limit} bytes"
BAD_LENGTH = "invalid Content-Length header"
TOO_MANY_MESSAGES = (
    "the request carries {count} messages; the limit is {limit} "
    "(AGENT_MAX_MESSAGES_PER_REQUEST): send the new ones only, the thread keeps its history"
)
CLIENT_LEFT = "the client closed the connection before the body arrived"
MALFORMED_JSON = "request body is not valid JSON: {reason}"
INVALID_BODY = "invalid request body: {errors}"
MESSAGE_XOR_RESUME = "give exactly one of `message` or `resume`"
BAD_PROPS = "invalid forwardedProps: {errors}"
UNKNOWN_QUERY = "unknown query parameter {names}: this route takes {taken}"
BAD_LAST_EVENT_ID = "invalid Last-Event-ID header {value!r}: use the id of an event received"
NOT_JSON = "send the body as JSON, with Content-Type: application/json (got {got})"
NO_BODY_NOT_JSON = (
    "this request takes no body: send no Content-Type, or application/json (got {got})"
)

Model = TypeVar("Model", bound=BaseModel)
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])
logger = logging.getLogger(__name__)

# The most threads one `GET /api/threads` lists.
MAX_THREADS = 200
# An event id is a SQLite INTEGER: larger ones cannot name an event (and cannot be queried).
MAX_EVENT_ID = 2**63 - 1
# The id rule, as the run core checks it (422 `bad_thread_id` / `bad_run_id`), shown in the
# schema only: the core's refusal stays the one answered.
ID_RULE = "1-128 of `A-Za-z0-9._:@-`, starting with a letter or digit"
ID_SCHEMA = {"pattern": f"^{THREAD_ID.pattern}$"}
ThreadId = Annotated[
    str, Path(description=f"the thread id: {ID_RULE}", json_schema_extra=ID_SCHEMA)
]
RunId = Annotated[str, Path(description=f"the run id: {ID_RULE}", json_schema_extra=ID_SCHEMA)]

# What the routes answer besides their success, by group (`app.http.openapi.errors`); the
# 401 of a server with a key is added where the API is included (`app.http.server`).
IDS = errors((422, "a thread or run id that breaks the id rule"))
UNKNOWN_RUN = errors((404, "no such run on this thread"))
BODY = errors(400, 408, 413, 415, (422, "the body or its messages are wrong; nothing was changed"))
STARTS_RUN = {
    **BODY,
    **errors(
        (409, "the thread's state refuses the run (see `code`); nothing was changed"),
        (429, "too many runs already wait (`queue_full`); `Retry-After` says when to retry"),
        (
            503,
            "the service is shutting down, its database does not answer now "
            "(`storage_unavailable`), or it is full (`too_many_connections`): nothing was "
            "started",
        ),
    ),
}


def service_of(request: Request) -> AgentService:
    """The run core the lifespan opened."""
    found: AgentService = request.app.state.service
    return found


async def service(request: Request) -> AgentService:
    """`service_of`, as the dependency of every API route. Async: FastAPI runs a plain
    function dependency on a worker thread, a thread hop for every request."""
    return service_of(request)


async def known_query(request: Request) -> None:
    """Refuse with 422 a query parameter the route does not take: a misspelt one
    (`?limt=5`) would otherwise be ignored without a word."""
    if not request.query_params:
        return
    route = request.scope.get("route")
    # `path_format`: the path as the API document writes it (no `{name:convertor}`).
    taken = _query_names(request.app, getattr(route, "path_format", ""), request.method)
    unknown = sorted(set(request.query_params) - taken)
    if unknown:
        names = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise Invalid("invalid_request", UNKNOWN_QUERY.format(names=names, taken=sorted(taken)))


def _query_names(app: Any, path: str, method: str) -> frozenset[str]:
    """The query parameters the API document gives `method path` (read once per app)."""
    known: dict[tuple[str, str], frozenset[str]] | None = getattr(app.state, "query_names", None)
    if known is None:
        known = {
            (route_path, verb.upper()): frozenset(
                p["name"] for p in operation.get("parameters", []) if p["in"] == "query"
            )
            for route_path, item in app.openapi()["paths"].items()
            for verb, operation in item.items()
            if verb != "parameters"
        }
        app.state.query_names = known
    return known.get((path, method), frozenset())


# Methods whose requests carry a body, and the routes of those that read none.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_NO_BODY: set[Callable[..., Any]] = set()


def takes_no_body(endpoint: Endpoint) -> Endpoint:
    """Mark a POST route that reads no body (put it under the `@api.post`)."""
    _NO_BODY.add(endpoint)
    return endpoint


def is_json(content_type: str) -> bool:
    """Whether a Content-Type is JSON: `application/json` or `application/<x>+json`,
    with any parameters (`; charset=utf-8`)."""
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def require_json(request: Request) -> None:
    """Refuse with 415 a POST or PATCH whose Content-Type is not JSON, or that has none
    where the route reads a body."""
    if request.method not in BODY_METHODS:
        return
    content_type = request.headers.get("content-type")
    if request.scope.get("endpoint") in _NO_BODY:
        if content_type is not None and not is_json(content_type):
            got = content_type[:60]
            raise UnsupportedMediaType("unsupported_media_type", NO_BODY_NOT_JSON.format(got=got))
    elif content_type is None or not is_json(content_type):
        got = "none" if content_type is None else content_type[:60]
        raise UnsupportedMediaType("unsupported_media_type", NOT_JSON.format(got=got))


Agents = Annotated[AgentService, Depends(service)]

api = APIRouter(
    prefix="/api",
    dependencies=[Depends(authorize), Depends(require_json), Depends(known_query)],
    tags=["api"],
)
# What a run request must carry, as the schema can say it (the run core's 422
# `no_user_message`): answers in `resume`, or a user message among `messages`.
BODY_RULES: dict[str, dict[str, Any]] = {
    "RunAgentInput": {
        "anyOf": [
            {"required": ["resume"], "properties": {"resume": {"type": "array", "minItems": 1}}},
            {
                "properties": {
                    "messages": {
                        "contains": {
                            "type": "object",
                            "required": ["role"],
                            "properties": {"role": {"const": "user"}},
                        }
                    }
                }
            },
        ]
    }
}


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
    origin: ThreadOrigin = Field(
        "api", description="where a thread this run starts is listed as started (`terminal`)"
    )


class ChatRequest(_Camel):
    """`POST /api/chat`: a new message, or answers to the pending interrupts."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        # `message_xor_resume`, as the schema says it: a message and no answers, or answers.
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["message"],
                    "properties": {
                        "message": {"type": "string"},
                        "resume": {"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]},
                    },
                },
                {
                    "required": ["resume"],
                    "properties": {
                        "resume": {"type": "array", "minItems": 1},
                        "message": {"type": "null"},
                    },
                },
            ]
        },
    )

    graph: str
    thread_id: str | None = None
    run_id: str | None = None
    message: str | None = None
    resume: list[ResumeEntry] | None = Field(
        default=None, description="same shape as RunAgentInput.resume"
    )
    multitask_strategy: MultitaskStrategy = "reject"


class ThreadRename(_Camel):
    """`PATCH /api/threads/{threadId}`: the thread's new title."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    title: str = Field(
        description="1-200 characters once leading and trailing spaces are trimmed",
        json_schema_extra={"pattern": r"\S"},
    )


class ChatReply(_Camel):
    """What one `/api/chat` run produced."""

    thread_id: str
    run_id: str
    status: Literal["done", "interrupted"]
    messages: list[Message]
    interrupts: list[Interrupt]


class Me(BaseModel):
    """`GET /api/me`: who the server takes the caller to be."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    user_id: str = Field(
        description="the id threads are owned by: a key's user name, "
        "`jwt:<sub>` for a token, `proxy:<name>` for a proxy's header"
    )
    admin: bool
    via: Via = Field(description="`key`, `token`, `proxy`, or `open` (no sign-in configured)")


@api.get("/me", response_model=Me)
async def me(caller: CallerOf) -> Me:
    """Who you are signed in as: your user id, whether an admin, and how you signed in."""
    return Me(user_id=caller.user_id, admin=caller.admin, via=caller.via)


@api.get("/graphs", response_model=list[GraphOut])
async def list_graphs(agents: Agents) -> list[GraphOut]:
    """The agents this service offers."""
    return [GraphOut(id=info.id, description=info.description) for info in agents.listing]


@api.post(
    "/agents/{graph_id}",
    response_class=EventSourceResponse,
    responses={
        # The run's ids are the ones its request gave.
        200: {**EVENT_STREAM[200], "links": follow("$request.body")},
        **STARTS_RUN,
        **errors((404, "no such graph")),
    },
)
async def run_agent(graph_id: str, request: Request, agents: Agents, caller: CallerOf) -> Response:
    """Run an agent: AG-UI `RunAgentInput` in, a stream of AG-UI 1.0 events out."""
    agents.graph(graph_id)  # an unknown graph is a 404 before the body is read
    limit = agents.settings.agent_max_body_bytes
    run_input = _parse(RunAgentInput, await _body(request, limit))
    # AG-UI clients may resend the thread's history, of which only the new user messages
    # are taken: a cap keeps one request's checking bounded (`too_many_messages`).
    most = agents.settings.agent_max_messages_per_request
    if len(run_input.messages) > most:
        detail = TOO_MANY_MESSAGES.format(count=len(run_input.messages), limit=most)
        raise TooLarge("too_many_messages", detail)
    options = _options(run_input.forwarded_props)
    run = await agents.start_run(
        graph_id,
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        messages=run_input.messages,
        resume=run_input.resume,
        multitask_strategy=options.multitask_strategy,
        origin=options.origin,
        caller=caller,
    )
    on_abort = run.cancel if options.on_disconnect == "cancel" else None
    return _event_stream(agents, run.batches(), on_abort)


@api.get(
    "/threads/{thread_id}/runs",
    response_model=list[RunRecord],
    responses={**IDS, **errors((404, "no such thread (a deleted one included)"))},
)
async def list_runs(thread_id: ThreadId, agents: Agents) -> Response:
    """The thread's runs, newest first; 404 for a thread there is not (a deleted one
    answers as one that never was, so a client can tell it is gone)."""
    records = await agents.runs(thread_id, must_exist=True)
    body = b"[" + b",".join(r.model_dump_json(by_alias=True).encode() for r in records) + b"]"
    return Response(body, media_type="application/json")


@api.get(
    "/threads/{thread_id}/runs/{run_id}", response_model=RunRecord, responses={**IDS, **UNKNOWN_RUN}
)
async def get_run(thread_id: ThreadId, run_id: RunId, agents: Agents) -> Response:
    """One run: its status, times and (for `error`) its RUN_ERROR code and message."""
    record = await agents.run_record(thread_id, run_id)
    return Response(record.model_dump_json(by_alias=True), media_type="application/json")


@api.get(
    "/threads/{thread_id}/runs/{run_id}/stream",
    response_class=EventSourceResponse,
    responses={
        **EVENT_STREAM,
        **UNKNOWN_RUN,
        **errors(410, (422, "a bad id, `after` or `Last-Event-ID`")),
    },
)
async def join_run(
    thread_id: ThreadId,
    run_id: RunId,
    agents: Agents,
    after: Annotated[
        int, Query(ge=0, le=MAX_EVENT_ID, description="the last event id received")
    ] = 0,
    last_event_id: Annotated[
        str | None,
        Header(
            description="the last event id received (wins over `after`)",
            json_schema_extra={"pattern": "^[0-9]{1,18}$"},
        ),
    ] = None,
) -> Response:
    """The run's events after `Last-Event-ID` (or `after`), then live ones to its end."""
    if last_event_id is not None:
        value = last_event_id.strip()
        # ASCII digits only: `isdigit` alone takes "²", which `int` refuses.
        if not (value.isascii() and value.isdigit()) or int(value) > MAX_EVENT_ID:
            raise Invalid("bad_last_event_id", BAD_LAST_EVENT_ID.format(value=last_event_id[:40]))
        after = int(value)
    entries = await agents.join_batches(thread_id, run_id, after)
    return _event_stream(agents, entries, None)


@api.post(
    "/threads/{thread_id}/runs/{run_id}/cancel",
    status_code=202,
    response_model=RunRecord,
    responses={
        **IDS,
        **UNKNOWN_RUN,
        **errors((409, "the run has ended"), (415, "a Content-Type other than JSON")),
    },
)
@takes_no_body
async def cancel_run(thread_id: ThreadId, run_id: RunId, agents: Agents) -> Response:
    """Stop a queued or running run; its stream ends with RUN_ERROR `cancelled`."""
    record = await agents.cancel_run(thread_id, run_id)
    body = record.model_dump_json(by_alias=True)
    return Response(body, status_code=202, media_type="application/json")


@api.post(
    "/chat",
    response_model=ChatReply,
    responses={
        200: {"links": follow("$response.body")},
        **STARTS_RUN,
        **errors((404, "no such graph"), 502),
    },
)
async def chat(request: Request, agents: Agents, caller: CallerOf) -> Response:
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
        run_id=new_run_id() if body.run_id is None else body.run_id,
        messages=messages,
        resume=body.resume,
        stream_tokens=False,  # the answer is sent whole: token streaming is waste
        multitask_strategy=body.multitask_strategy,
        caller=caller,
    )
    result = await run.result()
    if result.error is not None and result.error.code == "storage_unavailable":
        raise storage_unavailable()  # the database, not the run, failed: 503 like any request
    if result.error is not None:
        raise RunFailed(run_error_code(result.error.code), result.error.message)
    reply = ChatReply(
        thread_id=run.thread_id,
        run_id=run.run_id,
        status="interrupted" if result.interrupts else "done",
        messages=result.messages,
        interrupts=result.interrupts,
    )
    return Response(reply.model_dump_json(by_alias=True), media_type="application/json")


@api.get(
    "/threads",
    response_model=list[ThreadSummary],
    responses=errors((404, "no such graph"), (422, "`limit` out of range")),
)
async def list_threads(
    agents: Agents,
    caller: CallerOf,
    graph: Annotated[
        str | None, Query(description="only this agent's threads (default: every agent's)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_THREADS, description="at most this many")] = 50,
    owner: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=300,
            pattern=r"^[^\x00-\x1f\x7f]+$",
            description="an admin's filter: only this user's threads (default: everyone's); "
            "another user's list is always their own",
        ),
    ] = None,
) -> Response:
    """The caller's threads with runs (an admin's: everyone's), newest activity first:
    title, agent, owner, latest run's status."""
    summaries = await agents.threads(graph, limit, owner if caller.admin else caller.user_id)
    body = b"[" + b",".join(t.model_dump_json(by_alias=True).encode() for t in summaries) + b"]"
    return Response(body, media_type="application/json")


@api.patch(
    "/threads/{thread_id}",
    response_model=ThreadSummary,
    responses={
        **errors(400, 408, 413, 415, (422, "a bad id, or a title empty or over 200 characters")),
        **errors((404, "no such thread")),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ThreadRename.model_json_schema()}},
        }
    },
)
async def rename_thread(thread_id: ThreadId, request: Request, agents: Agents) -> Response:
    """Rename the thread; the title stays through its later runs."""
    body = _parse(ThreadRename, await _body(request, agents.settings.agent_max_body_bytes))
    summary = await agents.rename_thread(thread_id, body.title)
    return Response(summary.model_dump_json(by_alias=True), media_type="application/json")


@api.get(
    "/threads/{thread_id}",
    response_model=ThreadPage,
    responses={
        **errors((422, "a bad id, `limit` out of range, or `before` not a message of the thread")),
        **errors((404, "no such thread")),
    },
)
async def get_thread(
    thread_id: ThreadId,
    agents: Agents,
    limit: Annotated[
        int,
        Query(
            ge=1,
            le=MAX_PAGE_MESSAGES,
            description="the latest this many messages (a few more when a step would be cut)",
        ),
    ] = PAGE_MESSAGES,
    before: Annotated[
        str | None,
        Query(
            description="only messages before this message id (`older.before` of a page)",
            min_length=1,
        ),
    ] = None,
) -> Response:
    """A page of the thread's messages (AG-UI format), the latest first, and every pending
    interrupt; `older` says where the messages before the page continue."""
    page = page_of(await agents.thread(thread_id), limit=limit, before=before)
    return Response(page.model_dump_json(by_alias=True), media_type="application/json")


@api.delete(
    "/threads/{thread_id}",
    status_code=204,
    responses={
        **IDS,
        **errors(
            (404, "no such thread (or deleted already)"), (409, "the thread has a run in progress")
        ),
    },
)
async def forget_thread(thread_id: ThreadId, agents: Agents) -> Response:
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
    agents: AgentService,
    batches: AsyncGenerator[list[Entry], None],
    on_abort: Callable[[], None] | None,
) -> EventSourceResponse:
    """The logged events as SSE, one `ServerSentEvent` each, a batch per write to the
    socket; `on_abort` runs if the client leaves before the last event."""
    settings = agents.settings
    clients = agents.telemetry.metrics.sse_clients if agents.telemetry.metrics else None

    async def events() -> AsyncIterator[bytes]:
        ended = False
        if clients is not None:
            clients.inc()
        try:
            async with aclosing(batches):
                async for batch in batches:
                    yield b"".join(
                        ServerSentEvent(data=entry.data, id=str(entry.seq), sep="\n").encode()
                        for entry in batch
                    )
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
            if not (declared.isascii() and declared.isdigit()):  # `int` refuses "²"
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
    return summary(exc.errors(include_url=False, include_input=False))


def summary(errors: Sequence[Mapping[str, Any]]) -> str:
    """The first validation errors as `where: what; ...` (never the values: they may be long)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}" for e in errors[:5]
    )
