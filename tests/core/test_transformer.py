"""`stream_run` in-process on the real ReAct loop, for each way a model chunks its output.

The model is a `ScriptedChatModel`, so every test fixes exactly how text and tool-call
chunks arrive; the AG-UI events must come in the contract's order whatever the shape.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from ag_ui.core import (
    BaseEvent,
    EventType,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedSuccessOutcome
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from app.core.runs.events import stream_run
from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from tests.doubles.chat_model import (
    Call,
    Reply,
    ScriptedChatModel,
    interleaved_calls,
    misplaced_call,
    split_call,
    split_text,
    text_reply,
    whole_call,
)

LOOKUP_RESULT = "晴，25°C"
ANSWER = "北京今天晴，气温 25°C，适合出门。"

# Events about steps are checked elsewhere; these tests read the message and call events.
STEPS = {EventType.STEP_STARTED, EventType.STEP_FINISHED}


@tool
def lookup(city: str) -> str:
    """Look up the weather of a city."""
    return LOOKUP_RESULT


@tool
def broken(city: str) -> str:
    """A tool that always fails."""
    raise RuntimeError("upstream unavailable")


def make_graph(
    monkeypatch: pytest.MonkeyPatch, replies: list[Reply], tools: list[Any] | None = None
) -> tuple[CompiledStateGraph, ScriptedChatModel]:
    model = ScriptedChatModel(replies=replies)
    monkeypatch.setattr("graphs.react.shared_model", lambda settings: model)
    builder = build_react_graph(prompts=("ask",), tools=tools or [lookup], settings=GraphSettings())
    return builder.compile(checkpointer=InMemorySaver()), model


async def run(graph: CompiledStateGraph, *, stream_tokens: bool = True) -> list[BaseEvent]:
    thread_id = str(uuid.uuid4())
    return [
        event
        async for event in stream_run(
            graph,
            thread_id=thread_id,
            run_id="run-1",
            input_or_command={"messages": [HumanMessage("hi")]},
            config={"configurable": {"thread_id": thread_id}},
            stream_tokens=stream_tokens,
        )
    ]


def kinds(events: list[BaseEvent]) -> list[EventType]:
    """The event types in order, without the step events."""
    return [event.type for event in events if event.type not in STEPS]


@dataclass
class Transcript:
    """What a well-formed event stream says: texts, calls' argument text, results."""

    texts: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    deltas: dict[str, list[str]] = field(default_factory=dict)
    results: dict[str, ToolCallResultEvent] = field(default_factory=dict)

    def arguments(self, call_id: str) -> Any:
        return json.loads(self.args[call_id])


def well_formed(events: list[BaseEvent]) -> Transcript:
    """Check the contract's ordering rules and read the stream into a Transcript.

    RUN_STARTED first, a successful RUN_FINISHED last; text content only inside its
    message's START/END; per call exactly one START and one END with its ARGS between;
    a call's result only after its END.
    """
    assert events[0].type == EventType.RUN_STARTED
    last = events[-1]
    assert isinstance(last, RunFinishedEvent)
    assert isinstance(last.outcome, RunFinishedSuccessOutcome)
    assert not any(e.type in {EventType.RUN_STARTED, EventType.RUN_FINISHED} for e in events[1:-1])
    starts = Counter(e.tool_call_id for e in events if isinstance(e, ToolCallStartEvent))
    ends = Counter(e.tool_call_id for e in events if isinstance(e, ToolCallEndEvent))
    assert set(starts) == set(ends)
    assert all(count == 1 for count in (*starts.values(), *ends.values())), (starts, ends)

    transcript = Transcript()
    open_text: str | None = None
    open_calls: set[str] = set()
    ended: set[str] = set()
    for event in events:
        if isinstance(event, TextMessageStartEvent):
            assert open_text is None, "text messages do not nest"
            open_text = event.message_id
            transcript.texts.append("")
        elif isinstance(event, TextMessageContentEvent):
            assert event.message_id == open_text
            transcript.texts[-1] += event.delta
        elif isinstance(event, TextMessageEndEvent):
            assert event.message_id == open_text
            open_text = None
        elif isinstance(event, ToolCallStartEvent):
            assert open_text is None, "a call starts after the text before it ended"
            open_calls.add(event.tool_call_id)
            transcript.names[event.tool_call_id] = event.tool_call_name
            transcript.args[event.tool_call_id] = ""
            transcript.deltas[event.tool_call_id] = []
        elif isinstance(event, ToolCallArgsEvent):
            assert event.tool_call_id in open_calls, "ARGS between the call's START and END"
            transcript.args[event.tool_call_id] += event.delta
            transcript.deltas[event.tool_call_id].append(event.delta)
        elif isinstance(event, ToolCallEndEvent):
            open_calls.remove(event.tool_call_id)
            ended.add(event.tool_call_id)
        elif isinstance(event, ToolCallResultEvent):
            assert event.tool_call_id in ended, "a result comes after its call ended"
            assert event.tool_call_id not in transcript.results, "one result per call"
            transcript.results[event.tool_call_id] = event
    assert open_text is None and not open_calls
    return transcript


