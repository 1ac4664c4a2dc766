"""The main flows in the browser: streaming, tool cards and every interrupt control."""

from __future__ import annotations

import pytest

import json
import re

from playwright.sync_api import expect

from tests.doubles.llm import ScriptedLLM, call, text, tool_call, tool_calls
from tests.doubles.tushare_mcp import TushareMCP
from tests.web.conftest import Chat, WebServer

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ASK_CITY = {"message": "请问您想查询哪个城市的天气？", "placeholder": "例如：北京 / Shanghai"}
WEATHER_ANSWER = (
    "北京今天**晴**，当前气温适中，湿度不高。\n\n"
    "- 白天适合户外活动\n- 早晚温差较大，注意添衣\n\n未来三天以晴到多云为主。"
)

TUSHARE_ANSWER = (
    "### 平安银行（000001.SZ）6 月走势\n\n"
    "| 指标 | 数值 | 解读 |\n|---|---|---|\n"
    "| 价格 | 区间震荡 | 上下沿清晰，无明显突破 |\n"
    "| 成交量 | 温和放大 | 资金关注度回升 |\n\n"
    "- **量价配合**：放量日多为阳线，承接较好\n"
    "- **风险提示**：银行板块整体偏弱，注意回撤\n\n"
    "整体走势**平稳**，可继续观察月线趋势。"
)


def test_weather_question_asks_for_the_city_then_shows_the_tool_card_and_streams_the_answer(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_input", ASK_CITY),
        tool_call("get_weather", {"location": "北京"}),
        text(WEATHER_ANSWER, chunk_size=4, delay_s=0.03),
    )
    chat.open("weather")
    chat.send("查天气")

    control = chat.interrupt
    box = control.get_by_label(ASK_CITY["message"])
    expect(box).to_be_focused()
    expect(box).to_have_attribute("placeholder", ASK_CITY["placeholder"])
    # The question is the control itself: an ask_* call gets no tool card of its own.
    expect(chat.tool("ask_input")).to_have_count(0)
    chat.shot("interrupt-input")

    box.fill("北京")
    box.press("Enter")

    expect(chat.page.locator(".msg-assistant.streaming")).to_have_count(1)
    card = chat.tool("get_weather")
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator(".tool-brief")).to_have_text("北京")
    expect(card).to_contain_text("北京")
    answer = chat.answers.last
    expect(answer).to_contain_text("北京今天晴")
    expect(answer.locator("strong")).to_have_text("晴")
    expect(answer.locator("li")).to_have_count(2)
    chat.wait_idle()
    expect(chat.page.locator(".msg-assistant.streaming")).to_have_count(0)
    expect(chat.interrupt).to_have_count(0)
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("北京")

    # The tool card opens to show the arguments and the result as text.
    card.locator("summary").click()
    expect(card.locator(".tool-pre").first).to_contain_text('"location": "北京"')
    expect(card.locator(".tool-pre").last).to_be_visible()
    chat.shot("conversation")

    assert llm.pending == 0
    tool_replies = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_replies[-1]["content"].endswith("北京")


def test_tushare_select_lists_both_ping_an_stocks_and_the_keyboard_choice_continues_the_run(
    chat: Chat, llm: ScriptedLLM, tushare_mcp: TushareMCP
) -> None:
    llm.script(
        tool_call("resolve_stock", {"name": "平安"}),
        tool_call(
            "daily", {"ts_code": "000001.SZ", "start_date": "20250601", "end_date": "20250630"}
        ),
        text(TUSHARE_ANSWER, chunk_size=6, delay_s=0.01),
    )
    calls_before = len(tushare_mcp.calls)
    chat.open("tushare")
    chat.send("分析一下平安")

    control = chat.interrupt
    radios = control.get_by_role("radio")
    expect(radios).to_have_count(2)
    expect(control.get_by_role("radio", name=re.compile("平安银行"))).to_have_count(1)
    expect(control.get_by_role("radio", name=re.compile("中国平安"))).to_have_count(1)
    expect(control.get_by_role("button", name="提交")).to_be_disabled()
    expect(chat.tool("resolve_stock")).to_have_attribute("data-state", "waiting")
    chat.shot("interrupt-select")

    # Keyboard only: the first option has focus; arrows move the choice, Enter submits.
    expect(radios.first).to_be_focused()
    labels = [radios.nth(i).get_attribute("value") for i in range(2)]
    chat.page.keyboard.press("Space")
    for _ in range(labels.index("000001.SZ")):
        chat.page.keyboard.press("ArrowDown")
    expect(control.get_by_role("radio", name=re.compile("平安银行"))).to_be_checked()
    chat.page.keyboard.press("Enter")

    resolved = chat.tool("resolve_stock")
    expect(resolved).to_have_attribute("data-state", "done")
    expect(resolved).to_contain_text("000001.SZ")
    expect(chat.tool("daily")).to_have_attribute("data-state", "done")
    answer = chat.answers.last
    expect(answer).to_contain_text("整体走势平稳")
    expect(answer.locator("table td")).to_have_count(6)
    chat.wait_idle()
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("平安银行")
    chat.shot("conversation-tushare")

    assert llm.pending == 0
    daily = {"ts_code": "000001.SZ", "start_date": "20250601", "end_date": "20250630"}
    assert ("daily", daily) in tushare_mcp.calls[calls_before:]


