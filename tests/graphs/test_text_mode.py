"""Text-mode ReAct (AGENT_TOOL_CALLING=text): the parser, and both agents over the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGenerationChunk, LLMResult
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from graphs import tushare, weather
from graphs.model import make_model
from graphs.provider_quirks import REASONING_KEY
from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from graphs.text_mode import (
    FORMAT_ERROR_KEY,
    NO_ACTION,
    STOP,
    ReActParser,
    needs_retry,
    text_mode_model,
    to_text_turns,
)
from graphs.tools_node import outcome_of
from tests.doubles.llm import ScriptedLLM, honoring_stop, react, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.graphs.support import config, say
from tools.ask import ASK_TOOLS
from tools.mcp.toolset import forget_tushare_toolset
from tools.risk import with_risk
from tools.weather import weather_tool

INVENTED = "晴 40°C"
TOKEN = "tushare-token-text-mode"


@pytest.fixture(autouse=True)
def _text_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOL_CALLING", "text")


def parse(*pieces: str) -> tuple[str, str, ReActParser]:
    """Feed `pieces` as stream chunks; the streamed reasoning and content, and the parser."""
    parser = ReActParser()
    reasoning, content = [], []
    for piece in pieces:
        chunk = parser.chunk(ChatGenerationChunk(message=AIMessageChunk(content=piece))).message
        reasoning.append(str(chunk.additional_kwargs.get(REASONING_KEY, "")))
        content.append(str(chunk.content))
    tail = parser.last_chunk().message
    reasoning.append(str(tail.additional_kwargs.get(REASONING_KEY, "")))
    content.append(str(tail.content))
    return "".join(reasoning), "".join(content), parser


def outcome(*pieces: str) -> AIMessageChunk:
    parser = ReActParser()
    merged = AIMessageChunk(content="")
    for piece in pieces:
        merged += parser.chunk(ChatGenerationChunk(message=AIMessageChunk(content=piece))).message
    merged += parser.last_chunk().message
    assert isinstance(merged, AIMessageChunk)
    return merged


ACTION_REPLY = (
    "Thought: 需要查询北京的天气。\n"
    "Action: get_weather\n"
    'Action Input: {"location": "北京"}\n'
    f"Observation: {INVENTED}\n"
    "Thought: 我知道了\n"
    f"Final Answer: 北京{INVENTED}"
)
ANSWER_REPLY = "Thought: 已经拿到结果。\nFinal Answer: 北京今天多云。\n\n建议带伞。"


# --- the parser ----------------------------------------------------------------------


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_a_reply_parses_the_same_however_the_stream_splits_it(size: int) -> None:
    pieces = [ACTION_REPLY[i : i + size] for i in range(0, len(ACTION_REPLY), size)]
    reasoning, content, _ = parse(*pieces)
    merged = outcome(*pieces)

    assert reasoning == "需要查询北京的天气。"
    assert content == ""
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("get_weather", {"location": "北京"})
    ]


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_the_final_answer_streams_as_content_without_its_label(size: int) -> None:
    pieces = [ANSWER_REPLY[i : i + size] for i in range(0, len(ANSWER_REPLY), size)]
    reasoning, content, _ = parse(*pieces)
    assert reasoning == "已经拿到结果。"
    assert content == "北京今天多云。\n\n建议带伞。"
    assert not outcome(*pieces).tool_calls


def test_an_invented_observation_and_everything_after_it_are_dropped() -> None:
    reasoning, content, parser = parse(ACTION_REPLY)
    parsed = parser.finish()
    assert INVENTED not in reasoning + content
    assert INVENTED not in parsed.raw and "Observation" not in parsed.raw
    assert parsed.call is not None and parsed.call["args"] == {"location": "北京"}


def test_an_observation_after_a_final_answer_is_cut_from_the_answer() -> None:
    _, content, _ = parse("Final Answer: 北京多云。\nObserv", f"ation: {INVENTED}")
    assert content == "北京多云。"


def test_text_before_any_label_is_reasoning() -> None:
    reasoning, content, _ = parse("好的，我来查。\nThought: 先查北京。\nFinal Answer: 好。")
    assert reasoning == "好的，我来查。\n先查北京。"
    assert content == "好。"


@pytest.mark.parametrize(
    "reply",
    [
        '**Thought:** 查天气\n**Action:** `get_weather`\n**Action Input:** {"location": "北京"}',
        'Thought：查天气\nAction：get_weather\nAction Input：{"location": "北京"}',
        'thought: 查天气\naction: [get_weather]\naction input:\n```json\n{"location": "北京"}\n```',
    ],
    ids=["bold", "full-width-colon", "lower-case-and-fenced"],
)
def test_labels_are_read_in_the_forms_models_write_them(reply: str) -> None:
    merged = outcome(reply)
    assert merged.additional_kwargs[REASONING_KEY] == "查天气"
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("get_weather", {"location": "北京"})
    ]


def test_a_label_after_a_complete_action_ends_the_reply() -> None:
    reply = 'Action: get_weather\nAction Input: {"location": "北京"}\nFinal Answer: 晴'
    _, content, parser = parse(reply)
    assert content == ""
    assert parser.finish().raw == 'Action: get_weather\nAction Input: {"location": "北京"}\n'


def test_an_empty_action_input_means_no_arguments() -> None:
    merged = outcome("Thought: 问股票\nAction: resolve_stock\nAction Input: {}")
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [("resolve_stock", {})]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Thought: 我想想。", "既没有 Action 也没有 Final Answer"),
        ("北京今天晴。", "既没有 Action 也没有 Final Answer"),
        ("Thought: 查\nAction: get_weather", "缺少 Action Input"),
        ("Thought: 查\nAction:\nAction Input: {}", "没有工具名"),
        ("Action: get_weather\nAction Input: location=北京", "不是一个 JSON 对象"),
        ('Action: get_weather\nAction Input: ["北京"]', "不是一个 JSON 对象"),
        ('Action: get_weather\nAction Input: {"location": "北', "不是一个 JSON 对象"),
        ("Thought: 好\nFinal Answer:", "Final Answer 后没有内容"),
    ],
)
def test_a_reply_that_does_not_parse_carries_an_observation_explaining_the_format(
    reply: str, reason: str
) -> None:
    merged = outcome(reply)
    assert not merged.tool_calls and merged.content == ""
    explanation = merged.response_metadata[FORMAT_ERROR_KEY]
    assert reason in explanation and "Action Input" in explanation and "Final Answer" in explanation
    assert needs_retry(AIMessage(content="", response_metadata=merged.response_metadata))


def test_history_goes_back_as_thought_action_and_observation_turns() -> None:
    call = {"name": "get_weather", "args": {"location": "北京"}, "id": "c1", "type": "tool_call"}
    history = [
        HumanMessage("北京天气"),
        AIMessage("", additional_kwargs={REASONING_KEY: "查北京"}, tool_calls=[call]),
        ToolMessage("北京：多云", tool_call_id="c1"),
        AIMessage("北京多云。", additional_kwargs={REASONING_KEY: "有结果了"}),
        HumanMessage("上海呢"),
        AIMessage(
            "",
            response_metadata={FORMAT_ERROR_KEY: "格式错误：…", "raw_reply": "Thought: 想想"},
        ),
    ]
    turns = to_text_turns(history, "INSTRUCTIONS")
    assert [(t.type, t.text) for t in turns] == [
        ("system", "INSTRUCTIONS"),
        ("human", "北京天气"),
        ("ai", 'Thought: 查北京\nAction: get_weather\nAction Input: {"location": "北京"}'),
        ("human", "Observation: 北京：多云"),
        ("ai", "Thought: 有结果了\nFinal Answer: 北京多云。"),
        ("human", "上海呢"),
        ("ai", "Thought: 想想"),
        ("human", "Observation: 格式错误：…"),
    ]
    assert not any(isinstance(t, ToolMessage) or getattr(t, "tool_calls", None) for t in turns)


class SeenCalls(BaseCallbackHandler):
    """What a model's own callback handler sees of its calls: the request and the reply."""

    def __init__(self) -> None:
        self.requests: list[list[BaseMessage]] = []
        self.replies: list[str] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.requests.append(messages[0])

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.replies.append(response.generations[0][0].text)


