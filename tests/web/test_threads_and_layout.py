"""The thread list kept in the browser, the agent picker, and the narrow (375 px) layout."""

from __future__ import annotations

import pytest

import httpx
from playwright.sync_api import expect

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat, until_thread_gone

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ASK_CITY = {"message": "请问您想查询哪个城市的天气？", "placeholder": "例如：北京"}


def test_threads_are_listed_reopened_from_the_server_and_deleted_there_too(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    page = chat.page
    threads = page.get_by_role("navigation", name="历史会话").get_by_role("listitem")
    llm.script(text("第一个会话的回答。"))
    chat.open("weather")
    chat.send("第一个问题")
    expect(chat.answers.last).to_have_text("第一个会话的回答。")
    first_id = chat.thread_id

    page.get_by_role("button", name="新对话").click()
    expect(page.locator(".welcome")).to_be_visible()
    page.get_by_label("智能体", exact=True).select_option("tushare")
    llm.script(text("第二个会话的回答。"))
    chat.send("第二个问题")
    expect(chat.answers.last).to_have_text("第二个会话的回答。")
    second_id = chat.thread_id
    assert second_id != first_id
    expect(threads).to_have_count(2)
    expect(threads.first).to_contain_text("第二个问题")
    expect(threads.first).to_contain_text("A 股分析")

    # Opening the first thread reads its history back from the server.
    threads.filter(has_text="第一个问题").locator(".thread-open").click()
    expect(chat.answers).to_have_text(["第一个会话的回答。"])
    expect(page.get_by_label("智能体", exact=True)).to_have_value("weather")
    expect(page.get_by_role("heading", level=1)).to_have_text("第一个问题")

    page.get_by_role("button", name="删除会话：第二个问题").click()
    expect(threads).to_have_count(1)
    until_thread_gone(server, second_id)
    assert httpx.get(f"{server.url}/api/threads/{first_id}", timeout=5).status_code == 200

    # The list survives a reload; deleting the open thread leaves a fresh one.
    page.reload()
    expect(threads).to_have_count(1)
    expect(chat.answers).to_have_text(["第一个会话的回答。"])
    page.get_by_role("button", name="删除会话：第一个问题").click()
    expect(threads).to_have_count(0)
    expect(page.locator(".welcome")).to_be_visible()
    until_thread_gone(server, first_id)


def test_the_welcome_line_names_the_agent_by_its_display_name(chat: Chat) -> None:
    page = chat.page
    picker = page.get_by_label("智能体", exact=True)
    title = page.locator(".welcome-title")
    chat.open("weather")
    expect(picker.locator("option:checked")).to_have_text("天气助手")
    expect(title).to_have_text("和「天气助手」对话")

    picker.select_option("tushare")
    expect(picker.locator("option:checked")).to_have_text("A 股分析")
    expect(title).to_have_text("和「A 股分析」对话")


def test_shift_enter_makes_a_newline_and_enter_sends(chat: Chat, llm: ScriptedLLM) -> None:
    llm.script(text("收到两行。"))
    chat.open("weather")
    chat.composer.type("第一行")
    chat.composer.press("Shift+Enter")
    chat.composer.type("第二行")
    expect(chat.composer).to_have_value("第一行\n第二行")
    chat.composer.press("Enter")
    expect(chat.answers.last).to_have_text("收到两行。")
    assert llm.requests[0]["messages"][-1]["content"] == "第一行\n第二行"


def test_the_page_works_at_375_px_wide(chat: Chat, llm: ScriptedLLM) -> None:
    page = chat.page
    page.set_viewport_size({"width": 375, "height": 740})
    llm.script(
        tool_call("ask_input", ASK_CITY),
        tool_call("get_weather", {"location": "北京"}),
        text("北京今天晴，气温适宜，**适合出行**。"),
    )
    chat.open("weather")
    sidebar = page.get_by_role("complementary", name="会话")
    expect(sidebar).not_to_be_in_viewport()
    chat.send("查天气")

    box = chat.interrupt.get_by_label(ASK_CITY["message"])
    expect(box).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    chat.shot("narrow-interrupt")
    box.fill("北京")
    box.press("Enter")
    expect(chat.answers.last).to_contain_text("适合出行")
    expect(chat.tool("get_weather")).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    chat.shot("narrow-conversation")

    menu = page.get_by_role("button", name="打开会话列表")
    menu.click()
    expect(sidebar).to_be_in_viewport()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(sidebar.get_by_role("listitem")).to_have_count(1)
    chat.shot("narrow-sidebar")
    page.keyboard.press("Escape")
    expect(sidebar).not_to_be_in_viewport()
