"""The sidebar lists the server's threads: ones made by the API (the CLI, a script) or by
another browser show up without a reload, each with the state of its latest run; a thread
renamed or deleted in the sidebar stays so on the server, hence after a reload."""

from __future__ import annotations

import pytest

import re
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
from playwright.sync_api import Locator, expect

from tests.doubles.llm import ScriptedLLM, error, hang, text, tool_call
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat, until_thread_gone
from tests.web.test_runs import until_statuses

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def rows(chat: Chat) -> Locator:
    return chat.page.get_by_role("navigation", name="历史会话").get_by_role("listitem")


def row(chat: Chat, thread_id: str) -> Locator:
    return chat.page.locator(f'li.thread[data-thread-id="{thread_id}"]')


def api_chat(server: ServerProcess, message: str, **extra: Any) -> httpx.Response:
    """One `/api/chat` run, as the CLI or a script makes it."""
    body = {"graph": "weather", "message": message, **extra}
    return httpx.post(f"{server.url}/api/chat", json=body, timeout=30)


def listed(server: ServerProcess) -> dict[str, dict[str, Any]]:
    reply = httpx.get(f"{server.url}/api/threads", timeout=5)
    reply.raise_for_status()
    return {thread["threadId"]: thread for thread in reply.json()}


def test_threads_made_through_the_api_or_another_browser_show_up_without_a_reload(
    chat: Chat, new_chat: Callable[..., Chat], llm: ScriptedLLM, server: ServerProcess
) -> None:
    chat.open("weather")
    expect(chat.page.locator("#thread-empty")).to_be_visible()

    llm.script(text("命令行问题的回答。"))
    made = api_chat(server, "从命令行来的问题")
    assert made.status_code == 200, made.text
    cli_thread = made.json()["threadId"]

    # The page reads the server's list again by itself.
    expect(row(chat, cli_thread)).to_contain_text("从命令行来的问题")
    expect(row(chat, cli_thread)).to_contain_text("天气助手")
    expect(row(chat, cli_thread).locator(".thread-status")).to_have_count(0)  # it went well

    # A second browser sees it too, and what the second browser starts shows up here.
    other = new_chat()
    other.open("tushare")
    expect(row(other, cli_thread)).to_contain_text("从命令行来的问题")
    llm.script(text("另一个浏览器的回答。"))
    other.send("另一个浏览器里的问题")
    expect(other.answers.last).to_have_text("另一个浏览器的回答。")
    expect(row(chat, other.thread_id)).to_contain_text("另一个浏览器里的问题")
    expect(row(chat, other.thread_id)).to_contain_text("A 股分析")
    expect(rows(chat).first).to_contain_text("另一个浏览器里的问题")  # newest first
    chat.shot("sidebar-from-the-server")

    # Opening a thread made elsewhere shows its history from the server.
    row(chat, cli_thread).locator(".thread-open").click()
    expect(chat.answers).to_have_text(["命令行问题的回答。"])
    expect(chat.page.get_by_role("heading", level=1)).to_have_text("从命令行来的问题")
    expect(chat.page.get_by_label("智能体", exact=True)).to_have_value("weather")


