"""The tushare agent end to end: scripted LLM and the Tushare MCP double, over the wire."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, StreamMode

from graphs import tushare
from graphs.tools_node import outcome_of
from tests.doubles.llm import ScriptedLLM, call, text, tool_call, tool_calls
from tests.doubles.tushare_mcp import TushareMCP
from tests.graphs.support import config, say
from tests.support.env import PROJECT_VARS
from tools.interrupts import CANCELLED_TEXT
from tools.mcp.toolset import TOKEN_HINT, forget_tushare_toolset

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tushare-token-9b2e61f0c7"

PINGAN_OPTIONS = [
    {"label": "平安银行 000001.SZ", "value": "000001.SZ"},
    {"label": "中国平安 601318.SH", "value": "601318.SH"},
]


@pytest.fixture(autouse=True)
def _fresh_toolset() -> Iterator[None]:
    forget_tushare_toolset()
    yield
    forget_tushare_toolset()


def point_at(monkeypatch: pytest.MonkeyPatch, url: str, token: str = TOKEN) -> None:
    monkeypatch.setenv("TUSHARE_MCP_URL", url)
    monkeypatch.setenv("TUSHARE_TOKEN", token)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TushareMCP]:
    with TushareMCP(token=TOKEN) as double:
        point_at(monkeypatch, double.url)
        yield double


@pytest.fixture
def graph(saver: AsyncSqliteSaver, request: pytest.FixtureRequest) -> CompiledStateGraph:
    if "server" in request.fixturenames:
        request.getfixturevalue("server")  # the graph takes the settings the double gives
    return tushare.make_graph(saver)


async def saved_interrupts(saver: AsyncSqliteSaver, thread: str = "t1") -> list[Interrupt]:
    """The pending interrupts as read back from the checkpoint, by a freshly compiled graph."""
    state = await tushare.make_graph(saver).aget_state(config(thread))
    return [i for task in state.tasks for i in task.interrupts]


async def answer(graph: CompiledStateGraph, question: Interrupt, value: Any) -> dict[str, Any]:
    return await graph.ainvoke(Command(resume={question.id: value}), config())


def tool_messages(result: dict[str, Any], name: str | None = None) -> list[ToolMessage]:
    return [
        m
        for m in result["messages"]
        if isinstance(m, ToolMessage) and (name is None or m.name == name)
    ]


def last_answer(result: dict[str, Any]) -> str:
    last = result["messages"][-1]
    assert isinstance(last, AIMessage)
    return str(last.content)


async def finished(graph: CompiledStateGraph, thread: str = "t1") -> bool:
    state = await graph.aget_state(config(thread))
    return state.next == () and not any(task.interrupts for task in state.tasks)


# --- import and configuration --------------------------------------------------------


@pytest.mark.processes  # a fresh interpreter
def test_the_graph_module_imports_and_compiles_without_token_or_network() -> None:
    script = (
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise OSError('network used while importing the graph')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from graphs import tushare\n"
        "tushare.make_graph()\n"
        "print(tushare.graph.name, sorted(tushare.graph.get_graph().nodes))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in PROJECT_VARS}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tushare ['__end__', '__start__', 'agent', 'tools']"
    assert tushare.graph.checkpointer is None


async def test_without_a_token_the_agent_says_how_to_set_it(
    graph: CompiledStateGraph, llm: ScriptedLLM
) -> None:
    result = await say(graph, "分析一下平安银行")
    assert last_answer(result) == TOKEN_HINT
    assert llm.requests == []


# --- resolve_stock -----------------------------------------------------------------


async def test_several_matches_ask_the_user_to_select_and_the_pick_is_returned(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "平安"}), text("已确定：平安银行。"))
    await say(graph, "看看平安")
    [question] = await saved_interrupts(saver)
    assert question.value == {
        "type": "select",
        "message": "找到多只股票，请选择：",
        "options": PINGAN_OPTIONS,
    }
    result = await answer(graph, question, {"value": "000001.SZ"})
    [message] = tool_messages(result, "resolve_stock")
    assert json.loads(str(message.content)) == {"ts_code": "000001.SZ", "name": "平安银行"}
    assert "平安银行" in str(message.content)  # JSON kept readable, not \u-escaped
    assert last_answer(result) == "已确定：平安银行。"
    assert await finished(graph)


async def test_a_single_match_is_returned_without_asking(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "茅台"}), text("贵州茅台。"))
    result = await say(graph, "茅台怎么样")
    assert await saved_interrupts(saver) == []
    [message] = tool_messages(result, "resolve_stock")
    assert json.loads(str(message.content)) == {"ts_code": "600519.SH", "name": "贵州茅台"}
    assert server.calls == [("stock_basic", {"name": "茅台", "list_status": "L"})]


async def test_no_match_gives_the_not_found_text(
    graph: CompiledStateGraph, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "火星科技"}), text("没有找到。"))
    result = await say(graph, "火星科技")
    [message] = tool_messages(result, "resolve_stock")
    assert message.content == "未找到名称「火星科技」对应的股票"


async def test_no_arguments_ask_for_a_name_and_the_answer_is_resolved(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {}), text("好的，平安银行。"))
    await say(graph, "帮我分析一只股票")
    [question] = await saved_interrupts(saver)
    assert question.value == {
        "type": "input",
        "message": "请输入股票名称或代码：",
        "placeholder": "平安银行 / 000001.SZ",
    }
    result = await answer(graph, question, {"value": "平安银行"})
    [message] = tool_messages(result, "resolve_stock")
    assert json.loads(str(message.content)) == {"ts_code": "000001.SZ", "name": "平安银行"}
    assert await finished(graph)


async def test_a_code_is_returned_at_once_without_a_lookup(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {}), text("好的。"))
    await say(graph, "分析一只股票")
    [question] = await saved_interrupts(saver)
    result = await answer(graph, question, {"value": "601318.sh"})
    [message] = tool_messages(result, "resolve_stock")
    assert json.loads(str(message.content)) == {"ts_code": "601318.SH", "name": None}
    assert server.calls == []


async def test_cancelling_the_selection_tells_the_model(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "平安"}), text("好的，已取消。"))
    await say(graph, "平安")
    [question] = await saved_interrupts(saver)
    result = await answer(graph, question, {"cancelled": True})
    [message] = tool_messages(result, "resolve_stock")
    assert message.content == CANCELLED_TEXT
    assert await finished(graph)


async def test_the_generic_query_tool_variant_resolves_stocks_too(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with TushareMCP(token=TOKEN, generic=True) as server:
        point_at(monkeypatch, server.url)
        graph = tushare.make_graph(saver)
        llm.script(tool_call("resolve_stock", {"name": "平安"}), text("中国平安。"))
        await say(graph, "平安")
        [question] = await saved_interrupts(saver)
        assert question.value["options"] == PINGAN_OPTIONS
        result = await answer(graph, question, {"value": "601318.SH"})
    [message] = tool_messages(result, "resolve_stock")
    assert json.loads(str(message.content)) == {"ts_code": "601318.SH", "name": "中国平安"}
    assert server.calls[0] == (
        "tushare_query",
        {"api_name": "stock_basic", "params": {"list_status": "L", "name": "平安"}},
    )
    tool_names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
    assert "tushare_query" in tool_names


# --- a full analysis over the wire ---------------------------------------------------

DAILY_ARGS = {"ts_code": "000001.SZ", "start_date": "20251001", "end_date": "20251231"}
MONTHLY_ARGS = {"ts_code": "000001.SZ", "start_date": "20240101", "end_date": "20251231"}
FINAL = "平安银行（000001.SZ）：日线缩量震荡，月线仍处下降通道。以上不构成投资建议。"


def script_analysis(llm: ScriptedLLM) -> None:
    llm.script(
        tool_call("resolve_stock", {"name": "平安"}),
        tool_calls([call("daily", DAILY_ARGS), call("monthly", MONTHLY_ARGS)]),
        text(FINAL),
    )


async def stream_run(
    graph: CompiledStateGraph, run_input: Any, events: list[Any] | None = None
) -> str:
    """Stream one run; return the text the agent node streamed, keep every event."""
    streamed = []
    modes: list[StreamMode] = ["messages", "updates", "values"]
    async for item in graph.astream(run_input, config(), stream_mode=modes):
        mode, event = cast(tuple[str, Any], item)
        if events is not None:
            events.append(event)
        if mode == "messages":
            chunk, meta = event
            if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "agent":
                streamed.append(str(chunk.content))
    return "".join(streamed)


async def test_a_full_analysis_resolves_fetches_daily_and_monthly_and_streams_the_answer(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, server: TushareMCP
) -> None:
    script_analysis(llm)
    await stream_run(graph, {"messages": [HumanMessage("分析一下平安最近的走势")]})
    [question] = await saved_interrupts(saver)
    streamed = await stream_run(graph, Command(resume={question.id: {"value": "000001.SZ"}}))

    assert streamed == FINAL
    assert await finished(graph)
    # resolve_stock looks up again when it resumes; the two fetches ran in parallel
    lookup = ("stock_basic", {"name": "平安", "list_status": "L"})
    assert server.calls[:2] == [lookup, lookup]
    assert sorted(server.calls[2:], key=lambda c: c[0]) == [
        ("daily", DAILY_ARGS),
        ("monthly", MONTHLY_ARGS),
    ]
    state = await graph.aget_state(config())
    daily = tool_messages(state.values, "daily")[0].content
    monthly = tool_messages(state.values, "monthly")[0].content
    assert str(daily).splitlines()[1].startswith("000001.SZ | 20251231 |")
    assert str(monthly).splitlines()[-1] == "（共 24 行）"

    first, *_, last = llm.requests
    system = first["messages"][0]
    assert system["role"] == "system"
    assert "A 股" in system["content"]
    assert date.today().strftime("%Y%m%d") in system["content"]
    assert "${to_day}" not in system["content"]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"stock_basic", "daily", "monthly", "resolve_stock", "save_report"} <= offered
    assert {"ask_input", "ask_choice", "ask_multi_choice", "ask_confirm"} <= offered
    seen_by_model = [m["content"] for m in last["messages"] if m["role"] == "tool"]
    assert any("000001.SZ | 20251231" in str(content) for content in seen_by_model)


async def test_the_token_never_appears_in_logs_events_or_messages(
    graph: CompiledStateGraph,
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    events: list[Any] = []
    script_analysis(llm)
    await stream_run(graph, {"messages": [HumanMessage("分析平安")]}, events)
    [question] = await saved_interrupts(saver)
    await stream_run(graph, Command(resume={question.id: {"value": "000001.SZ"}}), events)
    # and a failing call: the server goes away mid-conversation
    server.stop()
    llm.script(tool_call("daily", {"ts_code": "000001.SZ"}), text("服务暂时不可用。"))
    await stream_run(graph, {"messages": [HumanMessage("再看一次日线")]}, events)

    state = await graph.aget_state(config())
    failed = tool_messages(state.values, "daily")[-1]
    assert str(failed.content).startswith("错误：调用 Tushare 工具 daily 失败")
    assert events and caplog.records
    assert TOKEN not in caplog.text
    assert all(TOKEN not in record.getMessage() for record in caplog.records)
    assert TOKEN not in repr(events)
    assert TOKEN not in repr(state.values["messages"])
    assert TOKEN not in json.dumps(llm.requests, ensure_ascii=False)


async def test_a_rate_limit_answer_reaches_the_model_as_readable_error_text(
    graph: CompiledStateGraph, llm: ScriptedLLM, server: TushareMCP
) -> None:
    server.shape = "error"
    llm.script(tool_call("daily", {"ts_code": "000001.SZ"}), text("接口限流，请稍后再试。"))
    result = await say(graph, "000001.SZ 日线")
    [message] = tool_messages(result, "daily")
    assert str(message.content).startswith("错误：Tushare 接口返回错误 40203")
    assert last_answer(result) == "接口限流，请稍后再试。"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("resolve_stock", {"name": "平安"}), ("daily", {"ts_code": "000001.SZ"})],
)
async def test_a_tushare_error_answer_is_a_failed_call_for_every_tushare_tool(
    graph: CompiledStateGraph,
    llm: ScriptedLLM,
    server: TushareMCP,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    server.shape = "error"
    llm.script(tool_call(tool, arguments), text("接口限流。"))
    result = await say(graph, "平安银行")
    [message] = tool_messages(result, tool)
    assert (message.status, outcome_of(message)) == ("error", "error")
    assert "40203" in str(message.content)


async def test_a_name_that_matches_no_stock_is_a_failed_resolve_stock_call(
    graph: CompiledStateGraph, llm: ScriptedLLM, server: TushareMCP
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "火星科技"}), text("没有找到。"))
    result = await say(graph, "火星科技")
    [message] = tool_messages(result, "resolve_stock")
    assert (message.status, outcome_of(message)) == ("error", "error")


# --- transports and failures ---------------------------------------------------------


async def test_an_sse_only_server_works_through_the_fallback(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    with TushareMCP(token=TOKEN, transport="sse") as server:
        point_at(monkeypatch, server.url)
        graph = tushare.make_graph(saver)
        llm.script(
            tool_call("resolve_stock", {"name": "茅台"}),
            tool_call("daily", {"ts_code": "600519.SH", "trade_date": "20251231"}),
            text("贵州茅台日线已取得。"),
        )
        result = await say(graph, "茅台 12 月 31 日的日线")
    assert "600519.SH | 20251231" in str(tool_messages(result, "daily")[0].content)
    assert last_answer(result) == "贵州茅台日线已取得。"


async def test_a_server_that_is_down_is_reported_at_once_until_the_back_off_then_works_once_up(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Long enough that restarting the double and asking again fit in it on a busy machine.
    monkeypatch.setenv("TUSHARE_RETRY_AFTER", "2")
    graph = tushare.make_graph(saver)
    server.stop()
    down = await say(graph, "茅台怎么样")
    assert "无法连接 Tushare MCP 服务" in last_answer(down)
    assert llm.requests == []

    server.start()
    backing_off = await say(graph, "茅台怎么样", thread="t2")
    assert "秒后再尝试连接" in last_answer(backing_off)

    llm.script(tool_call("resolve_stock", {"name": "茅台"}), text("贵州茅台。"))
    deadline = asyncio.get_running_loop().time() + 10
    up = await say(graph, "茅台怎么样", thread="t3")
    while not tool_messages(up, "resolve_stock"):  # still inside the back-off: answered at once
        assert asyncio.get_running_loop().time() < deadline, last_answer(up)
        await asyncio.sleep(0.05)  # polling interval, not a wait for a result
        up = await say(graph, "茅台怎么样", thread="t3")
    [message] = tool_messages(up, "resolve_stock")
    assert json.loads(str(message.content))["ts_code"] == "600519.SH"


async def test_a_wrong_token_is_reported_readably(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point_at(monkeypatch, server.url, "not-the-right-token-3c")
    graph = tushare.make_graph(saver)
    result = await say(graph, "茅台怎么样")
    reply = last_answer(result)
    assert "401" in reply
    assert "TUSHARE_TOKEN" in reply
    assert "not-the-right-token-3c" not in reply
    assert llm.requests == []


# --- save_report ---------------------------------------------------------------------

REPORT = "# 平安银行分析\n\n日线缩量震荡。"


def reports(data_dir: Path) -> list[Path]:
    return sorted(p for p in data_dir.rglob("*.md"))


async def ask_to_save(
    graph: CompiledStateGraph, saver: AsyncSqliteSaver, llm: ScriptedLLM, title: str
) -> Interrupt:
    llm.script(tool_call("save_report", {"title": title, "markdown": REPORT}), text("处理完毕。"))
    await say(graph, "把分析保存下来")
    [question] = await saved_interrupts(saver)
    return question


async def test_save_report_asks_for_confirmation_first(
    graph: CompiledStateGraph,
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    data_dir: Path,
) -> None:
    question = await ask_to_save(graph, saver, llm, "平安银行分析")
    assert question.value == {
        "type": "confirm",
        "message": "确认执行 save_report ?",
        "tool": "save_report",
        "args": {"title": "平安银行分析", "markdown": REPORT},
        "risk": "sensitive",
    }
    assert reports(data_dir) == []


async def test_declining_save_report_writes_nothing_and_tells_the_model(
    graph: CompiledStateGraph,
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    data_dir: Path,
) -> None:
    question = await ask_to_save(graph, saver, llm, "平安银行分析")
    result = await answer(graph, question, {"value": False})
    [message] = tool_messages(result, "save_report")
    assert "用户拒绝执行" in str(message.content)
    assert reports(data_dir) == []


async def test_approving_save_report_writes_the_file(
    graph: CompiledStateGraph,
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    data_dir: Path,
) -> None:
    question = await ask_to_save(graph, saver, llm, "平安银行分析")
    result = await answer(graph, question, {"value": True})
    saved = data_dir / "reports" / "平安银行分析.md"
    [message] = tool_messages(result, "save_report")
    assert message.content == "报告已保存：平安银行分析.md（报告目录内）"
    assert saved.read_text("utf-8") == REPORT + "\n"


async def test_dot_dot_in_a_report_title_stays_inside_the_reports_directory(
    graph: CompiledStateGraph,
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    data_dir: Path,
) -> None:
    question = await ask_to_save(graph, saver, llm, "../../escape")
    await answer(graph, question, {"value": True})
    [saved] = reports(data_dir.parent)
    assert saved.parent == data_dir / "reports"


async def test_a_report_that_cannot_be_written_is_a_failed_save_report_call(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    server: TushareMCP,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    blocker = data_dir / "not-a-directory"
    blocker.write_text("a file where the reports directory should be")
    monkeypatch.setenv("AGENT_REPORTS_DIR", str(blocker / "reports"))
    graph = tushare.make_graph(saver)
    question = await ask_to_save(graph, saver, llm, "平安银行分析")
    result = await answer(graph, question, {"value": True})
    [message] = tool_messages(result, "save_report")
    assert (message.status, outcome_of(message)) == ("error", "error")
    assert str(message.content).startswith("报告未保存：")
