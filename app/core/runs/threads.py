"""Threads as clients see them: AG-UI messages and pending interrupts, read from checkpoints
(and, for a long thread, its transcript: `app.core.runs.transcript`).

A thread belongs to one graph: every run passes `run_config()`, whose metadata
(`graph_id`) LangGraph copies into each checkpoint it writes, so the thread's
latest checkpoint says which graph it belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    FunctionCall,
    Interrupt,
    Message,
    ReasoningMessage,
    ToolCall,
    UserMessage,
)
from ag_ui.core import ToolMessage as AguiToolMessage
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import TASKS
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from app.core.errors import NotFound
from app.core.runs.transcript import ThreadTranscript
from graphs.provider_quirks import reasoning_of
from graphs.text_mode import FORMAT_ERROR_KEY
from graphs.tools_node import outcome_of
from tools.interrupts import response_schema

GRAPH_KEY = "graph_id"
# The run that wrote a checkpoint (in its metadata): recovery resumes only its own.
RUN_KEY = "agent_run_id"
# Marks, in response_metadata and in the AG-UI message's metadata, a reply cut short by a stop.
STOPPED_KEY = "stopped"
# The messages one `GET /api/threads/{id}` returns unless `limit` says otherwise, and at most.
PAGE_MESSAGES = 100
MAX_PAGE_MESSAGES = 1000
# What `ReasoningMessage` ids add to the id of the reply they belong to.
REASONING_SUFFIX = ":reasoning"
UNKNOWN_MESSAGE = "thread {thread_id!r} has no message {message_id!r} (`before` names a message id)"


class ThreadView(BaseModel):
    """`GET /api/threads/{id}`: the thread's history and what it waits for."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    thread_id: str
    graph_id: str | None
    messages: list[Message]
    interrupts: list[Interrupt]


class OlderMessages(BaseModel):
    """Where a page of a thread's history ends: the messages before it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    before: str = Field(description="pass as `before` for the page before this one")
    count: int = Field(ge=1, description="how many messages come before this page")


class ThreadPage(ThreadView):
    """A window of the thread's history (its latest messages before a cursor), with
    every pending interrupt."""

    older: OlderMessages | None = Field(
        description="the messages before this page; null when the page starts the thread"
    )


def page_of(
    view: ThreadView, *, limit: int = PAGE_MESSAGES, before: str | None = None
) -> ThreadPage:
    """The latest `limit` messages of `view` before message `before` (none: the newest).

    A page never starts inside a step: it starts earlier rather than leave a tool result
    without its call or a reply without its reasoning, so it may hold a few messages more
    than `limit`. NotFound when `before` is no message of the thread.
    """
    messages = view.messages
    end = len(messages)
    if before is not None:
        end = next((i for i, message in enumerate(messages) if message.id == before), -1)
        if end < 0:
            unknown = UNKNOWN_MESSAGE.format(thread_id=view.thread_id, message_id=before[:200])
            raise NotFound("unknown_message", unknown)
    start = _step_start(messages, max(0, end - limit))
    older = OlderMessages(before=messages[start].id, count=start) if start > 0 else None
    return ThreadPage(
        thread_id=view.thread_id,
        graph_id=view.graph_id,
        messages=messages[start:end],
        interrupts=view.interrupts,
        older=older,
    )


def _step_start(messages: Sequence[Message], start: int) -> int:
    """`start`, moved back to the reply whose tool results or reasoning it would cut."""
    while start > 0:
        message = messages[start]
        cuts_results = isinstance(message, AguiToolMessage)
        cuts_reasoning = messages[start - 1].id == f"{message.id}{REASONING_SUFFIX}"
        if not (cuts_results or cuts_reasoning):
            return start
        start -= 1
    return start


def run_config(thread_id: str, graph_id: str) -> RunnableConfig:
    """The config of every run and read on `thread_id` of graph `graph_id`."""
    return {"configurable": {"thread_id": thread_id}, "metadata": {GRAPH_KEY: graph_id}}


def graph_of(snapshot: StateSnapshot) -> str | None:
    """The graph a thread belongs to, from its latest checkpoint (None: a new thread)."""
    owner = (snapshot.metadata or {}).get(GRAPH_KEY)
    return owner if isinstance(owner, str) else None


def _saver(graph: CompiledStateGraph) -> BaseCheckpointSaver:
    saver = graph.checkpointer
    if not isinstance(saver, BaseCheckpointSaver):
        raise TypeError(f"graph {graph.name!r} was compiled without a checkpointer")
    return saver


async def pending_interrupts(
    graph: CompiledStateGraph, config: RunnableConfig, snapshot: StateSnapshot | None = None
) -> list[Interrupt]:
    """The thread's pending interrupts as AG-UI Interrupts, each with its tool call id."""
    if snapshot is None:
        snapshot = await graph.aget_state(config)
    if not snapshot.interrupts:
        return []
    calls = await _interrupted_calls(graph, snapshot)
    result: list[Interrupt] = []
    for task in snapshot.tasks:
        for pending in task.interrupts:
            result.append(to_agui_interrupt(pending.id, pending.value, calls.get(task.id)))
    return result


