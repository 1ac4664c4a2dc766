"""The HTTP API: AG-UI runs over SSE, plain-JSON chat, threads, graphs.

Routes only translate: they parse the request, call the run core
(`app.core.service.AgentService`, reached through `service()`), and encode what it
returns. Bodies are read here, with the size limit, so that a bad one gets a clear
400/413/422 rather than FastAPI's generic answer.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Literal, TypeVar

from ag_ui.core import BaseEvent, Interrupt, Message, ResumeEntry, RunAgentInput, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from app.core.errors import BadRequest, Invalid, RunFailed, TooLarge, Unauthorized
from app.core.service import AgentService
from app.core.threads import ThreadView
from app.http.sse import EventStreamResponse

BODY_TOO_LARGE = "request body exceeds {limit} bytes"
BAD_LENGTH = "invalid Content-Length header"
MALFORMED_JSON = "request body is not valid JSON: {reason}"
INVALID_BODY = "invalid request body: {errors}"
UNAUTHORIZED = "missing or wrong bearer key (Authorization: Bearer <AGENT_API_KEY>)"
MESSAGE_XOR_RESUME = "give exactly one of `message` or `resume`"

Model = TypeVar("Model", bound=BaseModel)

_encode = EventEncoder().encode


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


class ChatRequest(_Camel):
    """`POST /api/chat`: a new message, or answers to the pending interrupts."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    graph: str
    thread_id: str | None = None
    message: str | None = None
    resume: list[ResumeEntry] | None = Field(
        default=None, description="same shape as RunAgentInput.resume"
    )


class ChatReply(_Camel):
    """What one `/api/chat` run produced."""

    thread_id: str
    status: Literal["done", "interrupted"]
    messages: list[Message]
    interrupts: list[Interrupt]


@api.get("/graphs", response_model=list[GraphOut])
async def list_graphs(agents: Agents) -> list[GraphOut]:
    """The agents this service offers."""
    return [GraphOut(id=info.id, description=info.description) for info in agents.listing]


@api.post(
    "/agents/{graph_id}",
    response_class=EventStreamResponse,
    status_code=200,
    responses={200: {"content": {"text/event-stream": {}}, "description": "AG-UI events"}},
)
async def run_agent(graph_id: str, request: Request, agents: Agents) -> Response:
    """Run an agent: AG-UI `RunAgentInput` in, a stream of AG-UI 1.0 events out."""
    agents.graph(graph_id)  # an unknown graph is a 404 before the body is read
    limit = agents.settings.agent_max_body_bytes
    run_input = _parse(RunAgentInput, await _body(request, limit))
    run = await agents.start_run(
        graph_id,
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        messages=run_input.messages,
        resume=run_input.resume,
    )
    return EventStreamResponse(
        _encoded(run.events()),
        ping_s=agents.settings.agent_sse_keepalive_s,
        on_disconnect=run.abandon,
        # Releases the thread even if the stream never started (client gone at once).
        on_close=run.release,
    )


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
        thread_id=body.thread_id or uuid.uuid4().hex,
        run_id=uuid.uuid4().hex,
        messages=messages,
        resume=body.resume,
        stream_tokens=False,  # the answer is sent whole: token streaming is waste
    )
    result = await run.result()
    if result.error is not None:
        raise RunFailed(result.error.code or "run_failed", result.error.message)
    reply = ChatReply(
        thread_id=run.thread_id,
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
    """Forget the thread (refused while a run is in progress)."""
    await agents.forget_thread(thread_id)
    return Response(status_code=204)


async def _encoded(events: AsyncGenerator[BaseEvent, None]) -> AsyncIterator[bytes]:
    async with aclosing(events):
        async for event in events:
            yield _encode(event).encode()


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length")
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
        summary = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}" for e in errors[:5]
        )
        raise Invalid("invalid_body", INVALID_BODY.format(errors=summary)) from None
