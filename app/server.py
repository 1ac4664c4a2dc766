"""The FastAPI application: AG-UI runs over SSE, plain-JSON chat, threads, graphs.

Routes only wire: `app.runs` prepares a run, `app.events` turns the graph stream
into AG-UI events, and the SSE route encodes them. The lifespan opens the SQLite
saver once and compiles every graph with it.

Error answers are JSON `{"detail": <readable message>, "code": <machine code>}`:
400 malformed JSON, 401 missing/wrong bearer key, 404 unknown graph or thread,
409 the thread's state refuses it, 413 body too large, 422 invalid request
(see `app.runs` for the 409/422 rule), 502 a `/api/chat` run that failed.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ag_ui.core import BaseEvent, Interrupt, Message, ResumeEntry, RunAgentInput, UserMessage
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from app.checkpoint import open_checkpointer
from app.events import RunCollector, stream_run
from app.registry import GraphInfo, available_graphs, compile_graphs, describe
from app.runs import Lease, RunRefused, ThreadLocks, check_thread_id, prepare_run
from app.settings import Settings, get_settings
from app.sse import EventStreamResponse
from app.threads import ThreadView, delete_thread, read_thread
from app.webui import mount_web_ui
from graphs.model import ModelNotConfigured, shared_model

UNKNOWN_GRAPH = "unknown graph {graph_id!r}; available: {available}"
UNKNOWN_THREAD = "thread {thread_id} not found"
BODY_TOO_LARGE = "request body exceeds {limit} bytes"
BAD_LENGTH = "invalid Content-Length header"
MALFORMED_JSON = "request body is not valid JSON: {reason}"
INVALID_BODY = "invalid request body: {errors}"
UNAUTHORIZED = "missing or wrong bearer key (Authorization: Bearer <AGENT_API_KEY>)"
MESSAGE_XOR_RESUME = "give exactly one of `message` or `resume`"
THREAD_RUNNING = "thread {thread_id} has a run in progress"

Model = TypeVar("Model", bound=BaseModel)


class ApiError(Exception):
    """An error answer: status, machine code and readable message."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


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


