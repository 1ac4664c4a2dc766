"""What one benchmark run is against each target, and how its answer is checked.

One run = a user message -> the model calls `lookup` -> the tool answers -> the model
streams its 20-token answer. A target returns a `Sample`: wall time, time to the first
streamed text token (streaming targets), and whether the answer was complete and right.

Families: `floor` (the graph in-process; the fake model alone), `ours`
(`react-agent serve`), `ours-pg` (the same on PostgreSQL: `bench.postgres`), `base` (the
same, from the baseline git ref: `bench.baseline`), `peer` (`langgraph dev`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StreamMode

from bench import wire
from bench.fake_model import TOOL_ARGS, TOOL_NAME
from bench.graph import TOOL_RESULT
from bench.procs import Server

PROMPT = "benchmark question"
GRAPH_ID = "bench"
# What the service's event transformer consumes.
STREAM_MODES: list[StreamMode] = ["messages", "updates", "custom"]

WRONG_ANSWER = "answer {got!r} is not the expected one"
BAD_STATUS = "HTTP {status}: {body}"
NOT_JSON = "event {index} is not JSON: {line!r}"
FIRST_EVENT = "first event is {type}, not RUN_STARTED"
LAST_EVENT = "last event is {type}, not RUN_FINISHED"
NO_EVENTS = "the stream carried no events"
NO_TOOL_RESULT = "no TOOL_CALL_RESULT with the tool's answer"
STREAM_ERROR = "the stream reported an error: {detail}"


class Malformed(Exception):
    """The target answered, but not with a complete, well-formed run."""


@dataclass(slots=True)
class Sample:
    """One run as the client saw it."""

    ok: bool
    latency_s: float
    ttft_s: float | None = None
    error: str | None = None
    malformed: bool = False
    server_cpu_s: float | None = None  # sequential runs only: the server's CPU for this run
    db_cpu_s: float | None = None  # the same for its PostgreSQL backends, when visible


class Target(ABC):
    """One way of doing a run; `run()` never raises, it returns a failed Sample instead."""

    name: str
    family: str
    streams: bool = False
    server: Server | None = None
    timeout_s: float = 120.0
    # None: every run starts a thread of its own; set: every run continues this thread.
    thread_id: str | None = None

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def run_thread(self) -> str:
        """The thread the next run goes to."""
        return self.thread_id or uuid.uuid4().hex

    async def run(self) -> Sample:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_s):
                ttft = await self._run(started)
        except Malformed as exc:
            return Sample(False, time.perf_counter() - started, error=str(exc), malformed=True)
        except Exception as exc:  # the sample's top-level handler: any failure is an error
            error = f"{type(exc).__name__}: {exc}"[:300]
            return Sample(False, time.perf_counter() - started, error=error)
        finally:
            if self.server is not None:
                self.server.runs += 1
        return Sample(True, time.perf_counter() - started, ttft)

    @abstractmethod
    async def _run(self, started: float) -> float | None:
        """Do one run; return seconds from `started` to the first text token, if streamed."""

    def _check(self, text: str) -> None:
        if text != self.answer:
            raise Malformed(WRONG_ANSWER.format(got=text[:80]))


def _thread_config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


class HttpTarget(Target):
    """A target behind an HTTP server this benchmark started."""

    def __init__(self, answer: str, client: httpx.AsyncClient, server: Server) -> None:
        super().__init__(answer)
        self.client = client
        self.server = server
        self.base = server.url


class FloorInvoke(Target):
    """The graph in this process: `await graph.ainvoke(...)`, SQLite saver, new thread."""

    name = "floor/ainvoke"
    family = "floor"

    def __init__(self, answer: str, graph: CompiledStateGraph) -> None:
        super().__init__(answer)
        self.graph = graph

    async def _run(self, started: float) -> float | None:
        config = _thread_config(self.run_thread())
        result = await self.graph.ainvoke({"messages": [HumanMessage(PROMPT)]}, config)
        last: BaseMessage = result["messages"][-1]
        self._check(str(last.content))
        return None


class FloorStream(Target):
    """The graph in this process through `astream` with the service's stream modes."""

    name = "floor/astream"
    family = "floor"
    streams = True

    def __init__(self, answer: str, graph: CompiledStateGraph) -> None:
        super().__init__(answer)
        self.graph = graph

    async def _run(self, started: float) -> float | None:
        config = _thread_config(self.run_thread())
        ttft: float | None = None
        text: list[str] = []
        stream = self.graph.astream(
            {"messages": [HumanMessage(PROMPT)]}, config, stream_mode=STREAM_MODES
        )
        async for mode, data in stream:
            if mode != "messages":
                continue
            chunk = data[0]
            if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str):
                if chunk.content and ttft is None:
                    ttft = time.perf_counter() - started
                text.append(chunk.content)
        self._check("".join(text))
        return ttft


