"""`/mcp`: every agent as one MCP tool, over streamable HTTP (the MCP python-sdk).

A tool is named by its graph id and takes `{"message": str, "thread_id"?: str}`; its
result is the agent's answer and the thread id to continue with. Each call is an ordinary
run (`AgentService.start_run`): listed in /api/threads, recovered after a crash, held to
the thread's multitask rule (`reject`: a thread busy with another run refuses the call).
While the run goes, each tool call it makes is a progress notification (when the client
sent a progress token); a client's `notifications/cancelled` (or its session's end)
cancels the run.

A question from the agent (an interrupt) is asked through `elicitation/create` when the
client can elicit: `accept` resumes the run with the answer, `decline` and `cancel`
resume it with the question cancelled, as the page's cancel does. A client that cannot
elicit gets the question as the result (`status: interrupted`), with the thread id; its
next call on that thread with a message answers it (`app.http.mcp.questions`).

The caller is found as for /api (`app.http.auth.authorize`), before the MCP
transport sees the request.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from fastapi import FastAPI
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from app.core.errors import NotFound, ServiceError
from app.core.runs.run import Run, RunResult
from app.core.runs.service import AgentService, new_run_id
from app.core.users.identity import Caller
from app.http.auth import authorize
from app.http.questions import (
    answer_from_text,
    answer_of,
    elicitation,
    payload_of,
    question_text,
)

logger = logging.getLogger(__name__)

PATH = "/mcp"
SERVER_NAME = "react-agent"
INSTRUCTIONS = (
    "Each tool is an agent. Send `message`; to continue a conversation, also send the "
    "`thread_id` a result gave. An agent's question arrives as an elicitation, or, if "
    "the client cannot elicit, as a result with status `interrupted`: answer it by calling "
    "the same tool again with that thread_id and the answer as the message."
)
PROGRESS_TOOL = "调用工具 {name}"
PROGRESS_RESULT = "工具 {name} 已返回"
THREAD_LINE = "thread_id: {thread_id}"
ANSWER_HOW = "回答方法：再次调用工具 {tool}，thread_id 填 {thread_id}，message 填你的回答{how}。"
RUN_FAILED = "运行失败（{code}）：{message}"
# A wrong answer through elicitation is asked again, this many times in all.
ELICIT_TRIES = 3

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "what to ask the agent"},
        "thread_id": {
            "type": "string",
            "description": "continue this conversation (the thread_id of an earlier result)",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"enum": ["done", "interrupted"]},
        "thread_id": {"type": "string"},
        "run_id": {"type": "string"},
        "answer": {"type": "string", "description": "the agent's answer (done)"},
        "question": {"type": "object", "description": "what the agent asks (interrupted)"},
    },
    "required": ["status", "thread_id", "run_id"],
}


class McpEndpoint:
    """The MCP server of the app's agents, as an ASGI app; `running()` belongs in the
    app's lifespan (the sessions' task group)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        server: Server[Any, Request] = Server(SERVER_NAME, instructions=INSTRUCTIONS)
        self._server = server
        server.list_tools()(self._list_tools)
        server.call_tool()(self._call_tool)
        self._sessions = StreamableHTTPSessionManager(app=server)

    def running(self) -> AbstractAsyncContextManager[None]:
        return self._sessions.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await authorize(Request(scope, receive))  # the caller lands in the scope's state
        except ServiceError as exc:
            body = {"detail": exc.message, "code": exc.code}
            await JSONResponse(body, exc.status, headers=exc.headers)(scope, receive, send)
            return
        await self._sessions.handle_request(scope, receive, send)

    def _service(self) -> AgentService:
        found: AgentService = self._app.state.service
        return found

    async def _list_tools(self) -> list[types.Tool]:
        return [
            types.Tool(
                name=info.id,
                description=info.description,
                inputSchema=INPUT_SCHEMA,
                outputSchema=OUTPUT_SCHEMA,
            )
            for info in self._service().listing
        ]

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        service = self._service()
        try:
            service.graph(name)
            context = self._server.request_context
            if context.request is None:  # every call comes through `__call__`'s check
                raise RuntimeError("an MCP call without its HTTP request")
            caller: Caller = context.request.state.caller
            conversation = _Conversation(service, name, context, caller)
            return await conversation.call(
                str(arguments["message"]), arguments.get("thread_id") or uuid.uuid4().hex
            )
        except ServiceError as exc:
            return _error(exc.message)