@pytest.mark.parametrize("streamed", [True, False])
async def test_the_wrapped_model_runs_its_own_callbacks_on_the_text_request_it_sends(
    llm: ScriptedLLM, streamed: bool
) -> None:
    seen = SeenCalls()
    inner = make_model(GraphSettings()).model_copy(update={"callbacks": [seen]})
    model = text_mode_model(inner, [weather_tool(GraphSettings())])
    llm.script(react("查一下。", action="get_weather", args={"location": "北京"}))

    if streamed:
        chunks = [chunk async for chunk in model.astream([HumanMessage("北京天气")])]
        reply = sum(chunks[1:], chunks[0])
    else:
        reply = await model.ainvoke([HumanMessage("北京天气")])

    assert isinstance(reply, AIMessage) and reply.tool_calls[0]["name"] == "get_weather"
    [request] = seen.requests
    assert [m.type for m in request] == ["system", "human"]
    assert "### get_weather" in request[0].text and "Final Answer:" in request[0].text
    assert seen.replies == [
        'Thought: 查一下。\nAction: get_weather\nAction Input: {"location": "北京"}'
    ]


# --- the weather agent over the wire -------------------------------------------------


@pytest.fixture
def graph(saver: AsyncSqliteSaver) -> CompiledStateGraph:
    return weather.make_graph(saver)