T = EventType
# The events of the closing `text_reply(ANSWER)` turn (three chunks), then the run's end.
ANSWER_TURN = [
    T.TEXT_MESSAGE_START,
    *[T.TEXT_MESSAGE_CONTENT] * 3,
    T.TEXT_MESSAGE_END,
    T.RUN_FINISHED,
]


async def test_a_text_reply_streams_as_one_message_whose_deltas_concatenate_to_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    graph, _ = make_graph(monkeypatch, [text_reply(ANSWER, chunks=5)])
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        *[T.TEXT_MESSAGE_CONTENT] * 5,
        T.TEXT_MESSAGE_END,
        T.RUN_FINISHED,
    ]
    transcript = well_formed(events)
    assert transcript.texts == [ANSWER]
    deltas = [e.delta for e in events if isinstance(e, TextMessageContentEvent)]
    assert deltas == split_text(ANSWER, 5)


async def test_arguments_split_over_many_chunks_concatenate_to_the_exact_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": '北京 (Beijing) "东城"'}
    graph, model = make_graph(
        monkeypatch,
        [split_call("lookup", args, call_id="call_a", pieces=6), text_reply(ANSWER)],
    )
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        *[T.TOOL_CALL_ARGS] * 6,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        *ANSWER_TURN,
    ]
    transcript = well_formed(events)
    assert transcript.names == {"call_a": "lookup"}
    assert transcript.arguments("call_a") == args
    # Streamed as they came: one delta per argument chunk, nothing added at the end.
    assert transcript.deltas["call_a"] == split_text(json.dumps(args, ensure_ascii=False), 6)
    result = transcript.results["call_a"]
    assert result.content == LOOKUP_RESULT and result.metadata == {"outcome": "ok"}
    assert transcript.texts == [ANSWER]
    # The second model call saw the tool's answer.
    [tool_message] = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert tool_message.tool_call_id == "call_a" and tool_message.content == LOOKUP_RESULT


async def test_a_call_arriving_whole_in_one_chunk_gets_its_arguments_in_one_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": "上海"}
    graph, _ = make_graph(
        monkeypatch, [whole_call("lookup", args, call_id="call_w"), text_reply(ANSWER)]
    )
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        *ANSWER_TURN,
    ]
    transcript = well_formed(events)
    assert transcript.deltas["call_w"] == [json.dumps(args, ensure_ascii=False)]
    assert transcript.arguments("call_w") == args
    assert transcript.results["call_w"].metadata == {"outcome": "ok"}


async def test_interleaved_parallel_calls_keep_each_calls_arguments_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = Call("lookup", {"city": "北京"}, "call_1")
    second = Call("lookup", {"city": "广州市天河区"}, "call_2")
    graph, _ = make_graph(
        monkeypatch, [interleaved_calls(first, second, pieces=3), text_reply(ANSWER)]
    )
    events = await run(graph)
    calls = [e for e in events if e.type in {T.TOOL_CALL_START, T.TOOL_CALL_ARGS, T.TOOL_CALL_END}]
    # The chunks' interleaving is kept: both start, their pieces alternate, both end.
    assert [(e.type, getattr(e, "tool_call_id", None)) for e in calls] == [
        (T.TOOL_CALL_START, "call_1"),
        (T.TOOL_CALL_START, "call_2"),
        *[(T.TOOL_CALL_ARGS, call_id) for _ in range(3) for call_id in ("call_1", "call_2")],
        (T.TOOL_CALL_END, "call_1"),
        (T.TOOL_CALL_END, "call_2"),
    ]
    assert kinds(events) == [
        T.RUN_STARTED,
        *[e.type for e in calls],
        T.TOOL_CALL_RESULT,
        T.TOOL_CALL_RESULT,
        *ANSWER_TURN,
    ]
    transcript = well_formed(events)
    assert transcript.arguments("call_1") == first.args
    assert transcript.arguments("call_2") == second.args
    assert set(transcript.results) == {"call_1", "call_2"}
    assert all(r.metadata == {"outcome": "ok"} for r in transcript.results.values())