class ModelOnly(Target):
    """The physical limit: the two model calls of a run, straight to the fake model."""

    name = "floor/model-only"
    family = "floor"
    streams = True

    def __init__(self, answer: str, client: httpx.AsyncClient, model_url: str) -> None:
        super().__init__(answer)
        self.client = client
        self.url = model_url + "/v1/chat/completions"

    async def _run(self, started: float) -> float | None:
        user = {"role": "user", "content": PROMPT}
        await self._call([user], started)
        call = {"id": "call_1", "type": "function"}
        assistant = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{**call, "function": {"name": TOOL_NAME, "arguments": TOOL_ARGS}}],
        }
        tool = {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT}
        ttft, text = await self._call([user, assistant, tool], started)
        self._check(text)
        return ttft

    async def _call(
        self, messages: list[dict[str, Any]], started: float
    ) -> tuple[float | None, str]:
        body = {"model": "bench-model", "messages": messages, "stream": True}
        ttft: float | None = None
        text: list[str] = []
        async with self.client.stream("POST", self.url, json=body) as response:
            if response.status_code != 200:
                raise Malformed(BAD_STATUS.format(status=response.status_code, body=""))
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = orjson.loads(line[6:])["choices"][0]["delta"]
                content = delta.get("content")
                if content:
                    if ttft is None:
                        ttft = time.perf_counter() - started
                    text.append(content)
        return ttft, "".join(text)


def agui_input(thread_id: str) -> dict[str, Any]:
    """A `RunAgentInput` as `@ag-ui/client`'s HttpAgent sends it: one new user message."""
    return {
        "threadId": thread_id,
        "runId": uuid.uuid4().hex,
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": PROMPT}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


@dataclass(slots=True)
class AguiRun:
    """What an AG-UI event stream carried."""

    types: list[str]
    text: str
    tool_results: list[str]
    ttft_s: float | None


async def read_agui_stream(
    lines: AsyncIterator[str] | AsyncIterator[bytes], started: float
) -> AguiRun:
    """Parse every `data:` line of an AG-UI SSE stream (each must be a JSON event)."""
    types: list[str] = []
    text: list[str] = []
    results: list[str] = []
    ttft: float | None = None
    async for line in lines:
        if line[:5] not in ("data:", b"data:"):
            continue  # blank separators and `: ping` keep-alive comments
        try:
            event = orjson.loads(line[5:])
        except orjson.JSONDecodeError:
            raise Malformed(NOT_JSON.format(index=len(types), line=line[:80])) from None
        kind = event.get("type")
        types.append(kind)
        if kind == "TEXT_MESSAGE_CONTENT":
            if ttft is None:
                ttft = time.perf_counter() - started
            text.append(event["delta"])
        elif kind == "TOOL_CALL_RESULT":
            results.append(event.get("content", ""))
    return AguiRun(types, "".join(text), results, ttft)


def check_agui_run(run: AguiRun, answer: str) -> None:
    """Raise Malformed unless the run is complete: RUN_STARTED first, RUN_FINISHED last."""
    if not run.types:
        raise Malformed(NO_EVENTS)
    if run.types[0] != "RUN_STARTED":
        raise Malformed(FIRST_EVENT.format(type=run.types[0]))
    if run.types[-1] != "RUN_FINISHED":
        raise Malformed(LAST_EVENT.format(type=run.types[-1]))
    if TOOL_RESULT not in run.tool_results:
        raise Malformed(NO_TOOL_RESULT)
    if run.text != answer:
        raise Malformed(WRONG_ANSWER.format(got=run.text[:80]))


class OursAgui(HttpTarget):
    """`react-agent serve`: `POST /api/agents/bench`, the AG-UI SSE stream read to the end."""

    name = "ours/agui"
    family = "ours"
    streams = True

    async def _run(self, started: float) -> float | None:
        url = f"{self.base}/api/agents/{GRAPH_ID}"
        body = agui_input(self.run_thread())
        headers = {"accept": "text/event-stream"}
        async with self.client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:200].decode(errors="replace")
                raise Malformed(BAD_STATUS.format(status=response.status_code, body=detail))
            run = await read_agui_stream(response.aiter_lines(), started)
        check_agui_run(run, self.answer)
        return run.ttft_s


class OursAguiNoMetrics(OursAgui):
    """`ours/agui` against a `react-agent serve` with `AGENT_METRICS=false` (metrics phase)."""

    name = "ours/agui-nometrics"


class OursPgAgui(OursAgui):
    """`ours/agui` against a `react-agent serve` on PostgreSQL (issue 12)."""

    name = "ours-pg/agui"
    family = "ours-pg"


