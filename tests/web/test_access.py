"""Comfort and access: a phone-sized window (390 x 844) where nothing runs off the side,
every kind of question answered with the keyboard alone, the page's language following
the browser's (Chinese for zh*, English otherwise), and dark mode following the system."""

from __future__ import annotations

import pytest

import re
from collections.abc import Callable

from playwright.sync_api import Page, expect

from tests.doubles.llm import ScriptedLLM, reasoning, text, tool_call
from tests.web.conftest import Chat
from tests.web.test_charts import JULY

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

PHONE = {"width": 390, "height": 844}

# Every element inside the conversation whose box runs past the viewport, unless a
# scrolling (or clipping) box between it and the conversation holds it; those boxes are
# themselves checked. The document itself must not scroll sideways either.
OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  const root = document.getElementById("conversation");
  const held = (el) => {
    for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
      if (getComputedStyle(p).overflowX !== "visible") return true;
    }
    return false;
  };
  const out = [];
  for (const el of root.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if ((box.right > width + 0.5 || box.left < -0.5 || box.width > width) && !held(el)) {
      const name = `${el.tagName.toLowerCase()}.${el.className}`;
      out.push(`${name} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  return { scrollWidth: document.scrollingElement.scrollWidth, width, out };
}"""


def assert_fits(page: Page) -> None:
    found = page.evaluate(OVERFLOWING)
    assert found["scrollWidth"] <= PHONE["width"], found
    assert found["out"] == [], found


def test_at_390_px_every_question_is_answered_with_the_keyboard_and_nothing_overflows(
    chat: Chat, llm: ScriptedLLM
) -> None:
    page = chat.page
    page.set_viewport_size(PHONE)
    llm.script(
        tool_call("ask_input", {"message": "分析哪只股票？", "placeholder": "平安银行"}),
        tool_call("ask_choice", {"message": "看哪个周期？", "options": ["日线", "周线", "月线"]}),
        tool_call(
            "ask_multi_choice",
            {"message": "要哪些指标？", "options": ["均线", "成交量", "换手率"], "min": 2},
        ),
        tool_call("ask_confirm", {"message": "要开始拉取行情吗？"}),
        reasoning("先取 7 月的日线，再看量价。", tool_call("daily", JULY)),
        text("平安银行 7 月**震荡**，量价配合一般。\n\n| 指标 | 值 |\n|---|---|\n| 收盘 | 6.77 |"),
    )
    chat.open("tushare")
    chat.send("帮我分析一只股票")
    keys = page.keyboard

    # input: the box has focus; type, Enter.
    box = chat.interrupt.get_by_label("分析哪只股票？")
    expect(box).to_be_focused()
    assert_fits(page)
    chat.shot("phone-input")
    keys.type("平安银行")
    keys.press("Enter")

    # select: the first option has focus; arrows pick, Enter sends.
    control = chat.interrupt.filter(has_text="看哪个周期？")
    expect(control.get_by_role("radio").first).to_be_focused()
    keys.press("Space")
    keys.press("ArrowDown")
    expect(control.get_by_role("radio", name="周线")).to_be_checked()
    assert_fits(page)
    chat.shot("phone-select")
    keys.press("Enter")

    # multi_select: Space ticks, Tab moves on, Enter sends once enough are ticked.
    control = chat.interrupt.filter(has_text="要哪些指标？")
    expect(control.get_by_role("checkbox").first).to_be_focused()
    keys.press("Space")
    keys.press("Tab")
    keys.press("Tab")
    expect(control.get_by_role("checkbox", name="换手率")).to_be_focused()
    keys.press("Space")
    expect(control).to_contain_text("已选 2 项")
    assert_fits(page)
    chat.shot("phone-multi-select")
    keys.press("Enter")

    # confirm: focus starts on "decline" (a stray Enter must not approve); Tab, Enter.
    control = chat.interrupt.filter(has_text="要开始拉取行情吗？")
    expect(control.get_by_role("button", name="拒绝")).to_be_focused()
    keys.press("Tab")
    expect(control.get_by_role("button", name="批准执行")).to_be_focused()
    assert_fits(page)
    chat.shot("phone-confirm")
    keys.press("Enter")

    expect(chat.answers.last).to_contain_text("量价配合一般")
    chat.wait_idle()
    answered = page.locator(".interrupt.is-answered")
    expect(answered).to_have_count(4)
    expect(answered.nth(0)).to_contain_text("平安银行")
    expect(answered.nth(1)).to_contain_text("周线")
    expect(answered.nth(2)).to_contain_text("均线、换手率")
    expect(answered.nth(3)).to_contain_text("已批准")
    chart = chat.tool("daily").locator(".chart-candles")
    expect(chart).to_have_attribute("data-bars", "22")
    # The reasoning is folded, and no part of the answer.
    thought = page.locator(".reasoning")
    expect(thought).to_have_count(1)
    expect(thought).not_to_have_attribute("open", "")
    expect(thought.locator(".reasoning-body")).to_be_hidden()
    expect(chat.answers).not_to_contain_text("先取 7 月的日线")
    chart.scroll_into_view_if_needed()
    assert_fits(page)
    chat.shot("phone-chart")

    # What the keyboard answered is what the tools got.
    replies = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert replies[:4] == [
        "用户回答：平安银行",
        "用户选择：周线",
        "用户选择：均线、换手率",
        "用户确认：是",
    ]


def test_at_390_px_the_forecast_and_the_sidebar_fit_too(chat: Chat, llm: ScriptedLLM) -> None:
    page = chat.page
    page.set_viewport_size(PHONE)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴，适合出行。"))
    chat.open("weather")
    chat.send("北京天气")
    expect(chat.tool("get_weather").locator(".fc-day")).to_have_count(3)
    expect(chat.answers.last).to_contain_text("适合出行")
    chat.wait_idle()
    assert_fits(page)
    chat.shot("phone-forecast")

    page.get_by_role("button", name="打开会话列表").click()
    sidebar = page.get_by_role("complementary", name="会话")
    expect(sidebar).to_be_in_viewport()
    expect(sidebar.get_by_role("listitem")).to_have_count(1)
    assert page.evaluate("document.scrollingElement.scrollWidth") <= PHONE["width"]
    chat.shot("phone-sidebar")


def test_an_english_browser_gets_english_words_and_a_chinese_one_chinese(
    new_chat: Callable[..., Chat], llm: ScriptedLLM
) -> None:
    english = new_chat(locale="en-US")
    page = english.page
    english.open("weather")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_role("button", name="New chat")).to_be_visible()
    expect(page.get_by_label("Agent", exact=True).locator("option:checked")).to_have_text("Weather")
    expect(page.locator(".welcome-title")).to_have_text("Chat with Weather")
    expect(english.composer).to_have_attribute("placeholder", re.compile("^Type a message"))
    expect(page.get_by_role("button", name="Send")).to_be_visible()

    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "Beijing"}),
        tool_call("get_weather", {"location": "北京"}),
        text("Sunny in Beijing."),
    )
    english.send("Weather, please")
    control = english.interrupt
    expect(control.locator(".interrupt-badge")).to_have_text("Your input is needed")
    expect(control.get_by_role("button", name="Submit")).to_be_visible()
    expect(control.get_by_role("button", name="Cancel")).to_be_visible()
    control.get_by_label("哪个城市？").fill("北京")
    control.get_by_role("button", name="Submit").click()
    expect(english.answers.last).to_have_text("Sunny in Beijing.")
    card = english.tool("get_weather")
    expect(card.locator(".tool-state")).to_have_text("done")
    expect(card.locator(".tool-label")).to_have_text("Weather")
    forecast = card.locator(".chart-forecast")
    expect(forecast.locator(".fc-day-name").first).to_have_text("Today")
    expect(forecast.locator(".fc-facts")).to_contain_text("Humidity")
    expect(page.locator(".interrupt.is-answered .interrupt-badge")).to_have_text("Answered")
    english.wait_idle()
    english.shot("english")

    chinese = new_chat(locale="zh-CN")
    chinese.open("weather")
    expect(chinese.page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(chinese.page.get_by_role("button", name="新对话")).to_be_visible()
    expect(chinese.page.locator(".welcome-title")).to_have_text("和「天气助手」对话")
    expect(chinese.composer).to_have_attribute("placeholder", re.compile("^输入消息"))
    chinese.page.locator(f'li.thread[data-thread-id="{english.thread_id}"] .thread-open').click()
    expect(chinese.tool("get_weather").locator(".tool-state")).to_have_text("完成")
    expect(chinese.tool("get_weather").locator(".fc-day-name").first).to_have_text("今天")


def test_dark_mode_follows_the_system(new_chat: Callable[..., Chat], llm: ScriptedLLM) -> None:
    dark = new_chat(color_scheme="dark")
    llm.script(tool_call("daily", JULY), text("平安银行 7 月震荡。"))
    dark.open("tushare")
    background = dark.page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 23, 30)"
    dark.send("平安银行 7 月的日线")
    expect(dark.tool("daily").locator(".chart-candles")).to_have_attribute("data-bars", "22")
    expect(dark.answers.last).to_have_text("平安银行 7 月震荡。")
    dark.wait_idle()
    text_colour = dark.page.evaluate("getComputedStyle(document.body).color")
    assert text_colour == "rgb(230, 233, 239)"
    dark.shot("dark-chart")

    light = new_chat(color_scheme="light")
    light.open("weather")
    assert light.page.evaluate("getComputedStyle(document.body).backgroundColor") == (
        "rgb(245, 246, 248)"
    )
