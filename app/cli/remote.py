"""The `--server URL` client: runs over HTTP, their events parsed from SSE.

A run starts with `POST /api/agents/{graph}`, is joined with
`GET /api/threads/{threadId}/runs/{runId}/stream` and stopped with
`POST .../runs/{runId}/cancel`; the thread's runs are `GET .../runs`. The events are
validated into the same typed `ag_ui.core` models the in-process transformer yields,
so the terminal renderer cannot tell the two apart. Error answers (`{"detail",
"code"}`) become `ServiceError`s with the server's message and code.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Any, Final
from urllib.parse import quote

import httpx
from ag_ui.core import (
    BaseEvent,
    Event,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    UserMessage,
)
from httpx_sse import SSEError, aconnect_sse
from pydantic import TypeAdapter, ValidationError

from app.cli.agent import RunInfo
from app.core.errors import (
    ErrorCode,
    NotFound,
    ServiceError,
    Unauthorized,
    Unreachable,
    is_error_code,
)
from app.core.registry import GraphInfo
from app.core.runs.threads import PAGE_MESSAGES, ThreadPage

logger = logging.getLogger(__name__)

UNREACHABLE: Final = "无法连接服务 {url}：{reason}"
UNAUTHORIZED: Final = (
    "服务 {url} 拒绝访问（HTTP 401：{detail}）："
    "请用 --token 传入你的密钥或令牌，或设置环境变量 AGENT_TOKEN"
)
HTTP_ERROR: Final = "服务返回 HTTP {status}：{detail}"
NOT_AN_EVENT_STREAM: Final = "服务 {url} 没有返回事件流（Content-Type: {kind}）"
BAD_THREAD_VIEW: Final = "服务返回的会话数据无法解析"
UNKNOWN_GRAPH: Final = "服务上没有智能体 {graph_id!r}（可用：{available}）"
BAD_RUN_LIST: Final = "服务返回的运行列表无法解析"
RUN_FINISHED: Final[ErrorCode] = "run_finished"  # the code of a cancel that came too late

CONNECT_TIMEOUT_S: Final = 5.0
# A silent stream this long means the server is gone: it sends keep-alives meanwhile.
READ_TIMEOUT_S: Final = 120.0

_events: TypeAdapter[Any] = TypeAdapter(Event)


def _detail(response: httpx.Response) -> tuple[str, str | None]:
    """The readable message and code of an error answer."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase, None
    if isinstance(body, dict):
        detail = body.get("detail") or body.get("message") or body.get("error")
        code = body.get("code")
        if isinstance(detail, str):
            return detail, code if isinstance(code, str) else None
        if detail is not None:
            return str(detail)[:300], None
    return str(body)[:300], None