async def test_text_before_a_call_ends_before_the_call_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": "北京"}
    reply = [*text_reply("我查一下。", 2), *split_call("lookup", args, call_id="call_t", pieces=2)]
    graph, _ = make_graph(monkeypatch, [reply, text_reply(ANSWER, 1)])
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.RUN_FINISHED,
    ]
    transcript = well_formed(events)
    assert transcript.texts == ["我查一下。", ANSWER]
    assert transcript.arguments("call_t") == args
    starts = [e for e in events if isinstance(e, TextMessageStartEvent)]
    assert starts[0].message_id != starts[1].message_id


async def test_a_call_misplaced_into_content_is_announced_from_the_repaired_message_and_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": "深圳"}
    graph, model = make_graph(
        monkeypatch,
        [misplaced_call("lookup", args, call_id="call_x"), text_reply(ANSWER)],
    )
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        *ANSWER_TURN,
    ]
    transcript = well_formed(events)
    assert transcript.names == {"call_x": "lookup"}
    assert transcript.arguments("call_x") == args
    assert transcript.results["call_x"].metadata == {"outcome": "ok"}
    assert transcript.texts == [ANSWER]
    assert len(model.calls) == 2


async def test_a_misplaced_call_after_text_keeps_the_text_and_announces_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": "深圳"}
    graph, _ = make_graph(
        monkeypatch,
        [misplaced_call("lookup", args, call_id="call_y", text="我先查天气。"), text_reply(ANSWER)],
    )
    events = await run(graph)
    assert kinds(events)[:7] == [
        T.RUN_STARTED,
        T.TEXT_MESSAGE_START,
        T.TEXT_MESSAGE_CONTENT,
        T.TEXT_MESSAGE_END,
        T.TOOL_CALL_START,
        T.TOOL_CALL_ARGS,
        T.TOOL_CALL_END,
    ]
    transcript = well_formed(events)
    assert transcript.texts == ["我先查天气。", ANSWER]
    assert transcript.arguments("call_y") == args
    assert transcript.results["call_y"].metadata == {"outcome": "ok"}


async def test_a_tool_that_raises_reports_an_error_outcome_and_the_run_still_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = {"city": "北京"}
    graph, _ = make_graph(
        monkeypatch,
        [split_call("broken", args, call_id="call_e"), text_reply("查询失败了。")],
        tools=[broken],
    )
    events = await run(graph)
    assert kinds(events) == [
        T.RUN_STARTED,
        T.TOOL_CALL_START,
        *[T.TOOL_CALL_ARGS] * 4,
        T.TOOL_CALL_END,
        T.TOOL_CALL_RESULT,
        *ANSWER_TURN,
    ]
    transcript = well_formed(events)
    result = transcript.results["call_e"]
    assert result.metadata == {"outcome": "error"}
    assert "upstream unavailable" in result.content


async def test_without_token_streaming_each_text_and_call_arrive_as_one_delta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = Call("lookup", {"city": "北京"}, "call_1")
    second = Call("lookup", {"city": "上海"}, "call_2")
    graph, _ = make_graph(monkeypatch, [interleaved_calls(first, second), text_reply(ANSWER, 4)])
    events = await run(graph, stream_tokens=False)
    transcript = well_formed(events)
    assert {call_id: len(d) for call_id, d in transcript.deltas.items()} == {
        "call_1": 1,
        "call_2": 1,
    }
    assert transcript.arguments("call_1") == first.args
    assert transcript.arguments("call_2") == second.args
    assert transcript.texts == [ANSWER]
    assert kinds(events).count(T.TEXT_MESSAGE_CONTENT) == 1


async def test_parallel_calls_sharing_an_index_but_not_an_id_stay_apart(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = Call("lookup", {"city": "北京"}, "call_1")
    second = Call("lookup", {"city": "上海"}, "call_2")
    reply = [
        *whole_call(first.name, first.args, call_id=first.id, index=0),
        *whole_call(second.name, second.args, call_id=second.id, index=0),
    ]
    graph, _ = make_graph(monkeypatch, [reply, text_reply(ANSWER)])
    events = await run(graph)
    transcript = well_formed(events)
    # The loop itself is right: both calls ran, each with its own arguments.
    assert set(transcript.results) == {"call_1", "call_2"}
    # The events are not: call_1's deltas are '{"city": "北京"}{"city": "上海"}'.
    assert transcript.arguments("call_1") == first.args
    assert transcript.arguments("call_2") == second.args