class OursChat(HttpTarget):
    """`react-agent serve`: `POST /api/chat`, plain JSON."""

    name = "ours/chat"
    family = "ours"

    async def _run(self, started: float) -> float | None:
        body = {"graph": GRAPH_ID, "message": PROMPT}
        if self.thread_id is not None:
            body["threadId"] = self.thread_id
        response = await self.client.post(f"{self.base}/api/chat", json=body)
        if response.status_code != 200:
            raise Malformed(BAD_STATUS.format(status=response.status_code, body=response.text))
        reply = orjson.loads(response.content)
        if reply.get("status") != "done":
            raise Malformed(BAD_STATUS.format(status=200, body=response.text[:200]))
        self._check(str(reply["messages"][-1].get("content")))
        return None


class BaseAgui(OursAgui):
    """`ours/agui` against the baseline server (`react-agent serve` from the baseline ref)."""

    name = "base/agui"
    family = "base"


class BaseChat(OursChat):
    """`ours/chat` against the baseline server."""

    name = "base/chat"
    family = "base"


BASE_TARGETS: dict[str, type[HttpTarget]] = {"agui": BaseAgui, "chat": BaseChat}


def run_body(**extra: Any) -> dict[str, Any]:
    """A LangGraph API run of the bench graph, as langgraph-sdk sends it."""
    return {
        "assistant_id": GRAPH_ID,
        "input": {"messages": [{"role": "user", "content": PROMPT}]},
        "if_not_exists": "create",
        **extra,
    }


class PeerWait(HttpTarget):
    """`langgraph dev`: `POST /threads/{id}/runs/wait` on a new thread."""

    name = "peer/wait"
    family = "peer"

    async def _run(self, started: float) -> float | None:
        thread_id = str(uuid.uuid4())
        url = f"{self.base}/threads/{thread_id}/runs/wait"
        response = await self.client.post(url, json=run_body())
        if response.status_code != 200:
            raise Malformed(BAD_STATUS.format(status=response.status_code, body=response.text))
        state = orjson.loads(response.content)
        if "__error__" in state:
            raise Malformed(STREAM_ERROR.format(detail=str(state["__error__"])[:200]))
        self._check(str(state["messages"][-1].get("content")))
        return None


class PeerStream(HttpTarget):
    """`langgraph dev`: `POST /threads/{id}/runs/stream` (messages-tuple + updates) to the end."""

    name = "peer/stream"
    family = "peer"
    streams = True

    async def _run(self, started: float) -> float | None:
        thread_id = str(uuid.uuid4())
        url = f"{self.base}/threads/{thread_id}/runs/stream"
        body = run_body(stream_mode=["messages-tuple", "updates"])
        ttft: float | None = None
        text: list[str] = []
        event = ""
        async with self.client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:200].decode(errors="replace")
                raise Malformed(BAD_STATUS.format(status=response.status_code, body=detail))
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    if event == "error":
                        raise Malformed(STREAM_ERROR.format(detail=line[5:200]))
                    if event == "messages":
                        message = orjson.loads(line[5:])[0]
                        content = message.get("content")
                        if message.get("type") == "AIMessageChunk" and isinstance(content, str):
                            if content and ttft is None:
                                ttft = time.perf_counter() - started
                            text.append(content)
        self._check("".join(text))
        return ttft


class OnWire(Target):
    """A target of a server this benchmark started, reached through `bench.wire`."""

    def __init__(self, answer: str, server: Server) -> None:
        Target.__init__(self, answer)  # not HttpTarget's: there is no httpx client
        self.server = server
        self.base = server.url


class WireAgui(OnWire, OursAgui):
    """`ours/agui` through the lean client (`bench.wire`), a new connection per run."""

    async def _run(self, started: float) -> float | None:
        url = f"{self.base}/api/agents/{GRAPH_ID}"
        body = orjson.dumps(agui_input(self.run_thread()))
        async with wire.post(url, body, accept="text/event-stream") as response:
            if response.status != 200:
                detail = (await response.read())[:200].decode(errors="replace")
                raise Malformed(BAD_STATUS.format(status=response.status, body=detail))
            run = await read_agui_stream(response.lines(), started)
        check_agui_run(run, self.answer)
        return run.ttft_s


class WireChat(OnWire, OursChat):
    """`ours/chat` through the lean client, a new connection per run."""

    async def _run(self, started: float) -> float | None:
        body = orjson.dumps({"graph": GRAPH_ID, "message": PROMPT})
        async with wire.post(f"{self.base}/api/chat", body) as response:
            content = await response.read()
        if response.status != 200:
            raise Malformed(BAD_STATUS.format(status=response.status, body=content[:200]))
        reply = orjson.loads(content)
        if reply.get("status") != "done":
            raise Malformed(BAD_STATUS.format(status=200, body=content[:200]))
        self._check(str(reply["messages"][-1].get("content")))
        return None


def on_workers(target: HttpTarget, workers: int) -> HttpTarget:
    """`target`, named for a fresh `serve --workers N` (ours-wN/agui, ours-wN/chat)."""
    target.name = target.name.replace("ours/", f"ours-w{workers}/", 1)
    return target