def to_agui_interrupt(interrupt_id: str, payload: Any, tool_call_id: str | None) -> Interrupt:
    """One LangGraph interrupt (its `tools.interrupts` payload) as an AG-UI Interrupt."""
    if not isinstance(payload, dict):
        payload = {"type": "input", "message": str(payload)}
    return Interrupt(
        id=interrupt_id,
        reason=str(payload.get("type", "input")),
        message=payload.get("message"),
        tool_call_id=tool_call_id,
        response_schema=response_schema(payload),
        metadata={"payload": payload},
    )


async def _interrupted_calls(graph: CompiledStateGraph, snapshot: StateSnapshot) -> dict[str, str]:
    """Task id -> tool call id for the interrupted tool tasks (one `Send` per call)."""
    interrupted = [task for task in snapshot.tasks if task.interrupts]
    if not interrupted:
        return {}
    saved = await _saver(graph).aget_tuple(snapshot.config)
    sends: Sequence[Any] = (
        saved.checkpoint["channel_values"].get(TASKS, []) if saved is not None else []
    )
    calls: dict[str, str] = {}
    for task in interrupted:
        # A Send task's path is (PUSH, index into the pending sends, ...).
        index = task.path[1] if len(task.path) > 1 else None
        if not isinstance(index, int) or not 0 <= index < len(sends):
            continue
        arg = getattr(sends[index], "arg", None)
        call = arg.get("call") if isinstance(arg, dict) else None
        if isinstance(call, dict) and call.get("id"):
            calls[task.id] = str(call["id"])
    return calls


