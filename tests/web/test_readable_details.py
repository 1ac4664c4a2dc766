"""Details a newcomer reads on the page: tool cards say what a call did in words and
dates (no raw JSON, no 20250701), questions end with the full-width colon, a phone keeps
a card's display name, the chart's TradingView credit covers no bar, and the wait-or-stop
question leaves the reply still streaming in view. Geometry is read from bounding boxes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.web.conftest import Chat

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

PHONE = {"width": 390, "height": 844}
JULY = {"ts_code": "000001.SZ", "start_date": "20250701", "end_date": "20250730"}
Box = dict[str, float]


def box_of(locator: Locator) -> Box:
    box = locator.bounding_box()
    assert box is not None, f"{locator} has no box (not displayed)"
    return box


def overlap(a: Box, b: Box) -> bool:
    """Whether two boxes share any area."""
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def bottom(box: Box) -> float:
    return box["y"] + box["height"]


def until(check: Callable[[], Any], within_s: float = 5.0) -> None:
    """Poll `check` (a function that asserts) until it passes; its last failure otherwise."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            check()
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def pick_ping_an_bank(chat: Chat) -> None:
    control = chat.interrupt
    control.get_by_role("radio", name=re.compile("平安银行")).check()
    control.get_by_role("button", name="提交").click()


def test_a_price_call_shows_its_dates_as_dates_on_its_card_live_and_reopened(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("daily", JULY), text("7 月震荡。"))
    chat.open("tushare")
    chat.send("平安银行 7 月的日线")
    card = chat.tool("daily")
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator(".tool-brief")).to_have_text("000001.SZ，2025-07-01，2025-07-30")
    chat.shot("details-daily-dates", of=card)

    chat.page.reload()
    expect(chat.tool("daily").locator(".tool-brief")).to_have_text(
        "000001.SZ，2025-07-01，2025-07-30"
    )


def test_the_stock_questions_end_with_a_full_width_colon(chat: Chat, llm: ScriptedLLM) -> None:
    # No name nor code: resolve_stock asks for one, then for a choice among the matches.
    llm.script(tool_call("resolve_stock", {}), text("好的，平安银行。"))
    chat.open("tushare")
    chat.send("分析一只股票")
    expect(chat.interrupt.locator(".interrupt-message")).to_have_text("请输入股票名称或代码：")
    box = chat.interrupt.get_by_role("textbox")
    box.fill("平安")
    box.press("Enter")
    expect(chat.interrupt.locator(".interrupt-message")).to_have_text("找到多只股票，请选择：")
    pick_ping_an_bank(chat)
    expect(chat.answers.last).to_have_text("好的，平安银行。")


def test_a_stock_resolved_through_a_question_reads_as_words_not_json_live_and_reopened(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("resolve_stock", {"name": "平安"}), text("选了平安银行。"))
    chat.open("tushare")
    chat.send("分析一下平安")
    pick_ping_an_bank(chat)
    expect(chat.answers.last).to_have_text("选了平安银行。")
    chat.wait_idle()

    def readable(card: Locator) -> None:
        expect(card).to_have_attribute("data-state", "done")
        expect(card.locator(".tool-brief")).to_have_text("平安")
        expect(card.locator(".tool-preview")).to_have_text("000001.SZ，平安银行")
        expect(card.locator("summary")).not_to_contain_text("{")
        expect(card.locator("summary")).not_to_contain_text("ts_code")

    readable(chat.tool("resolve_stock"))
    chat.shot("details-resolved-stock")
    # Opened, the card shows the whole result, indented like the arguments.
    chat.tool("resolve_stock").locator("summary").click()
    expect(chat.tool("resolve_stock").locator(".tool-pre").last).to_have_text(
        '{\n  "ts_code": "000001.SZ",\n  "name": "平安银行"\n}'
    )

    chat.page.reload()
    readable(chat.tool("resolve_stock"))


def test_at_390_px_a_tool_card_keeps_its_display_name_whole(
    new_chat: Callable[..., Chat], llm: ScriptedLLM
) -> None:
    chat = new_chat(viewport=PHONE)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    chat.open("weather")
    chat.send("北京天气")
    card = chat.tool("get_weather")
    expect(card).to_have_attribute("data-state", "done")
    label = card.locator(".tool-label")
    expect(label).to_have_text("查询天气")
    expect(label).to_be_visible()
    # Whole: inside the title (which clips what overflows) and inside the screen.
    title, shown = box_of(card.locator(".tool-title")), box_of(label)
    assert shown["width"] > 0
    assert title["x"] <= shown["x"] and shown["x"] + shown["width"] <= title["x"] + title["width"]
    assert shown["x"] + shown["width"] <= PHONE["width"]
    chat.shot("details-phone-tool-card", of=card)


def test_the_tradingview_credit_sits_outside_the_plot_so_it_covers_no_bar(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("daily", JULY), text("7 月震荡。"))
    chat.open("tushare")
    chat.send("平安银行 7 月的日线")
    chart = chat.tool("daily").locator(".chart-candles")
    expect(chart).to_have_attribute("data-volume", "22")
    # The licence asks for a link to tradingview.com on the page: there is one, and it
    # lies outside the plot (candles and volume bars) and the legend above it.
    credits = chart.locator('a[href^="https://www.tradingview.com"]')
    expect(credits.first).to_be_visible()
    plot, legend = box_of(chart.locator(".chart-canvas")), box_of(chart.locator(".chart-legend"))
    for i in range(credits.count()):
        credit = box_of(credits.nth(i))
        assert not overlap(credit, plot), (credit, plot)
        assert not overlap(credit, legend), (credit, legend)
    chat.shot("details-chart-credit", of=chat.tool("daily"))


def test_the_wait_or_stop_question_leaves_the_streaming_reply_s_last_line_in_view(
    chat: Chat, llm: ScriptedLLM
) -> None:
    # Long enough to scroll; then the reply stalls, so no new text scrolls it back.
    paragraphs = [f"第 {n} 段：今天的天气变化很多，需要一段一段慢慢说明。" for n in range(1, 31)]
    llm.script(hang(60, partial="\n\n".join(paragraphs)))
    chat.open("weather")
    chat.send("讲讲天气")
    reply = chat.page.locator(".msg-assistant.streaming")
    last_line = reply.locator("p").last
    expect(last_line).to_have_text(paragraphs[-1])
    conversation = chat.page.locator("#conversation")
    until(lambda: _in_view(last_line, conversation))

    chat.send("下一个问题")
    choice = chat.page.get_by_role("group", name="上一条回答还没结束")
    expect(choice).to_be_visible()
    until(lambda: _in_view(last_line, conversation))
    line = box_of(last_line)
    assert bottom(line) <= box_of(choice)["y"]
    chat.shot("details-run-choice")
    chat.stop_button.click()
    chat.wait_idle()


def _in_view(line: Locator, scroller: Locator) -> None:
    """`line` is wholly inside the scroller's visible box."""
    shown, frame = box_of(line), box_of(scroller)
    assert frame["y"] <= shown["y"] and bottom(shown) <= bottom(frame), (shown, frame)