async def stream(graph: CompiledStateGraph, run_input: Any) -> list[AIMessageChunk]:
    chunks = []
    async for message, meta in graph.astream(run_input, config(), stream_mode="messages"):
        if isinstance(message, AIMessageChunk) and meta["langgraph_node"] == "agent":
            chunks.append(message)
    return chunks


def tool_messages(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


async def test_a_text_mode_weather_run_calls_the_forecast_and_streams_the_answer_as_text(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        react(
            "需要查询北京的天气。",
            action="get_weather",
            args={"location": "北京"},
            invented=INVENTED,
        ),
        react("已经拿到北京的天气。", answer="北京今天多云，气温适宜。"),
    )
    chunks = await stream(graph, {"messages": [HumanMessage("北京今天天气怎么样")]})

    first, second = llm.requests
    assert "tools" not in first and "tools" not in second
    assert first["stop"] == STOP == ["Observation:"] and second["stop"] == STOP
    system = first["messages"][0]["content"]
    assert "### get_weather" in system and '"location"' in system and "Final Answer:" in system
    assert len(meteo.forecast_requests) == 1
    content = "".join(str(c.content) for c in chunks)
    reasoning = "".join(str(c.additional_kwargs.get(REASONING_KEY, "")) for c in chunks)
    assert content == "北京今天多云，气温适宜。"
    assert len([c for c in chunks if c.content]) > 1, "the answer arrives in several pieces"
    assert reasoning == "需要查询北京的天气。已经拿到北京的天气。"
    assert [c.tool_call_chunks[0]["name"] for c in chunks if c.tool_call_chunks] == ["get_weather"]
    # The invented observation reached nothing: no chunk, no state, no later request.
    state = (await graph.aget_state(config())).values
    assert INVENTED not in repr(chunks) and INVENTED not in repr(state["messages"])
    assert INVENTED not in json.dumps(second, ensure_ascii=False)
    assert second["messages"][-1] == {
        "role": "user",
        "content": "Observation: " + tool_messages(state["messages"])[0].text,
    }
    called, answered = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert called.tool_calls[0]["args"] == {"location": "北京"} and called.content == ""
    assert called.additional_kwargs[REASONING_KEY] == "需要查询北京的天气。"
    assert answered.content == "北京今天多云，气温适宜。"


async def test_an_endpoint_that_honors_stop_gives_the_same_run(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        honoring_stop(
            react("查。", action="get_weather", args={"location": "上海"}, invented=INVENTED)
        ),
        react(answer="上海多云。"),
    )
    result = await say(graph, "上海天气")
    assert result["messages"][-1].content == "上海多云。"
    assert "上海" in tool_messages(result["messages"])[0].text
    assert len(meteo.forecast_requests) == 1


async def test_a_reply_that_does_not_parse_goes_back_as_an_observation_and_counts_as_a_step(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    llm.script(text("北京今天晴。"), react("按格式回答。", answer="北京今天晴。"))
    result = await say(graph, "北京天气")

    retry = llm.requests[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "北京今天晴。"}
    assert retry[-1]["role"] == "user" and retry[-1]["content"].startswith("Observation: 格式错误")
    assert NO_ACTION in retry[-1]["content"]
    failed, answered = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert needs_retry(failed) and failed.content == ""
    assert answered.content == "北京今天晴。"


async def test_replies_that_never_parse_stop_at_the_step_limit(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MAX_STEPS", "3")
    llm.script(*(text("我不按格式说话。") for _ in range(3)))
    result = await say(weather.make_graph(saver), "北京天气")
    assert len(llm.requests) == 3
    assert "最多 3 步" in result["messages"][-1].text


async def test_text_mode_asks_for_the_city_pauses_and_resumes_with_the_answer(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(react("用户没说城市。", action="ask_input", args={"message": "哪个城市？"}))
    await say(graph, "查天气")
    state = await graph.aget_state(config())
    [question] = [i for task in state.tasks for i in task.interrupts]
    assert question.value == {"type": "input", "message": "哪个城市？", "placeholder": ""}

    llm.script(
        react("用户要上海。", action="get_weather", args={"location": "上海"}),
        react(answer="上海多云。"),
    )
    result = await graph.ainvoke(Command(resume={question.id: {"value": "上海"}}), config())
    answered, fetched = tool_messages(result["messages"])
    assert answered.text == "用户回答：上海" and "上海" in fetched.text
    assert result["messages"][-1].content == "上海多云。"
    assert len(meteo.forecast_requests) == 1
    assert llm.requests[1]["messages"][-1]["content"] == "Observation: 用户回答：上海"


async def test_a_sensitive_tool_still_asks_for_confirmation_in_text_mode(
    saver: AsyncSqliteSaver, llm: ScriptedLLM
) -> None:
    deleted: list[str] = []

    @tool
    def delete_record(record_id: str) -> str:
        """Delete a record."""
        deleted.append(record_id)
        return f"已删除 {record_id}"

    settings = GraphSettings()
    graph = build_react_graph(
        prompts=("ask",),
        tools=[weather_tool(settings), *ASK_TOOLS, with_risk(delete_record, "sensitive")],
        settings=settings,
    ).compile(checkpointer=saver)
    llm.script(react("删掉它。", action="delete_record", args={"record_id": "42"}))
    await say(graph, "删掉 42")
    state = await graph.aget_state(config())
    [gate] = [i for task in state.tasks for i in task.interrupts]
    assert gate.value["type"] == "confirm" and gate.value["args"] == {"record_id": "42"}

    llm.script(react(answer="已拒绝。"))
    result = await graph.ainvoke(Command(resume={gate.id: {"value": False}}), config())
    assert deleted == []
    assert outcome_of(tool_messages(result["messages"])[0]) == "declined"


# --- the tushare agent over the wire -------------------------------------------------


@pytest.fixture
def mcp(monkeypatch: pytest.MonkeyPatch) -> Iterator[TushareMCP]:
    forget_tushare_toolset()
    with TushareMCP(token=TOKEN) as double:
        monkeypatch.setenv("TUSHARE_MCP_URL", double.url)
        monkeypatch.setenv("TUSHARE_TOKEN", TOKEN)
        yield double
    forget_tushare_toolset()


async def test_text_mode_tushare_asks_to_choose_the_stock_then_finishes(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, mcp: TushareMCP
) -> None:
    graph = tushare.make_graph(saver)
    llm.script(react("先确定股票。", action="resolve_stock", args={"name": "平安"}))
    await say(graph, "分析一下平安")
    state = await graph.aget_state(config())
    [question] = [i for task in state.tasks for i in task.interrupts]
    assert question.value["type"] == "select"
    assert [o["value"] for o in question.value["options"]] == ["000001.SZ", "601318.SH"]
    system = llm.requests[0]["messages"][0]["content"]
    assert (
        "### resolve_stock" in system and "### daily" in system and "tools" not in llm.requests[0]
    )

    llm.script(react("选的是平安银行。", answer="平安银行（000001.SZ）。"))
    result = await graph.ainvoke(Command(resume={question.id: {"value": "000001.SZ"}}), config())
    [resolved] = tool_messages(result["messages"])
    assert json.loads(resolved.text) == {"ts_code": "000001.SZ", "name": "平安银行"}
    assert result["messages"][-1].content == "平安银行（000001.SZ）。"
    assert llm.requests[1]["messages"][-1]["content"] == f"Observation: {resolved.text}"