@dataclass
class _Service:
    """What the routes share; filled in by the lifespan."""

    settings: Settings
    locks: ThreadLocks = field(default_factory=ThreadLocks)
    graphs: dict[str, CompiledStateGraph] = field(default_factory=dict)
    listing: list[GraphInfo] = field(default_factory=list)
    saver: BaseCheckpointSaver | None = None

    def graph(self, graph_id: str) -> CompiledStateGraph:
        graph = self.graphs.get(graph_id)
        if graph is None:
            available = ", ".join(self.graphs) or "none"
            message = UNKNOWN_GRAPH.format(graph_id=graph_id[:100], available=available)
            raise ApiError(404, "unknown_graph", message)
        return graph

    def checkpointer(self) -> BaseCheckpointSaver:
        assert self.saver is not None, "the lifespan opens the saver before any request"
        return self.saver


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the ASGI app (graphs and the saver are set up by its lifespan)."""
    service = _Service(settings or get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_checkpointer(service.settings.agent_db) as saver:
            modules = available_graphs()
            service.saver = saver
            service.graphs = compile_graphs(modules, saver)
            service.listing = describe(modules)
            # HTTP clients and TLS set-up are start-up work; a missing key is not fatal
            # here: the first run reports it.
            with suppress(ModelNotConfigured):
                shared_model(service.settings)
            yield

    app = FastAPI(
        title="react-agent",
        summary="LangGraph ReAct agents over AG-UI 1.0 (SSE) and plain JSON.",
        lifespan=lifespan,
    )
    if service.settings.agent_cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=service.settings.agent_cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept"],
        )
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RunRefused, _run_refused)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(_api_router(service))
    _document_bodies(app, {"/api/agents/{graph_id}": RunAgentInput, "/api/chat": ChatRequest})
    mount_web_ui(app)
    return app


def _api_router(service: _Service) -> APIRouter:
    settings = service.settings
    key = settings.agent_api_key
    guard = [Depends(_bearer(key.get_secret_value()))] if key is not None else []
    api = APIRouter(prefix="/api", dependencies=guard, tags=["api"])
    encode = EventEncoder().encode

    @api.get("/graphs", response_model=list[GraphOut])
    async def list_graphs() -> list[GraphOut]:
        return [GraphOut(id=info.id, description=info.description) for info in service.listing]

    @api.post(
        "/agents/{graph_id}",
        response_class=EventStreamResponse,
        status_code=200,
        responses={200: {"content": {"text/event-stream": {}}, "description": "AG-UI events"}},
    )
    async def run_agent(graph_id: str, request: Request) -> Response:
        """Run an agent: AG-UI `RunAgentInput` in, a stream of AG-UI 1.0 events out."""
        graph = service.graph(graph_id)
        run_input = _parse(RunAgentInput, await _body(request, settings.agent_max_body_bytes))
        lease = await service.locks.claim(check_thread_id(run_input.thread_id))
        try:
            prepared = await prepare_run(
                graph,
                graph_id=graph_id,
                thread_id=run_input.thread_id,
                messages=run_input.messages,
                resume=run_input.resume,
                max_message_bytes=settings.agent_max_message_bytes,
            )
        except BaseException:
            lease.release()
            raise
        events = stream_run(
            graph,
            thread_id=prepared.thread_id,
            run_id=run_input.run_id,
            input_or_command=prepared.input,
            config=prepared.config,
        )
        return EventStreamResponse(
            _encoded(events, encode, lease),
            ping_s=settings.agent_sse_keepalive_s,
            on_disconnect=lease.abandon,
            # Releases the thread even if the stream never started (client gone at once).
            on_close=lease.release,
        )

    @api.post("/chat", response_model=ChatReply)
    async def chat(request: Request) -> Response:
        """The same runs as plain JSON: send `message` or `resume`, get the new messages."""
        body = _parse(ChatRequest, await _body(request, settings.agent_max_body_bytes))
        graph = service.graph(body.graph)
        if (body.message is None) == (not body.resume):
            raise ApiError(422, "message_xor_resume", MESSAGE_XOR_RESUME)
        thread_id = check_thread_id(body.thread_id or uuid.uuid4().hex)
        messages: list[Message] = []
        if body.message is not None:
            messages.append(UserMessage(id=str(uuid.uuid4()), content=body.message))
        lease = await service.locks.claim(thread_id)
        collector = RunCollector()
        try:
            prepared = await prepare_run(
                graph,
                graph_id=body.graph,
                thread_id=thread_id,
                messages=messages,
                resume=body.resume,
                max_message_bytes=settings.agent_max_message_bytes,
            )
            run = stream_run(
                graph,
                thread_id=thread_id,
                run_id=uuid.uuid4().hex,
                input_or_command=prepared.input,
                config=prepared.config,
                stream_tokens=False,  # the answer is sent whole: token streaming is waste
            )
            async with aclosing(run):
                async for event in run:
                    collector.add(event)
        finally:
            lease.release()
        result = collector.result()
        if result.error is not None:
            raise ApiError(502, result.error.code or "run_failed", result.error.message)
        reply = ChatReply(
            thread_id=thread_id,
            status="interrupted" if result.interrupts else "done",
            messages=result.messages,
            interrupts=result.interrupts,
        )
        return Response(reply.model_dump_json(by_alias=True), media_type="application/json")

    @api.get("/threads/{thread_id}", response_model=ThreadView)
    async def get_thread(thread_id: str) -> Response:
        """The thread's messages (AG-UI format) and its pending interrupts."""
        view = await read_thread(service.graphs, service.checkpointer(), check_thread_id(thread_id))
        if view is None:
            raise ApiError(404, "unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        return Response(view.model_dump_json(by_alias=True), media_type="application/json")

    @api.delete("/threads/{thread_id}", status_code=204)
    async def forget_thread(thread_id: str) -> Response:
        """Forget the thread (refused while a run is in progress)."""
        if service.locks.busy(check_thread_id(thread_id)):
            raise ApiError(409, "thread_busy", THREAD_RUNNING.format(thread_id=thread_id))
        await delete_thread(service.checkpointer(), thread_id)
        return Response(status_code=204)

    return api


async def _encoded(
    events: AsyncGenerator[BaseEvent, None], encode: Callable[[BaseEvent], str], lease: Lease
) -> AsyncIterator[bytes]:
    try:
        async with aclosing(events):
            async for event in events:
                yield encode(event).encode()
    finally:
        lease.release()


def _bearer(expected: str) -> Callable[[Request], Awaitable[None]]:
    wanted = expected.encode()

    async def require_key(request: Request) -> None:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), wanted):
            raise ApiError(401, "unauthorized", UNAUTHORIZED, {"WWW-Authenticate": "Bearer"})

    return require_key


async def _body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 past `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "bad_content_length", BAD_LENGTH)
        if int(declared) > limit:
            raise ApiError(413, "body_too_large", BODY_TOO_LARGE.format(limit=limit))
        return await request.body()
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "body_too_large", BODY_TOO_LARGE.format(limit=limit))
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
            raise ApiError(400, "malformed_json", MALFORMED_JSON.format(reason=reason)) from None
        summary = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'body'}: {e['msg']}" for e in errors[:5]
        )
        raise ApiError(422, "invalid_body", INVALID_BODY.format(errors=summary)) from None


def _document_bodies(app: FastAPI, bodies: dict[str, type[BaseModel]]) -> None:
    """Show the request schemas of routes that parse their own body in /docs."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        for path, model in bodies.items():
            body_schema = model.model_json_schema(
                by_alias=True, ref_template="#/components/schemas/{model}"
            )
            schemas.update(body_schema.pop("$defs", {}))
            schemas[model.__name__] = body_schema
            ref = {"$ref": f"#/components/schemas/{model.__name__}"}
            schema["paths"][path]["post"]["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": ref}},
            }
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return JSONResponse(
        {"detail": exc.message, "code": exc.code}, status_code=exc.status, headers=exc.headers
    )


async def _run_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RunRefused)
    return JSONResponse({"detail": exc.message, "code": exc.code}, status_code=exc.status)