class RemoteAgent:
    """One agent of a running `react-agent serve`, reached over HTTP."""

    def __init__(self, client: httpx.AsyncClient, graph_id: str) -> None:
        self._client = client
        self.graph_id = graph_id

    @property
    def url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    def _unreachable(self, exc: httpx.TransportError) -> Unreachable:
        reason = str(exc) or type(exc).__name__
        return Unreachable("unreachable", UNREACHABLE.format(url=self.url, reason=reason))

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        self._check(response)
        return response

    def _check(self, response: httpx.Response) -> None:
        if response.status_code == 401:
            detail, _ = _detail(response)
            raise Unauthorized("unauthorized", UNAUTHORIZED.format(url=self.url, detail=detail))
        if response.status_code >= 400:
            detail, code = _detail(response)
            raise ServiceError(
                code if is_error_code(code) else "http_error",
                HTTP_ERROR.format(status=response.status_code, detail=detail),
                status=response.status_code,
            )

    async def graphs(self) -> list[GraphInfo]:
        """The agents the server offers."""
        response = await self._send("GET", "/api/graphs")
        return [
            GraphInfo(id=str(item["id"]), description=str(item.get("description", "")))
            for item in response.json()
        ]

    async def check(self) -> None:
        """Fail early, with one clear message, if the server or this agent is not there."""
        offered = [info.id for info in await self.graphs()]
        if self.graph_id not in offered:
            available = ", ".join(offered) or "无"
            message = UNKNOWN_GRAPH.format(graph_id=self.graph_id, available=available)
            raise NotFound("unknown_graph", message)

    async def thread(
        self, thread_id: str, *, limit: int = PAGE_MESSAGES, before: str | None = None
    ) -> ThreadPage | None:
        """A page of the thread's messages (`GET /api/threads/{id}`) and its pending
        interrupts; None when the server has no such thread."""
        params: dict[str, str | int] = {"limit": limit}
        if before is not None:
            params["before"] = before
        try:
            response = await self._client.get(_thread_path(thread_id), params=params)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code == 404:
            return None
        self._check(response)
        try:
            return ThreadPage.model_validate(response.json())
        except (ValueError, ValidationError):
            logger.warning("unparsable thread view from %s", self.url)
            raise ServiceError("bad_response", BAD_THREAD_VIEW, status=502) from None

    async def under_way(self, thread_id: str) -> RunInfo | None:
        """The thread's newest run (`GET .../runs`) if it is queued or running."""
        try:
            response = await self._client.get(f"{_thread_path(thread_id)}/runs")
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        if response.status_code == 404:
            return None  # an unknown thread, or a server from before run records
        self._check(response)
        try:
            newest = next(iter(response.json()), None)
            if newest is None:
                return None
            graph = newest.get("graph")
            run = RunInfo(
                run_id=str(newest["runId"]),
                status=str(newest["status"]),
                graph=graph if isinstance(graph, str) else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            logger.warning("unparsable run list from %s", self.url)
            raise ServiceError("bad_response", BAD_RUN_LIST, status=502) from None
        return run if run.active else None

    def start(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> RemoteRun:
        """A new run: `POST /api/agents/{graph}` when its events are read."""
        run_id = uuid.uuid4().hex
        body = RunAgentInput(
            thread_id=thread_id,
            run_id=run_id,
            messages=[UserMessage(id=str(uuid.uuid4()), content=message)] if message else [],
            resume=list(resume) or None,
            # The thread list marks the threads a terminal started.
            forwarded_props={"origin": "terminal"},
        ).model_dump(mode="json", by_alias=True)
        return RemoteRun(self, thread_id, run_id, body=body)

    def join(self, thread_id: str, run_id: str) -> RemoteRun:
        """A run under way on the server: its `/stream` from the first event."""
        return RemoteRun(self, thread_id, run_id)

    async def cancel(self, thread_id: str, run_id: str) -> None:
        """`POST .../runs/{run_id}/cancel`; a run that already finished is no error."""
        try:
            await self._send(
                "POST", f"{_thread_path(thread_id)}/runs/{quote(run_id, safe='')}/cancel"
            )
        except ServiceError as exc:
            if exc.code != RUN_FINISHED:
                raise

    async def events(
        self, method: str, path: str, **kwargs: Any
    ) -> AsyncGenerator[BaseEvent, None]:
        """The AG-UI events of an SSE answer to `method path`; an error answer raises."""
        try:
            async with aconnect_sse(self._client, method, path, **kwargs) as source:
                if source.response.is_error:
                    await source.response.aread()  # the error's body, for its message
                self._check(source.response)
                try:
                    async for sse in source.aiter_sse():
                        if not sse.data:
                            continue
                        try:
                            yield _events.validate_json(sse.data)
                        except ValidationError:
                            # A newer server may send event types this client does not know.
                            logger.warning("skipped an unknown event: %s", sse.data[:200])
                except SSEError:
                    kind = source.response.headers.get("content-type", "?")
                    message = NOT_AN_EVENT_STREAM.format(url=self.url, kind=kind)
                    raise ServiceError("bad_response", message, status=502) from None
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None


class RemoteRun:
    """One run on the server, followed over SSE and stopped through its cancel route.

    Started (a `body` to POST) or joined (its stream, by id). The run id is the one
    RUN_STARTED reports, so `stop()` first waits for that event when it has not come yet.
    """

    def __init__(
        self,
        agent: RemoteAgent,
        thread_id: str,
        run_id: str,
        *,
        body: dict[str, Any] | None = None,
    ) -> None:
        self._agent = agent
        self._body = body
        self._known = asyncio.Event()  # the server has the run (or never will)
        self._ended = False
        self.thread_id = thread_id
        self.run_id = run_id
        if body is None:
            self._known.set()

    async def events(self) -> AsyncGenerator[BaseEvent, None]:
        """The run's events to RUN_FINISHED or RUN_ERROR; a refused run raises ServiceError."""
        if self._body is None:
            stream = f"{_thread_path(self.thread_id)}/runs/{quote(self.run_id, safe='')}/stream"
            events = self._agent.events("GET", stream)
        else:
            events = self._agent.events(
                "POST", f"/api/agents/{self._agent.graph_id}", json=self._body
            )
        try:
            async with aclosing(events):
                async for event in events:
                    if isinstance(event, RunStartedEvent):
                        self.run_id = event.run_id
                        self._known.set()
                    elif isinstance(event, RunFinishedEvent | RunErrorEvent):
                        self._ended = True
                    yield event
        finally:
            if not self._known.is_set():
                self._ended = True  # refused, or cut before it started: nothing to stop
                self._known.set()

    async def stop(self) -> None:
        """Ask the server to cancel the run (once it is known there)."""
        await self._known.wait()
        if not self._ended:
            await self._agent.cancel(self.thread_id, self.run_id)


def _thread_path(thread_id: str) -> str:
    return f"/api/threads/{quote(thread_id, safe='')}"


@asynccontextmanager
async def connect(url: str, graph_id: str, credential: str | None) -> AsyncIterator[RemoteAgent]:
    """A client for agent `graph_id` of the server at `url` (bearer `credential`, a key or
    a token, if given)."""
    headers = {"Authorization": f"Bearer {credential}"} if credential else {}
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), headers=headers, timeout=timeout
    ) as client:
        yield RemoteAgent(client, graph_id)