def _report_files(server: WebServer, title: str) -> list[str]:
    reports = server.data_dir / "reports"
    return sorted(path.name for path in reports.glob(f"{title}*.md"))


def test_approving_the_confirm_runs_save_report(
    chat: Chat, llm: ScriptedLLM, server: WebServer
) -> None:
    title = "平安银行分析-approve"
    llm.script(
        tool_call("save_report", {"title": title, "markdown": "# 平安银行\n\n走势平稳。"}),
        text("报告已保存。"),
    )
    chat.open("tushare")
    chat.send("把分析保存成报告")

    control = chat.interrupt
    expect(control.locator(".tool-name")).to_have_text("save_report")
    expect(control.locator(".risk")).to_have_text("敏感操作")
    expect(control.locator(".risk")).to_have_class(re.compile("risk-sensitive"))
    expect(control.locator(".tool-pre")).to_contain_text(title)
    expect(chat.tool("save_report")).to_have_attribute("data-state", "waiting")
    chat.shot("interrupt-confirm")

    control.get_by_role("button", name="批准执行").click()

    card = chat.tool("save_report")
    expect(card).to_have_attribute("data-state", "done")
    expect(card).to_contain_text("报告已保存")
    expect(chat.answers.last).to_have_text("报告已保存。")
    assert _report_files(server, title) == [f"{title}.md"]


def test_declining_the_confirm_shows_the_tool_did_not_run(
    chat: Chat, llm: ScriptedLLM, server: WebServer
) -> None:
    title = "平安银行分析-decline"
    llm.script(
        tool_call("save_report", {"title": title, "markdown": "# 平安银行"}),
        text("好的，没有保存报告。"),
    )
    chat.open("tushare")
    chat.send("把分析保存成报告")

    chat.interrupt.get_by_role("button", name="拒绝").click()

    card = chat.tool("save_report")
    expect(card).to_have_attribute("data-state", "declined")
    expect(card.locator(".tool-state")).to_have_text("未执行")
    expect(card).to_contain_text("没有运行")
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("已拒绝")
    expect(chat.answers.last).to_have_text("好的，没有保存报告。")
    assert _report_files(server, title) == []


def test_multi_select_needs_min_choices_before_it_can_be_submitted(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call(
            "ask_multi_choice",
            {"message": "想对比哪些城市？", "options": ["北京", "上海", "广州"], "min": 2},
        ),
        text("好的，对比北京和广州。"),
    )
    chat.open("weather")
    chat.send("对比几个城市的天气")

    control = chat.interrupt
    submit = control.get_by_role("button", name="提交")
    expect(control.get_by_role("checkbox")).to_have_count(3)
    expect(control).to_contain_text("至少选择 2 项")
    control.get_by_role("checkbox", name="北京").check()
    expect(submit).to_be_disabled()
    control.get_by_role("checkbox", name="广州").focus()
    chat.page.keyboard.press("Space")
    expect(submit).to_be_enabled()
    expect(control).to_contain_text("已选 2 项")
    chat.shot("interrupt-multi-select")
    submit.click()

    expect(chat.answers.last).to_have_text("好的，对比北京和广州。")
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("北京、广州")
    tool_reply = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"][-1]
    assert "北京" in tool_reply["content"] and "广州" in tool_reply["content"]


