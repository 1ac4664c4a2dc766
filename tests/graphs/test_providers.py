"""Models as real endpoints stream them: reasoning, DeepSeek thinking with tools, tool-call shapes.

Each test plays a provider-shaped stream from the LLM double through the weather graph
(native tool calling) and checks what the graph stored and what it sent back.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph

from graphs import weather
from graphs.model import ModelCallFailed, ModelOutputCut, OpenAICompatibleChat, echo_reasoning
from graphs.provider_quirks import REASONING_KEY, ThinkSplitter, ToolCallDeltas
from tests.doubles.llm import (
    CALL_SHAPES,
    ScriptedLLM,
    Turn,
    call,
    cut_off,
    deepseek,
    ollama_calls,
    provider,
    reasoning,
    text,
    think,
    tool_call,
    tool_calls,
)
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.graphs.support import config, say

THOUGHT = "用户问北京和上海，我分别查询。"


@pytest.fixture
def graph(saver: AsyncSqliteSaver) -> CompiledStateGraph:
    return weather.make_graph(saver)


async def stream(graph: CompiledStateGraph, message: str) -> list[AIMessageChunk]:
    chunks = []
    run = {"messages": [HumanMessage(message)]}
    async for chunk, meta in graph.astream(run, config(), stream_mode="messages"):
        if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "agent":
            chunks.append(chunk)
    return chunks


async def stored(graph: CompiledStateGraph) -> list[Any]:
    return list((await graph.aget_state(config())).values["messages"])


def answers(messages: list[Any]) -> list[AIMessage]:
    return [m for m in messages if isinstance(m, AIMessage)]


def results(messages: list[Any]) -> dict[str, str]:
    return {m.tool_call_id: m.text for m in messages if isinstance(m, ToolMessage)}


# --- reasoning -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "turn",
    [
        reasoning("先想一想天气。", text("北京晴。")),
        provider(reasoning("先想一想天气。", text("北京晴。")), reasoning_field="reasoning"),
        think("先想一想天气。", "北京晴。", chunk_size=1),
        think("先想一想天气。", "北京晴。", chunk_size=4),
    ],
    ids=["reasoning_content", "reasoning", "think-1", "think-4"],
)
async def test_reasoning_is_kept_beside_the_answer_and_never_in_it(
    graph: CompiledStateGraph, llm: ScriptedLLM, turn: Turn
) -> None:
    llm.script(turn)
    chunks = await stream(graph, "北京天气")

    assert "".join(str(c.content) for c in chunks) == "北京晴。"
    streamed = "".join(str(c.additional_kwargs.get(REASONING_KEY, "")) for c in chunks)
    assert streamed == "先想一想天气。"
    [answer] = answers(await stored(graph))
    assert answer.content == "北京晴。"
    assert answer.additional_kwargs[REASONING_KEY] == "先想一想天气。"


@pytest.mark.parametrize(
    "turn",
    [
        reasoning("先想一想。", text("北京晴。")),
        provider(reasoning("先想一想。", text("北京晴。")), reasoning_field="reasoning"),
        think("先想一想。", "北京晴。"),
    ],
    ids=["reasoning_content", "reasoning", "think"],
)
async def test_a_whole_reply_keeps_its_reasoning_apart_too(
    graph: CompiledStateGraph, llm: ScriptedLLM, turn: Turn
) -> None:
    llm.script(turn)
    result = await say(graph, "北京天气")  # ainvoke: one JSON completion, no stream
    assert llm.requests[0].get("stream") is not True
    answer = result["messages"][-1]
    assert answer.content == "北京晴。" and answer.additional_kwargs[REASONING_KEY] == "先想一想。"


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["<thi", "nk>想", "</th", "ink>\n\n答"], ("想", "答")),
        (["  <think>", "想</think>", "答"], ("想", "答")),
        (["<b>粗体</b>"], ("", "<b>粗体</b>")),
        (["<thin", "g>"], ("", "<thing>")),
        (["答案里有 <think> 字样"], ("", "答案里有 <think> 字样")),
        (["<think>没写完"], ("没写完", "")),
    ],
    ids=["split-tags", "leading-space", "other-tag", "tag-prefix", "not-at-start", "unclosed"],
)
def test_only_a_think_block_at_the_start_of_the_content_is_reasoning(
    pieces: list[str], expected: tuple[str, str]
) -> None:
    splitter = ThinkSplitter()
    fed = [splitter.feed(piece) for piece in pieces] + [splitter.flush()]
    assert ("".join(r for r, _ in fed), "".join(t for _, t in fed)) == expected


# --- DeepSeek thinking mode with tools -----------------------------------------------


async def test_deepseek_thinking_with_two_tool_calls_completes_and_sends_reasoning_back(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        deepseek("先查北京。", tool_call("get_weather", {"location": "北京"})),
        deepseek("再查上海。", tool_call("get_weather", {"location": "上海"})),
        deepseek("两地都有了。", text("北京小雨，上海多云。")),
    )
    chunks = await stream(graph, "北京和上海天气")

    assert len(meteo.forecast_requests) == 2
    assert "".join(str(c.content) for c in chunks) == "北京小雨，上海多云。"
    first, second, answer = answers(await stored(graph))
    assert [first.additional_kwargs[REASONING_KEY], second.additional_kwargs[REASONING_KEY]] == [
        "先查北京。",
        "再查上海。",
    ]
    assert answer.additional_kwargs[REASONING_KEY] == "两地都有了。"
    last = llm.requests[2]["messages"]
    assert [m.get("reasoning_content") for m in last if m["role"] == "assistant"] == [
        "先查北京。",
        "再查上海。",
    ]

    # The next question: the answer turn's reasoning is not sent again.
    llm.script(deepseek("直接回答。", text("不客气。")))
    await say(graph, "谢谢")
    assistants = [m for m in llm.requests[3]["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_content") for m in assistants] == ["先查北京。", "再查上海。", None]


async def test_the_deepseek_double_refuses_a_history_without_reasoning(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    # Proof the double bites: a tool-calling turn stored without reasoning is refused.
    llm.script(tool_call("get_weather", {"location": "北京"}), deepseek("想", text("好。")))
    with pytest.raises(ModelCallFailed, match=r"HTTP 400.*reasoning_content"):
        await say(graph, "北京天气")


# --- tool-call shapes ----------------------------------------------------------------

PAIR = [call("get_weather", {"location": "北京"}), call("get_weather", {"location": "上海"})]


@pytest.mark.parametrize("shape", CALL_SHAPES)
async def test_parallel_calls_in_every_provider_shape_run_with_their_exact_arguments(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo, shape: str
) -> None:
    calls = tool_calls(PAIR, interleave=shape not in ("same_index",))
    llm.script(provider(calls, call_shape=shape), text("两地天气如上。"))
    await stream(graph, "北京和上海")

    messages = await stored(graph)
    called = answers(messages)[0]
    assert [(c["name"], c["args"]) for c in called.tool_calls] == [
        ("get_weather", {"location": "北京"}),
        ("get_weather", {"location": "上海"}),
    ]
    ids = [c["id"] for c in called.tool_calls]
    assert len(set(ids)) == 2 and all(ids)
    by_id = results(messages)
    assert "北京" in by_id[ids[0]] and "上海" in by_id[ids[1]]
    assert len(meteo.forecast_requests) == 2


async def test_ollama_calls_whole_with_finish_reason_stop_still_run(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(ollama_calls(PAIR), text("好了。"))
    await stream(graph, "北京和上海")
    assert len(meteo.forecast_requests) == 2
    assert answers(await stored(graph))[-1].content == "好了。"


@pytest.mark.parametrize(
    ("how", "error", "words"),
    [
        ("end", ModelOutputCut, "中途中断"),
        ("length", ModelOutputCut, "长度上限"),
        ("drop", ModelCallFailed, "中途断开"),
    ],
)
async def test_a_reply_cut_inside_a_tool_call_is_a_readable_error_not_a_half_call(
    graph: CompiledStateGraph,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    how: str,
    error: type[Exception],
    words: str,
) -> None:
    llm.script(cut_off(tool_call("get_weather", {"location": "北京市海淀区"}), how))
    with pytest.raises(error, match=words) as failure:
        await stream(graph, "海淀天气")
    assert "get_weather" in str(failure.value) or how == "drop"
    assert meteo.forecast_requests == []
    assert not any(isinstance(m, ToolMessage) for m in await stored(graph))

    llm.script(text("我在。"))
    assert (await say(graph, "还在吗"))["messages"][-1].content == "我在。"


async def test_a_whole_reply_with_finish_reason_length_inside_a_call_is_refused(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(cut_off(tool_call("get_weather", {"location": "北京市海淀区"}), "length"))
    with pytest.raises(ModelOutputCut, match="get_weather"):
        await say(graph, "海淀天气")
    assert meteo.forecast_requests == []


def test_the_request_json_of_a_tool_calling_turn_carries_its_reasoning() -> None:
    turn = AIMessage(
        "",
        additional_kwargs={REASONING_KEY: "想"},
        tool_calls=[{"name": "x", "args": {}, "id": "c", "type": "tool_call"}],
    )
    entry: dict[str, Any] = {"role": "assistant"}
    echo_reasoning(turn, entry)
    assert entry == {"role": "assistant", REASONING_KEY: "想"}
    plain: dict[str, Any] = {"role": "assistant"}
    echo_reasoning(AIMessage("答", additional_kwargs={REASONING_KEY: "想"}), plain)
    assert plain == {"role": "assistant"}


def test_deltas_without_index_or_id_still_become_whole_calls() -> None:
    model = OpenAICompatibleChat(api_key="k", model="m", base_url="http://127.0.0.1:9")  # type: ignore[arg-type]
    raw = [
        {"tool_calls": [{"id": "a", "type": "function", "function": {"name": "f"}}]},
        {"tool_calls": [{"function": {"arguments": '{"x": '}}]},
        {"tool_calls": [{"function": {"arguments": "1}"}}]},
        {"tool_calls": [{"function": {"name": "g", "arguments": "{}"}, "index": 7}]},
    ]
    deltas = ToolCallDeltas()
    merged = AIMessageChunk(content="")
    for delta in raw:
        chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        generation = model._convert_chunk_to_generation_chunk(chunk, AIMessageChunk, None)
        assert generation is not None and isinstance(generation.message, AIMessageChunk)
        parts = deltas.normalize(generation.message.tool_call_chunks)
        merged += AIMessageChunk(content="", tool_call_chunks=parts)
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("f", {"x": 1}), ("g", {})]
    assert merged.tool_calls[0]["id"] == "a" and merged.tool_calls[1]["id"]
    assert deltas.incomplete(None) is None
