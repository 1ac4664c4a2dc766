"""The transformer on its own (in-process): shapes of model output the HTTP doubles cannot make.

A model that does not stream at all, and a final AIMessage that differs from what was
streamed (the repair of misplaced tool calls rebuilds `tool_calls` after the chunks).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any, TypedDict

from ag_ui.core import BaseEvent
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from app.core.runs.events import INTERNAL_ERROR, stream_run
from app.core.runs.threads import run_config


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class ChunkModel(BaseChatModel):
    """Streams the given chunks, whatever it is asked."""

    chunks: list[AIMessageChunk]

    @property
    def _llm_type(self) -> str:
        return "chunks"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise NotImplementedError

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self.chunks:
            yield ChatGenerationChunk(message=chunk)


def loop(first: Any, answer: str = "好的。") -> Any:
    """agent -> tools -> agent: `first(state, config)` makes the first turn's reply."""

    async def agent(state: State, config: RunnableConfig) -> dict[str, list[AnyMessage]]:
        if any(isinstance(m, ToolMessage) for m in state["messages"]):
            return {"messages": [AIMessage(answer, id="ai-final")]}
        return {"messages": [await first(state, config)]}

    def tools(state: State) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        return {
            "messages": [
                ToolMessage(f"ok {c['args']}", tool_call_id=c["id"] or "", id=f"r-{c['id']}")
                for c in last.tool_calls
            ]
        }

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=InMemorySaver(), name="test")


async def run(graph: Any, text: str = "北京天气") -> list[BaseEvent]:
    return [
        event
        async for event in stream_run(
            graph,
            thread_id="t1",
            run_id="r1",
            input_or_command={"messages": [("user", text)]},
            config=run_config("t1", "test"),
        )
    ]


def dumped(events: list[BaseEvent]) -> Iterator[dict[str, Any]]:
    for event in events:
        yield json.loads(event.model_dump_json(by_alias=True))


async def test_a_model_that_does_not_stream_still_yields_every_event() -> None:
    async def whole(state: State, config: RunnableConfig) -> AIMessage:
        call = {"name": "get_weather", "args": {"location": "北京"}, "id": "c1"}
        return AIMessage("我来查一下。", id="ai-1", tool_calls=[call])

    events = list(dumped(await run(loop(whole))))

    assert [(e["type"], e.get("delta") or e.get("toolCallName") or "") for e in events] == [
        ("RUN_STARTED", ""),
        ("STEP_STARTED", ""),
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_CONTENT", "我来查一下。"),
        ("TEXT_MESSAGE_END", ""),
        ("TOOL_CALL_START", "get_weather"),
        ("TOOL_CALL_ARGS", '{"location": "北京"}'),
        ("TOOL_CALL_END", ""),
        ("STEP_FINISHED", ""),
        ("STEP_STARTED", ""),
        ("TOOL_CALL_RESULT", ""),
        ("STEP_FINISHED", ""),
        ("STEP_STARTED", ""),
        ("TEXT_MESSAGE_START", ""),
        ("TEXT_MESSAGE_CONTENT", "好的。"),
        ("TEXT_MESSAGE_END", ""),
        ("STEP_FINISHED", ""),
        ("RUN_FINISHED", ""),
    ]
    assert events[5]["parentMessageId"] == "ai-1" == events[2]["messageId"]
    assert events[10]["toolCallId"] == "c1"


async def test_calls_and_arguments_the_chunks_missed_come_from_the_final_message() -> None:
    # The stream cuts one call's arguments short and misplaces another call into text;
    # the node's final message (as after repair) holds the truth.
    streamed = [
        AIMessageChunk(
            content="",
            id="ai-1",
            tool_call_chunks=[
                {
                    "name": "get_weather",
                    "args": '{"loc',
                    "id": "c1",
                    "index": 0,
                    "type": "tool_call_chunk",
                }
            ],
        ),
        AIMessageChunk(
            content="",
            id="ai-1",
            tool_call_chunks=[
                {"name": None, "args": "ation", "id": None, "index": 0, "type": "tool_call_chunk"}
            ],
        ),
    ]
    model = ChunkModel(chunks=streamed)

    async def repaired(state: State, config: RunnableConfig) -> AIMessage:
        await model.ainvoke(state["messages"], config)
        calls = [
            {"name": "get_weather", "args": {"location": "北京"}, "id": "c1"},
            {"name": "get_weather", "args": {"location": "上海"}, "id": "c2"},
        ]
        return AIMessage("", id="ai-1", tool_calls=calls)

    events = list(dumped(await run(loop(repaired))))

    args: dict[str, str] = {}
    for event in events:
        if event["type"] == "TOOL_CALL_START":
            args[event["toolCallId"]] = ""
        elif event["type"] == "TOOL_CALL_ARGS":
            args[event["toolCallId"]] += event["delta"]
    assert {k: json.loads(v) for k, v in args.items()} == {
        "c1": {"location": "北京"},
        "c2": {"location": "上海"},
    }
    ends = [i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_END"]
    results = [i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_RESULT"]
    assert len(ends) == 2 and max(ends) < min(results)
    assert events[-1]["outcome"] == {"type": "success"}


async def test_an_unexpected_failure_becomes_a_run_error_without_its_details() -> None:
    async def broken(state: State, config: RunnableConfig) -> AIMessage:
        raise RuntimeError("boom: sk-do-not-show")

    events = list(dumped(await run(loop(broken))))

    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1] == {"type": "RUN_ERROR", "message": INTERNAL_ERROR, "code": "internal_error"}
    assert "sk-do-not-show" not in json.dumps(events)
    opened = [e for e in events if e["type"] == "STEP_STARTED"]
    closed = [e for e in events if e["type"] == "STEP_FINISHED"]
    assert len(opened) == len(closed)
