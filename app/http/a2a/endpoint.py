"""`/a2a`: the agents over the A2A protocol (a2a-sdk), questions as `input-required`.

One A2A agent whose skills are the service's agents: its card is served at
`/.well-known/agent-card.json`, its JSON-RPC endpoint at `/a2a` (A2A 1.0 methods, and
0.3's `message/send`, `message/stream`, `tasks/get` on the same endpoint). A message's
`metadata.skill` names the agent (default: the first one); its `contextId` is the
thread, so a conversation continues where the context left it. Each message is an
ordinary run (`AgentService.start_run`). A question from the agent ends the message's
task in `input-required` with the question as its status message; the next message on
that task answers it (`app.http.mcp.questions.answer_from_text`: an option by value,
label or number, yes/no for a confirmation). The bearer key is checked as for /api.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from a2a.auth.user import User
from a2a.helpers.proto_helpers import get_message_text, new_task, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role, TaskState
from ag_ui.core import ResumeEntry, UserMessage
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import NotFound, ServiceError
from app.core.runs.service import AgentService, new_run_id
from app.core.users.identity import Caller
from app.http.a2a.paths import CARD_PATH, PATH
from app.http.auth import authorize
from app.http.questions import answer_from_text, answer_of, payload_of, question_text

NAME = "react-agent"
DESCRIPTION = "LangGraph ReAct agents; pick one with the message's metadata.skill."
RUN_FAILED = "运行失败（{code}）：{message}"
ANSWER_HOW = "回答方法：在这个任务里回复你的回答{how}。"


class AgentsExecutor(AgentExecutor):
    """Runs each A2A message as a run of the agent its `metadata.skill` names."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app

    def _service(self) -> AgentService:
        found: AgentService = self._app.state.service
        return found

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        service = self._service()
        task_id, thread_id = context.task_id or uuid.uuid4().hex, context.context_id or ""
        updater = TaskUpdater(event_queue, task_id, thread_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(task_id, thread_id, TaskState.TASK_STATE_SUBMITTED)
            )
        message = context.message
        text = get_message_text(message) if message is not None else ""
        skill = str(context.metadata.get("skill") or "") or service.listing[0].id
        caller = _caller_of(context)
        try:
            await service.check_owner(thread_id, caller)  # another user's context: unknown
            pending = await _pending(service, thread_id)
            graph_id = pending[1] if pending is not None else skill
            resume = None
            messages = [UserMessage(id=str(uuid.uuid4()), content=text)]
            if pending is not None and pending[0]:
                first = pending[0][0]
                answer = answer_from_text(payload_of(first), text)
                resume = [ResumeEntry(interrupt_id=first.id, status="resolved", payload=answer)]
                messages = []
            run = await service.start_run(
                graph_id,
                thread_id=thread_id,
                run_id=new_run_id(),
                messages=messages,
                resume=resume,
                stream_tokens=False,
                caller=caller,
            )
            await updater.start_work()
            try:
                result = await run.result()
            except asyncio.CancelledError:
                # The task was cancelled (`CancelTask`) or its client left: the run stops
                # too, but not at shutdown, when it resumes at the next start.
                if not service.closing:
                    run.cancel()
                raise
        except ServiceError as exc:
            await updater.failed(_reply(exc.message, task_id, thread_id))
            return
        if result.error is not None:
            failed = RUN_FAILED.format(code=result.error.code, message=result.error.message)
            await updater.failed(_reply(failed, task_id, thread_id))
        elif result.interrupts:
            question = question_text(payload_of(result.interrupts[0]), answer_how=ANSWER_HOW)
            await updater.requires_input(_reply(question, task_id, thread_id))
        else:
            await updater.complete(_reply(answer_of(result), task_id, thread_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


async def _pending(service: AgentService, thread_id: str) -> tuple[list[Any], str] | None:
    """The thread's pending questions and its agent; None for a thread not started."""
    try:
        view = await service.thread(thread_id)
    except NotFound:
        return None
    return list(view.interrupts), view.graph_id or ""


def _reply(text: str, task_id: str, context_id: str) -> Any:
    return new_text_message(text, role=Role.ROLE_AGENT, task_id=task_id, context_id=context_id)


class _SignedIn(User):
    """The request's caller as the A2A SDK sees its user: tasks are kept per user."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.caller.user_id


class _CallerContext(DefaultServerCallContextBuilder):
    """A call's context as the SDK builds it (the protocol version is read from the
    headers it keeps), with the caller as its user and without the credential."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        headers = context.state.get("headers")
        if isinstance(headers, dict):
            headers.pop("authorization", None)
        context.user = _SignedIn(request.state.caller)
        return context


def _caller_of(context: RequestContext) -> Caller:
    user = context.call_context.user if context.call_context is not None else None
    if not isinstance(user, _SignedIn):  # every route is behind `_KeyChecked`
        raise RuntimeError("an A2A call without its caller")
    return user.caller


class _KeyChecked:
    """An A2A route's ASGI app behind the /api check of who calls."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await authorize(Request(scope, receive))  # the caller lands in the scope's state
        except ServiceError as exc:
            body = {"detail": exc.message, "code": exc.code}
            await JSONResponse(body, exc.status, headers=exc.headers)(scope, receive, send)
            return
        await self._app(scope, receive, send)


def _card(listing: list[tuple[str, str]], url: str) -> AgentCard:
    return AgentCard(
        name=NAME,
        description=DESCRIPTION,
        version="1.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id=graph_id, name=graph_id, description=description, tags=[graph_id])
            for graph_id, description in listing
        ],
    )


def a2a_app(app: FastAPI, listing: list[tuple[str, str]]) -> ASGIApp:
    """The card's route and the JSON-RPC endpoint's, as one router; `listing` is (graph
    id, description) of each agent."""
    handler = DefaultRequestHandler(
        agent_executor=AgentsExecutor(app),
        task_store=InMemoryTaskStore(),
        agent_card=_card(listing, PATH),
    )

    async def card(request: Request) -> Response:
        # The endpoint's address as the client reached this one (behind a proxy: its Host),
        # served by the SDK's own card route (ETag, compat fields).
        url = str(request.base_url).rstrip("/") + PATH
        [route] = create_agent_card_routes(_card(listing, url), card_url=CARD_PATH)
        assert isinstance(route, Route)
        answer: Response = await route.endpoint(request)
        return answer

    routes: list[BaseRoute] = [Route(CARD_PATH, card, methods=["GET"])]
    for route in create_jsonrpc_routes(
        handler, PATH, context_builder=_CallerContext(), enable_v0_3_compat=True
    ):
        assert isinstance(route, Route)
        routes.append(Route(route.path, _KeyChecked(route.app), methods=list(route.methods or ())))
    return Router(routes=routes)