def text_of(content: str | list[Any]) -> str:
    """The plain text of a message's content (string, or text blocks of a list)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and "name" not in block:
            # A block with a name is a misplaced tool call, not text (see graphs.model).
            parts.append(str(block.get("text") or ""))
    return "".join(parts)


def tool_result_metadata(message: ToolMessage) -> dict[str, Any]:
    """How a tool call ended, as data: `{"outcome": "ok" | "error" | "declined" | ...}`,
    plus `"data"`: the structured result a tool left for clients (its artifact, when that
    is an object with a string `kind`: `bars`, `forecast`); the model never reads it."""
    artifact = message.artifact
    if isinstance(artifact, dict) and isinstance(artifact.get("kind"), str):
        return {"outcome": outcome_of(message), "data": artifact}
    return {"outcome": outcome_of(message)}


def to_agui_messages(messages: Sequence[AnyMessage]) -> list[Message]:
    """LangChain messages as AG-UI messages: the one converter from graph state.

    A tool message carries its outcome in `metadata`, and a failed one its text in
    `error` too, so clients read failure from data, not from the text. A reply's
    reasoning comes first as a ReasoningMessage (`<reply id>:reasoning`, the id its
    events used); a text-mode reply that did not parse shows only its reasoning.
    """
    result: list[Message] = []
    for message in messages:
        message_id = message.id or ""
        if isinstance(message, HumanMessage):
            result.append(UserMessage(id=message_id, content=text_of(message.content)))
        elif isinstance(message, AIMessage):
            thought = reasoning_of(message.additional_kwargs or {})
            if thought:
                result.append(
                    ReasoningMessage(id=f"{message_id}{REASONING_SUFFIX}", content=thought)
                )
            if (message.response_metadata or {}).get(FORMAT_ERROR_KEY):
                continue  # the model's broken format is for the model, not the user
            calls = [
                ToolCall(
                    id=call["id"] or "",
                    function=FunctionCall(
                        name=call["name"], arguments=json.dumps(call["args"], ensure_ascii=False)
                    ),
                )
                for call in message.tool_calls
            ]
            stopped = bool((message.response_metadata or {}).get(STOPPED_KEY))
            result.append(
                AssistantMessage(
                    id=message_id,
                    content=text_of(message.content) or None,
                    tool_calls=calls or None,
                    # A reply cut short when its run was stopped says so.
                    metadata={STOPPED_KEY: True} if stopped else None,
                )
            )
        elif isinstance(message, ToolMessage):
            content = text_of(message.content)
            result.append(
                AguiToolMessage(
                    id=message_id,
                    content=content,
                    tool_call_id=message.tool_call_id,
                    error=content if message.status == "error" else None,
                    metadata=tool_result_metadata(message),
                )
            )
    return result


async def read_thread(
    graphs: Mapping[str, CompiledStateGraph],
    saver: BaseCheckpointSaver,
    thread_id: str,
    transcript: ThreadTranscript | None = None,
) -> ThreadView | None:
    """The thread's messages (its `transcript`'s, then its state's) and pending
    interrupts; None when it does not exist."""
    probe: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = await saver.aget_tuple(probe)
    if saved is None or not graphs:
        return None
    owner = saved.metadata.get(GRAPH_KEY)
    graph_id = owner if isinstance(owner, str) and owner in graphs else next(iter(graphs))
    graph = graphs[graph_id]
    config = run_config(thread_id, graph_id)
    snapshot = await graph.aget_state(config)
    messages: list[AnyMessage] = snapshot.values.get("messages", [])
    if transcript is not None:
        messages = await transcript.history(thread_id, messages)
    return ThreadView(
        thread_id=thread_id,
        graph_id=owner if isinstance(owner, str) else None,
        messages=to_agui_messages(messages),
        interrupts=await pending_interrupts(graph, config, snapshot),
    )


async def delete_thread(saver: BaseCheckpointSaver, thread_id: str) -> None:
    """Forget every checkpoint of `thread_id`."""
    await saver.adelete_thread(thread_id)


@dataclass(frozen=True, slots=True)
class ThreadState:
    """A thread's state at one checkpoint, for clients that read LangGraph's own shapes
    (`app.http.langgraph`): the snapshot, with the whole history as its messages (the
    transcript's, then the state's)."""

    graph_id: str
    snapshot: StateSnapshot
    messages: list[AnyMessage]


def _at(config: RunnableConfig, checkpoint_id: str | None) -> RunnableConfig:
    if checkpoint_id is None:
        return config
    return {**config, "configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}


async def read_state(
    graphs: Mapping[str, CompiledStateGraph],
    saver: BaseCheckpointSaver,
    thread_id: str,
    transcript: ThreadTranscript | None = None,
    checkpoint_id: str | None = None,
) -> ThreadState | None:
    """The thread's state at `checkpoint_id` (None: its latest); None when the thread, or
    that checkpoint of it, does not exist."""
    probe: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = await saver.aget_tuple(probe)
    if saved is None or not graphs:
        return None
    owner = saved.metadata.get(GRAPH_KEY)
    graph_id = owner if isinstance(owner, str) and owner in graphs else next(iter(graphs))
    config = _at(run_config(thread_id, graph_id), checkpoint_id)
    if checkpoint_id is not None and await saver.aget_tuple(config) is None:
        return None
    snapshot = await graphs[graph_id].aget_state(config)
    messages: list[AnyMessage] = (snapshot.values or {}).get("messages", [])
    if transcript is not None:
        messages = await transcript.history(thread_id, messages)
    return ThreadState(graph_id=graph_id, snapshot=snapshot, messages=messages)


async def state_history(
    graph: CompiledStateGraph,
    thread_id: str,
    graph_id: str,
    *,
    limit: int,
    before: str | None = None,
) -> list[StateSnapshot]:
    """The thread's checkpoints, newest first, at most `limit`, older than `before`."""
    config = run_config(thread_id, graph_id)
    filter_before = _at(config, before) if before is not None else None
    return [
        snapshot
        async for snapshot in graph.aget_state_history(config, limit=limit, before=filter_before)
    ]