class _Conversation:
    """One tool call: its runs (a question answered is another run) and what it tells
    its client."""

    def __init__(self, service: AgentService, graph_id: str, context: Any, caller: Caller) -> None:
        self._service = service
        self._graph_id = graph_id
        self._context = context
        self._caller = caller
        self._progress = 0
        self._reporting = True

    @property
    def _can_elicit(self) -> bool:
        params = self._context.session.client_params
        return params is not None and params.capabilities.elicitation is not None

    async def call(self, message: str, thread_id: str) -> types.CallToolResult:
        pending = await self._pending(thread_id)
        if pending:  # the message answers the question a result asked (no elicitation)
            first = pending[0]
            answer = answer_from_text(payload_of(first), message)
            run = await self._start(thread_id, resume=[_resolved(first, answer)])
        else:
            run = await self._start(thread_id, message=message)
        while True:
            result = await self._follow(run)
            if result.error is not None:
                return _error(
                    RUN_FAILED.format(code=result.error.code, message=result.error.message)
                )
            if not result.interrupts:
                return _done(thread_id, run.run_id, answer_of(result))
            if not self._can_elicit:
                return self._asked(thread_id, run.run_id, result.interrupts[0])
            run = await self._elicit(thread_id, result.interrupts)

    async def _pending(self, thread_id: str) -> list[Interrupt]:
        # Another user's thread is one there is not, whatever the arguments name.
        await self._service.check_owner(thread_id, self._caller)
        try:
            return list((await self._service.thread(thread_id)).interrupts)
        except NotFound:
            return []

    async def _start(
        self, thread_id: str, *, message: str | None = None, resume: Sequence[ResumeEntry] = ()
    ) -> Run:
        messages = [] if message is None else [UserMessage(id=str(uuid.uuid4()), content=message)]
        return await self._service.start_run(
            self._graph_id,
            thread_id=thread_id,
            run_id=new_run_id(),
            messages=messages,
            resume=list(resume) or None,
            stream_tokens=False,  # the answer goes back whole
            caller=self._caller,
        )

    async def _follow(self, run: Run) -> RunResult:
        """The run to its end, its tool calls as progress; cancelled with the request."""
        names: dict[str, str] = {}
        try:
            async for event in run.events():
                if isinstance(event, ToolCallStartEvent):
                    names[event.tool_call_id] = event.tool_call_name
                    await self._report(PROGRESS_TOOL.format(name=event.tool_call_name))
                elif isinstance(event, ToolCallResultEvent):
                    name = names.get(event.tool_call_id, event.tool_call_id)
                    await self._report(PROGRESS_RESULT.format(name=name))
            return await run.result()
        except asyncio.CancelledError:
            # The client cancelled the call or left: the run stops too. At shutdown the
            # sessions are cut, not abandoned: the run resumes at the next start.
            if not self._service.closing:
                run.cancel()
            raise

    async def _report(self, message: str) -> None:
        meta = self._context.meta
        token = meta.progressToken if meta is not None else None
        if token is None or not self._reporting:
            return
        self._progress += 1
        try:
            await self._context.session.send_progress_notification(
                token,
                float(self._progress),
                message=message,
                related_request_id=self._context.request_id,
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            # The client is gone: no more reports. Its cancel, or its session's end,
            # reaches this call as a cancellation.
            self._reporting = False

    async def _elicit(self, thread_id: str, interrupts: Sequence[Interrupt]) -> Run:
        """Ask each question through elicitation and resume the run with the answers; a
        refused answer is asked again with the reason, ELICIT_TRIES times in all."""
        errors: dict[str, str] = {}
        tries = 0
        while True:
            entries = []
            for interrupt in interrupts:
                payload = payload_of(interrupt)
                if interrupt.id in errors:
                    payload = {**payload, "error": errors[interrupt.id]}
                message, schema = elicitation(payload)
                reply = await self._context.session.elicit(
                    message, schema, related_request_id=self._context.request_id
                )
                content = reply.content or {}
                if reply.action == "accept" and "value" in content:
                    entries.append(_resolved(interrupt, {"value": content["value"]}))
                else:
                    entries.append(ResumeEntry(interrupt_id=interrupt.id, status="cancelled"))
            try:
                return await self._start(thread_id, resume=entries)
            except ServiceError as exc:
                tries += 1
                if exc.code != "invalid_answer" or tries == ELICIT_TRIES:
                    raise
                errors = {interrupt.id: exc.message for interrupt in interrupts}

    def _asked(self, thread_id: str, run_id: str, interrupt: Interrupt) -> types.CallToolResult:
        payload = payload_of(interrupt)
        how = ANSWER_HOW.format(tool=self._graph_id, thread_id=thread_id, how="{how}")
        text = question_text(payload, answer_how=how)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structuredContent={
                "status": "interrupted",
                "thread_id": thread_id,
                "run_id": run_id,
                "question": payload,
            },
        )


def _resolved(interrupt: Interrupt, answer: object) -> ResumeEntry:
    return ResumeEntry(interrupt_id=interrupt.id, status="resolved", payload=answer)


def _done(thread_id: str, run_id: str, answer: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=answer),
            types.TextContent(type="text", text=THREAD_LINE.format(thread_id=thread_id)),
        ],
        structuredContent={
            "status": "done",
            "thread_id": thread_id,
            "run_id": run_id,
            "answer": answer,
        },
    )


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], isError=True
    )