def test_reloading_with_a_pending_interrupt_brings_the_same_control_back(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_input", ASK_CITY),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天多云，气温适中。"),
    )
    chat.open("weather")
    chat.send("查天气")
    expect(chat.interrupt.get_by_label(ASK_CITY["message"])).to_be_visible()
    interrupt_id = chat.interrupt.get_attribute("data-interrupt-id")

    chat.page.reload()

    control = chat.interrupt
    expect(control).to_have_attribute("data-interrupt-id", interrupt_id or "")
    box = control.get_by_label(ASK_CITY["message"])
    expect(box).to_have_attribute("placeholder", ASK_CITY["placeholder"])
    expect(chat.page.locator(".msg-user")).to_have_text(["查天气"])
    expect(chat.composer).to_be_disabled()
    box.fill("上海")
    control.get_by_role("button", name="提交").click()

    expect(chat.tool("get_weather")).to_have_attribute("data-state", "done")
    expect(chat.answers.last).to_have_text("上海今天多云，气温适中。")
    expect(chat.composer).to_be_enabled()

    # A second reload shows the finished history, the answered question included.
    chat.page.reload()
    expect(chat.answers.last).to_have_text("上海今天多云，气温适中。")
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("上海")
    expect(chat.tool("get_weather")).to_have_attribute("data-state", "done")
    expect(chat.interrupt).to_have_count(0)


def test_two_questions_at_once_go_back_in_one_resume_and_cancel_is_an_answer_too(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_calls(
            [
                call("ask_input", {"message": "从哪个城市出发？", "placeholder": "北京"}),
                call("ask_choice", {"message": "怎么去？", "options": ["高铁", "飞机"]}),
            ]
        ),
        text("好的，从上海出发，出行方式稍后再定。"),
    )
    chat.open("weather")
    chat.send("帮我规划一次出行")

    city = chat.page.locator('.interrupt[data-reason="input"]')
    way = chat.page.locator('.interrupt[data-reason="select"]')
    expect(city).to_be_visible()
    expect(way.get_by_role("radio")).to_have_count(2)
    city.get_by_label("从哪个城市出发？").fill("上海")
    city.get_by_role("button", name="提交").click()
    expect(city).to_contain_text("还有 1 个问题待回答")
    expect(way.get_by_role("button", name="取消")).to_be_enabled()

    way.get_by_role("button", name="取消").click()

    expect(chat.answers.last).to_have_text("好的，从上海出发，出行方式稍后再定。")
    expect(city).to_contain_text("✓ 上海")
    expect(way).to_contain_text("已取消")
    replies = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert replies[-2:] == ["用户回答：上海", "用户取消了操作"]


def test_a_destructive_confirm_is_drawn_in_the_warning_colour(chat: Chat) -> None:
    # No shipped tool is destructive, so this run's stream is a recorded one: the page
    # renders whatever interrupt payload (docs/api.md) the service sends.
    payload = {
        "type": "confirm",
        "message": "确认执行 delete_reports ?",
        "tool": "delete_reports",
        "args": {"pattern": "*.md"},
        "risk": "destructive",
    }
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "r",
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "int-1",
                        "reason": "confirm",
                        "message": payload["message"],
                        "metadata": {"payload": payload},
                    }
                ],
            },
        },
    ]
    body = "".join(f"data: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events)
    chat.page.route(
        "**/api/agents/weather",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body),
    )
    chat.open("weather")
    chat.send("删掉所有报告")

    control = chat.interrupt
    expect(control).to_have_class(re.compile("is-destructive"))
    expect(control.locator(".risk")).to_have_text("高危操作")
    approve = control.get_by_role("button", name="确认执行")
    expect(approve).to_have_class(re.compile("btn-danger"))
    expect(control.get_by_role("button", name="拒绝")).to_be_focused()
    expect(control.locator(".tool-pre")).to_contain_text('"pattern": "*.md"')
    chat.shot("interrupt-confirm-destructive")


def test_a_failed_tool_call_is_shown_failed_because_its_result_says_so(
    chat: Chat, llm: ScriptedLLM
) -> None:
    # The lookup's text ("查询「…」天气失败：…") has none of the usual error prefixes:
    # only the result's outcome can tell the page that the call failed.
    llm.script(tool_call("get_weather", {"location": "火星基地"}), text("没有找到这个地方。"))
    chat.open("weather")
    chat.send("火星基地的天气")

    card = chat.tool("get_weather")
    expect(card).to_have_attribute("data-state", "failed")
    expect(card.locator(".tool-state")).to_have_text("失败")
    expect(chat.answers.last).to_contain_text("没有找到这个地方")
    chat.wait_idle()

    chat.page.reload()  # the history from the server carries the outcome too
    expect(chat.tool("get_weather")).to_have_attribute("data-state", "failed")
