"""The ReAct loop end to end over the wire: scripted LLM and fake Open-Meteo on 127.0.0.1."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Durability

from graphs import weather
from graphs.model import ModelCallFailed, ModelNotConfigured
from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from graphs.tools_node import outcome_of
from tests.doubles.llm import ScriptedLLM, call, error, text, tool_call, tool_calls
from tests.doubles.open_meteo import HANG_CITY, FakeOpenMeteo
from tests.graphs.support import config, say
from tools.ask import ASK_TOOLS
from tools.risk import with_risk
from tools.weather import weather_tool


@pytest.fixture
def graph(saver: AsyncSqliteSaver) -> CompiledStateGraph:
    return weather.make_graph(saver)


async def pending(graph: CompiledStateGraph, thread: str = "t1") -> list[Any]:
    state = await graph.aget_state(config(thread))
    return [i for task in state.tasks for i in task.interrupts]


def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def forecast_coords(meteo: FakeOpenMeteo) -> list[tuple[float, float]]:
    return [(float(r["latitude"]), float(r["longitude"])) for r in meteo.forecast_requests]


def test_graph_is_the_agent_tools_loop() -> None:
    drawn = weather.graph.get_graph()
    assert set(drawn.nodes) == {"__start__", "agent", "tools", "__end__"}
    edges = {(e.source, e.target, e.conditional) for e in drawn.edges}
    assert edges == {
        ("__start__", "agent", False),
        ("agent", "tools", True),
        ("agent", "agent", True),  # a text-mode reply that did not parse is retried
        ("agent", "__end__", True),
        ("tools", "agent", False),
    }
    assert weather.graph.name == "weather"


async def test_beijing_weather_uses_the_capital_and_streams_the_answer(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴，气温适宜。"))
    chunks: list[str] = []
    async for message, meta in graph.astream(
        {"messages": [HumanMessage("北京今天天气怎么样")]}, config(), stream_mode="messages"
    ):
        if isinstance(message, AIMessageChunk) and meta["langgraph_node"] == "agent":
            chunks.append(message.text)
    assert "".join(chunks) == "北京今天晴，气温适宜。"
    assert len([c for c in chunks if c]) > 1, "the answer arrives in several streamed pieces"
    assert forecast_coords(meteo) == [(39.9075, 116.39723)]
    # The model saw the tool result, and the system prompt came first.
    second = llm.requests[1]["messages"]
    assert second[0]["role"] == "system"
    assert second[-1]["role"] == "tool" and "北京" in second[-1]["content"]


async def test_missing_city_asks_the_user_then_fetches_that_city(
    graph: CompiledStateGraph, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(tool_call("ask_input", {"message": "请问要查询哪个城市？", "placeholder": "北京"}))
    await say(graph, "查天气")
    [question] = await pending(graph)
    assert question.value == {
        "type": "input",
        "message": "请问要查询哪个城市？",
        "placeholder": "北京",
    }

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海多云。"))
    result = await graph.ainvoke(Command(resume={question.id: {"value": "上海"}}), config())
    assert result["messages"][-1].content == "上海多云。"
    assert tool_messages(result)[0].content == "用户回答：上海"
    assert forecast_coords(meteo) == [(31.22222, 121.45806)]
    assert await pending(graph) == []


@pytest.mark.parametrize(
    ("tool", "args", "bare", "result"),
    [
        ("ask_input", {"message": "哪个城市？"}, "北京", "用户回答：北京"),
        (
            "ask_choice",
            {"message": "选哪个？", "options": ["北京", "上海"]},
            "上海",
            "用户选择：上海",
        ),
        (
            "ask_multi_choice",
            {"message": "选几个？", "options": ["北京", "上海"]},
            ["北京", "上海"],
            "用户选择：北京、上海",
        ),
        ("ask_confirm", {"message": "继续吗？"}, True, "用户确认：是"),
    ],
)
async def test_a_bare_resume_value_answers_like_studio_sends_it(
    graph: CompiledStateGraph, llm: ScriptedLLM, tool: str, args: Any, bare: Any, result: str
) -> None:
    llm.script(tool_call(tool, args))
    await say(graph, "问我")
    assert len(await pending(graph)) == 1

    llm.script(text("好的。"))
    # Studio's resume box and the SDK's examples send the value itself, not keyed by id.
    done = await graph.ainvoke(Command(resume=bare), config())

    assert tool_messages(done)[-1].content == result
    assert tool_messages(done)[-1].status == "success"
    assert await pending(graph) == []


async def test_a_wrong_select_answer_is_refused_and_the_question_stays(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("ask_choice", {"message": "选哪个？", "options": ["北京", "上海"]}))
    await say(graph, "帮我选")
    [question] = await pending(graph)

    await graph.ainvoke(Command(resume={question.id: {"value": "广州"}}), config())
    [again] = await pending(graph)
    assert again.value["options"] == question.value["options"]
    assert "广州" in again.value["error"]
    assert len(llm.requests) == 1, "a wrong answer never reaches the model"

    llm.script(text("好的，北京。"))
    result = await graph.ainvoke(Command(resume={again.id: {"value": "北京"}}), config())
    assert tool_messages(result)[-1].content == "用户选择：北京"
    assert result["messages"][-1].content == "好的，北京。"


async def test_cancelling_a_question_tells_the_model(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("ask_confirm", {"message": "继续吗？"}))
    await say(graph, "做点什么")
    [question] = await pending(graph)
    llm.script(text("已取消。"))
    result = await graph.ainvoke(Command(resume={question.id: {"cancelled": True}}), config())
    assert tool_messages(result)[-1].content == "用户取消了操作"
    assert outcome_of(tool_messages(result)[-1]) == "cancelled"


def loop_graph(saver: AsyncSqliteSaver, *extra: Any) -> CompiledStateGraph:
    """A loop over get_weather, the ask tools and `extra`, configured by the environment now."""
    settings = GraphSettings()
    builder = build_react_graph(
        prompts=("ask",),
        tools=[weather_tool(settings), *ASK_TOOLS, *extra],
        settings=settings,
    )
    return builder.compile(checkpointer=saver, name="test")


async def test_step_cap_ends_a_runaway_loop_with_a_readable_answer(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MAX_STEPS", "3")
    llm.script(*(tool_call("get_weather", {"location": city}) for city in ("北京", "上海", "广州")))
    result = await say(loop_graph(saver), "一直查")
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "最多 3 步" in final.text and "停止" in final.text
    assert len(llm.requests) == 3


async def test_per_tool_cap_refuses_further_calls_of_that_tool(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MAX_CALLS_PER_TOOL", "2")
    llm.script(
        tool_calls(
            [call("get_weather", {"location": "北京"}), call("get_weather", {"location": "上海"})]
        ),
        tool_call("get_weather", {"location": "广州"}),
        text("只查了两个城市。"),
    )
    result = await say(loop_graph(saver), "查三个城市")
    contents = [m.content for m in tool_messages(result)]
    assert "北京" in contents[0] and "上海" in contents[1]
    assert "达到上限 2 次" in contents[2]
    assert [outcome_of(m) for m in tool_messages(result)] == ["ok", "ok", "capped"]
    assert result["messages"][-1].content == "只查了两个城市。"


async def test_a_repeated_identical_call_is_refused(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        tool_call("get_weather", {"location": "北京"}),
        tool_call("get_weather", {"location": "北京"}),
        text("北京晴。"),
    )
    result = await say(loop_graph(saver), "北京天气")
    second = tool_messages(result)[1]
    assert second.content.startswith("重复调用已拦截") and second.status == "error"
    assert outcome_of(second) == "repeated"
    assert len(meteo.forecast_requests) == 1
    assert result["messages"][-1].content == "北京晴。"


async def test_a_slow_tool_times_out_into_a_readable_message(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TOOL_TIMEOUT", "0.3")
    llm.script(tool_call("get_weather", {"location": HANG_CITY}), text("查询超时了。"))
    result = await say(loop_graph(saver), "慢")
    [timed_out] = tool_messages(result)
    assert timed_out.content == "错误：get_weather 执行超时（超过 0.3 秒），已放弃本次调用。"
    assert outcome_of(timed_out) == "timeout"
    assert result["messages"][-1].content == "查询超时了。"


async def test_parallel_calls_each_get_their_own_tool_message(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_calls(
            [
                call("get_weather", {"location": "北京"}, id="call_a"),
                call("get_weather", {"location": "上海"}, id="call_b"),
                call("get_weather", {"location": "Tokyo"}, id="call_c"),
            ]
        ),
        text("三地天气如上。"),
    )
    result = await say(graph, "北京上海东京天气")
    by_id = {m.tool_call_id: m.content for m in tool_messages(result)}
    assert set(by_id) == {"call_a", "call_b", "call_c"}
    assert "北京" in by_id["call_a"] and "上海" in by_id["call_b"] and "Tokyo" in by_id["call_c"]


async def test_tool_exceptions_unknown_tools_and_bad_arguments_become_readable_messages(
    saver: AsyncSqliteSaver, llm: ScriptedLLM
) -> None:
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    llm.script(
        tool_calls(
            [
                call("explode", {"reason": "disk full"}, id="c1"),
                call("no_such_tool", {}, id="c2"),
                call("get_weather", {"city": "北京"}, id="c3"),
            ]
        ),
        text("都失败了。"),
    )
    result = await say(loop_graph(saver, explode), "试试")
    by_id = {m.tool_call_id: m for m in tool_messages(result)}
    assert by_id["c1"].content == "错误：explode 执行失败：RuntimeError: boom: disk full。"
    assert by_id["c2"].content.startswith("错误：没有名为 no_such_tool 的工具")
    assert "get_weather" in by_id["c3"].content and "location" in by_id["c3"].content
    assert all(m.status == "error" for m in by_id.values())
    outcomes = {call_id: outcome_of(m) for call_id, m in by_id.items()}
    assert outcomes == {"c1": "error", "c2": "unknown_tool", "c3": "invalid_args"}
    assert result["messages"][-1].content == "都失败了。"


class SideEffects:
    def __init__(self) -> None:
        self.calls: list[str] = []


@pytest.fixture
def effects() -> SideEffects:
    return SideEffects()


def effect_tools(effects: SideEffects) -> tuple[Any, Any]:
    @tool
    def delete_record(record_id: str) -> str:
        """Delete a record."""
        effects.calls.append(f"delete {record_id}")
        return f"已删除 {record_id}"

    @tool
    def log_visit(page: str) -> str:
        """Record a page visit."""
        effects.calls.append(f"visit {page}")
        return "ok"

    return with_risk(delete_record, "sensitive"), log_visit


@pytest.mark.parametrize(("approve", "runs"), [(True, True), (False, False)])
async def test_a_sensitive_tool_asks_for_confirmation_first(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, effects: SideEffects, approve: bool, runs: bool
) -> None:
    delete_record, _ = effect_tools(effects)
    graph = loop_graph(saver, delete_record)
    llm.script(tool_call("delete_record", {"record_id": "42"}))
    await say(graph, "删掉 42")
    [gate] = await pending(graph)
    assert gate.value == {
        "type": "confirm",
        "message": "确认执行 delete_record ?",
        "tool": "delete_record",
        "args": {"record_id": "42"},
        "risk": "sensitive",
    }
    assert effects.calls == []

    llm.script(text("完成。"))
    result = await graph.ainvoke(Command(resume={gate.id: {"value": approve}}), config())
    [outcome] = tool_messages(result)
    assert effects.calls == (["delete 42"] if runs else [])
    if runs:
        assert outcome.content == "已删除 42"
        assert outcome_of(outcome) == "ok"
    else:
        assert outcome.content.startswith("用户拒绝执行 delete_record")
        assert outcome_of(outcome) == "declined"
        assert llm.requests[-1]["messages"][-1]["content"] == outcome.content


@pytest.mark.parametrize("durability", ["async", "exit"])
async def test_a_finished_sibling_is_not_run_again_when_another_call_interrupts(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, effects: SideEffects, durability: Durability
) -> None:
    _, log_visit = effect_tools(effects)
    graph = loop_graph(saver, log_visit)
    llm.script(
        tool_calls(
            [
                call("log_visit", {"page": "home"}, id="v"),
                call("ask_input", {"message": "城市？"}, id="q"),
            ]
        )
    )
    start = {"messages": [HumanMessage("记一下再问我")]}
    await graph.ainvoke(start, config(), durability=durability)
    [question] = await pending(graph)
    assert effects.calls == ["visit home"]

    llm.script(text("好的。"))
    answer = Command(resume={question.id: {"value": "北京"}})
    result = await graph.ainvoke(answer, config(), durability=durability)
    assert effects.calls == ["visit home"], "the finished sibling ran exactly once"
    assert {m.tool_call_id for m in tool_messages(result)} == {"v", "q"}


async def test_two_parallel_questions_are_answered_together_by_id(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_calls(
            [
                call("ask_input", {"message": "出发城市？"}, id="a"),
                call("ask_input", {"message": "到达城市？"}, id="b"),
            ]
        )
    )
    await say(graph, "两地天气对比")
    questions = await pending(graph)
    assert sorted(q.value["message"] for q in questions) == ["出发城市？", "到达城市？"]
    answers = {
        q.id: {"value": "北京" if q.value["message"] == "出发城市？" else "上海"} for q in questions
    }
    llm.script(text("好的。"))
    result = await graph.ainvoke(Command(resume=answers), config())
    by_id = {m.tool_call_id: m.content for m in tool_messages(result)}
    assert by_id == {"a": "用户回答：北京", "b": "用户回答：上海"}


async def test_model_errors_are_retried(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "2")
    graph = weather.make_graph(saver)
    llm.script(error(500), error(500), text("好了。"))
    result = await say(graph, "你好")
    assert result["messages"][-1].content == "好了。"
    assert len(llm.requests) == 3


async def test_a_model_that_keeps_failing_fails_the_run_and_the_thread_stays_usable(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "1")
    graph = weather.make_graph(saver)
    llm.script(error(500), error(500))
    with pytest.raises(ModelCallFailed, match=r"HTTP 500.*已重试 1 次"):
        await say(graph, "你好")

    llm.script(text("我在。"))
    result = await say(graph, "还在吗")
    assert result["messages"][-1].content == "我在。"
    assert [m.content for m in result["messages"] if isinstance(m, HumanMessage)] == [
        "你好",
        "还在吗",
    ]


async def test_a_missing_api_key_fails_the_first_model_call_naming_the_variable(
    saver: AsyncSqliteSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    graph = weather.make_graph(saver)
    with pytest.raises(ModelNotConfigured, match="OPENAI_API_KEY"):
        await say(graph, "你好")