def test_a_thread_renamed_and_another_deleted_in_the_sidebar_stay_so_after_a_reload(
    chat: Chat, new_chat: Callable[..., Chat], llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(text("第一个回答。"), text("第二个回答。"))
    first = api_chat(server, "第一个问题").json()["threadId"]
    second = api_chat(server, "第二个问题").json()["threadId"]
    chat.open("weather")
    expect(rows(chat)).to_have_count(2)
    row(chat, first).locator(".thread-open").click()
    expect(chat.answers).to_have_text(["第一个回答。"])

    # Rename with the keyboard alone: the button, a text box, Enter.
    rename = chat.page.get_by_role("button", name="重命名会话：第一个问题")
    rename.focus()
    chat.page.keyboard.press("Enter")
    box = chat.page.get_by_role("textbox", name="会话名称")
    expect(box).to_be_focused()
    expect(box).to_have_value("第一个问题")
    chat.page.keyboard.type("改过的名字")  # the old title was selected: typing replaces it
    chat.shot("sidebar-rename")
    chat.page.keyboard.press("Enter")
    expect(box).to_have_count(0)
    expect(row(chat, first).locator(".thread-name")).to_have_text("改过的名字")
    expect(chat.page.get_by_role("heading", level=1)).to_have_text("改过的名字")
    expect(chat.page.get_by_role("button", name="重命名会话：改过的名字")).to_be_focused()
    assert listed(server)[first]["title"] == "改过的名字"

    # Escape leaves the title as it was.
    chat.page.keyboard.press("Enter")
    chat.page.keyboard.type("不要这个名字")
    chat.page.keyboard.press("Escape")
    expect(chat.page.get_by_role("textbox", name="会话名称")).to_have_count(0)
    expect(row(chat, first).locator(".thread-name")).to_have_text("改过的名字")

    chat.page.get_by_role("button", name="删除会话：第二个问题").click()
    expect(row(chat, second)).to_have_count(0)
    until_thread_gone(server, second)

    # Another browser and a reload both read the server's list.
    other = new_chat()
    other.open("weather")
    expect(rows(other)).to_have_count(1)
    expect(row(other, first)).to_contain_text("改过的名字")
    chat.page.reload()
    expect(rows(chat)).to_have_count(1)
    expect(row(chat, first).locator(".thread-name")).to_have_text("改过的名字")
    expect(chat.page.get_by_role("heading", level=1)).to_have_text("改过的名字")
    expect(chat.answers).to_have_text(["第一个回答。"])
    assert httpx.get(f"{server.url}/api/threads/{second}", timeout=5).status_code == 404


def deletes(chat: Chat) -> list[str]:
    """The thread ids of the DELETE requests the page sends, as it sends them."""
    sent: list[str] = []
    chat.page.on(
        "request",
        lambda request: (
            sent.append(request.url.rsplit("/", 1)[-1]) if request.method == "DELETE" else None
        ),
    )
    return sent


def test_a_deleted_thread_comes_back_with_undo_and_the_server_keeps_it(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(text("留着的回答。"), text("另一个回答。"))
    kept = api_chat(server, "留着的问题").json()["threadId"]
    other = api_chat(server, "另一个问题").json()["threadId"]
    chat.open("weather")
    sent = deletes(chat)
    row(chat, kept).locator(".thread-open").click()
    expect(chat.answers).to_have_text(["留着的回答。"])

    chat.page.get_by_role("button", name="删除会话：留着的问题").click()
    expect(row(chat, kept)).to_have_count(0)  # gone from the list at once
    expect(chat.page.locator(".welcome")).to_be_visible()
    toast = chat.page.locator(".toast")
    expect(toast).to_contain_text("已删除「留着的问题」")
    chat.shot("sidebar-delete-undo")
    toast.get_by_role("button", name="撤销").click()

    expect(toast).to_have_count(0)
    expect(row(chat, kept)).to_contain_text("留着的问题")
    expect(chat.answers).to_have_text(["留着的回答。"])  # back in the thread it had open
    # A later delete runs out after the undone one would have: only it reaches the server.
    with chat.page.expect_request(lambda r: r.method == "DELETE", timeout=15_000):
        chat.page.get_by_role("button", name="删除会话：另一个问题").click()
    until_thread_gone(server, other)
    assert sent == [other]
    assert httpx.get(f"{server.url}/api/threads/{kept}", timeout=5).status_code == 200
    chat.page.reload()
    expect(row(chat, kept)).to_contain_text("留着的问题")


def test_a_deleted_thread_is_deleted_on_the_server_once_its_undo_runs_out(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(text("要删的回答。"))
    doomed = api_chat(server, "要删的问题").json()["threadId"]
    chat.open("weather")
    sent = deletes(chat)
    expect(row(chat, doomed)).to_contain_text("要删的问题")

    chat.page.get_by_role("button", name="删除会话：要删的问题").click()

    expect(row(chat, doomed)).to_have_count(0)
    expect(chat.page.locator(".toast")).to_be_visible()
    assert sent == [], "nothing is sent while the undo is offered"
    until_thread_gone(server, doomed)
    expect(chat.page.locator(".toast")).to_have_count(0)
    assert sent == [doomed]
    expect(row(chat, doomed)).to_have_count(0)


def test_each_thread_shows_whether_its_run_is_running_waiting_for_you_stopped_or_failed(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(
        text("好的。"),
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        error(500),
    )
    done = api_chat(server, "一切顺利").json()["threadId"]
    waiting = api_chat(server, "问我一个问题").json()["threadId"]
    failed_reply = api_chat(server, "会失败的问题")
    assert failed_reply.status_code == 502, failed_reply.text
    failed = next(t for t, s in listed(server).items() if s["title"] == "会失败的问题")

    chat.open("weather")
    expect(rows(chat)).to_have_count(3)
    badge = lambda thread_id: row(chat, thread_id).locator(".thread-status")  # noqa: E731
    expect(badge(done)).to_have_count(0)
    expect(badge(waiting)).to_have_text("等你回答")
    expect(badge(waiting)).to_have_attribute("data-status", "waiting")
    expect(badge(failed)).to_have_text("失败")
    expect(badge(failed)).to_have_attribute("data-status", "failed")

    # A run going on elsewhere shows as running, then as stopped once cancelled.
    llm.script(hang(60, partial="慢慢来"))
    thread_id, run_id = "sidebar-running-thread", "sidebar-running-run"
    ids = {"threadId": thread_id, "runId": run_id}
    background = threading.Thread(target=api_chat, args=(server, "一个很慢的问题"), kwargs=ids)
    background.start()
    try:
        expect(badge(thread_id)).to_have_text("运行中")
        expect(badge(thread_id)).to_have_attribute("data-status", "running")
        chat.shot("sidebar-badges-running")
        cancel = f"{server.url}/api/threads/{thread_id}/runs/{run_id}/cancel"
        assert httpx.post(cancel, timeout=5).status_code == 202
        until_statuses(server, thread_id, ["cancelled"])
    finally:
        background.join(timeout=30)
    expect(badge(thread_id)).to_have_text("已停止")
    expect(badge(thread_id)).to_have_attribute("data-status", "stopped")
    chat.shot("sidebar-badges")

    # Answering the question here clears its badge.
    row(chat, waiting).locator(".thread-open").click()
    llm.script(text("北京晴。"))
    box = chat.interrupt.get_by_label("哪个城市？")
    box.fill("北京")
    box.press("Enter")
    expect(chat.answers.last).to_have_text("北京晴。")
    expect(badge(waiting)).to_have_count(0)


def thread_in_url(chat: Chat) -> str | None:
    query = parse_qs(urlparse(chat.page.url).query)
    return query.get("thread", [None])[0]


def test_the_open_thread_is_in_the_address_so_a_link_or_a_reload_opens_it(
    chat: Chat, new_chat: Callable[..., Chat], llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(text("北京的回答。"), text("上海的回答。"))
    beijing = api_chat(server, "北京天气").json()["threadId"]
    shanghai = api_chat(server, "上海天气").json()["threadId"]
    chat.open("weather")
    assert thread_in_url(chat) is None  # a new chat is not on the server yet

    row(chat, beijing).locator(".thread-open").click()
    expect(chat.answers).to_have_text(["北京的回答。"])
    expect(chat.page).to_have_url(re.compile(rf"[?&]thread={beijing}"))
    chat.page.reload()
    expect(chat.answers).to_have_text(["北京的回答。"])
    assert thread_in_url(chat) == beijing

    # The address wins over the thread this browser had open last.
    chat.page.goto(f"/?thread={shanghai}")
    expect(chat.answers).to_have_text(["上海的回答。"])
    expect(chat.page.get_by_role("heading", level=1)).to_have_text("上海天气")

    # A browser that never saw the thread opens it from the link.
    other = new_chat()
    other.page.goto(f"/?thread={beijing}")
    expect(other.answers).to_have_text(["北京的回答。"])
    expect(other.page.get_by_role("heading", level=1)).to_have_text("北京天气")

    chat.page.get_by_role("button", name="新对话").click()
    expect(chat.page.locator(".welcome")).to_be_visible()
    expect(chat.page).not_to_have_url(re.compile(r"[?&]thread="))


def test_the_search_box_shows_only_the_threads_whose_title_holds_the_words(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(text("一。"), text("二。"), text("三。"))
    for question in ("北京明天下雨吗", "上海周末天气", "Beijing air quality"):
        assert api_chat(server, question).status_code == 200
    chat.open("weather")
    expect(rows(chat)).to_have_count(3)
    search = chat.page.get_by_role("searchbox", name="搜索会话")

    search.fill("北京")
    expect(rows(chat)).to_have_text([re.compile("北京明天下雨吗")])
    search.fill("beijing")  # any case
    expect(rows(chat)).to_have_text([re.compile("Beijing air quality")])
    search.fill("广州")
    expect(rows(chat)).to_have_count(0)
    expect(chat.page.locator("#thread-empty")).to_have_text("没有标题匹配的会话")
    chat.shot("sidebar-search")
    search.fill("")
    expect(rows(chat)).to_have_count(3)
    expect(chat.page.locator("#thread-empty")).to_be_hidden()
