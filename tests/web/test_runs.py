"""Runs outlive the page: a reload rejoins the run under way, the stop button cancels it
through the API, and a message sent during a run can wait for it or replace it."""

from __future__ import annotations

import pytest

import time

import httpx
from playwright.sync_api import Locator, expect

from tests.doubles.llm import ScriptedLLM, Turn, hang, text, tool_call
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# Streamed two characters every 50 ms: about five seconds, long enough to act mid-answer.
SLOW_ANSWER = (
    "北京今天晴，白天气温回升到二十五度左右，风力不大，空气质量良好，适合出门散步。"
    "傍晚以后气温下降明显，早晚温差接近十度，出门记得带一件外套。"
    "明天开始转为多云，后天可能有小雨，周末之前天气总体平稳，出行不受影响。"
    "如果要安排户外活动，建议选在今天或明天上午，避开后天的降雨时段。"
)
WAIT = "等待后发送"
STOP_AND_SEND = "停止并发送"


def slow(answer: str = SLOW_ANSWER) -> Turn:
    return text(answer, chunk_size=2, delay_s=0.05)


def run_statuses(server: ServerProcess, thread_id: str) -> list[str]:
    """The thread's runs as the API records them, newest first."""
    reply = httpx.get(f"{server.url}/api/threads/{thread_id}/runs", timeout=5)
    if reply.status_code == 404:  # no run of it admitted yet
        return []
    reply.raise_for_status()
    return [run["status"] for run in reply.json()]


def until_statuses(
    server: ServerProcess, thread_id: str, expected: list[str], within_s: float = 10.0
) -> None:
    """Poll the thread's run records until they read `expected` (newest first)."""
    deadline = time.monotonic() + within_s
    while (got := run_statuses(server, thread_id)) != expected:
        if time.monotonic() > deadline:
            raise AssertionError(f"run statuses stayed {got}, expected {expected}")
        time.sleep(0.05)


def run_choice(chat: Chat) -> Locator:
    """The question a message sent during a run asks."""
    return chat.page.get_by_role("group", name="上一条回答还没结束")


def test_reloading_the_page_mid_run_rejoins_the_run_and_shows_the_answer_completing(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(
        tool_call("get_weather", {"location": "北京"}, content="我先查一下北京的天气。"),
        slow(),
    )
    chat.open("weather")
    chat.send("北京天气怎么样？")
    expect(chat.tool("get_weather")).to_have_attribute("data-state", "done")
    expect(chat.answers.last).to_contain_text(SLOW_ANSWER[:4])

    chat.page.reload()

    # The page follows the run again: the answer is still streaming after the reload...
    expect(chat.page.locator(".msg-assistant.streaming")).to_have_count(1)
    expect(chat.stop_button).to_be_visible()
    # ...and completes, each part once: history and the replayed run do not add up.
    expect(chat.answers).to_have_text(["我先查一下北京的天气。", SLOW_ANSWER])
    chat.wait_idle()
    expect(chat.page.locator(".msg-user")).to_have_text(["北京天气怎么样？"])
    card = chat.tool("get_weather")
    expect(card).to_have_count(1)
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator(".tool-brief")).to_have_text("北京")
    expect(chat.errors).to_have_count(0)
    assert run_statuses(server, chat.thread_id) == ["success"]
    assert len(llm.requests) == 2  # the run went on through the reload, it did not restart

    # The finished thread reads back the same.
    chat.page.reload()
    expect(chat.answers).to_have_text(["我先查一下北京的天气。", SLOW_ANSWER])
    expect(chat.stop_button).to_be_hidden()


def test_the_stop_button_cancels_the_run_through_the_api_and_the_next_message_is_answered(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    cancels: list[str] = []
    chat.page.on(
        "request",
        lambda request: cancels.append(request.method) if request.url.endswith("/cancel") else None,
    )
    llm.script(hang(60, partial="让我慢慢想"))
    chat.open("weather")
    chat.send("慢慢想")
    expect(chat.answers.last).to_contain_text("让我慢慢想")

    chat.stop_button.click()

    expect(chat.page.locator(".notice-info")).to_contain_text("已停止")
    chat.wait_idle()
    expect(chat.answers).to_have_text(["让我慢慢想"])  # what was shown stays
    expect(chat.errors).to_have_count(0)
    assert cancels == ["POST"]
    until_statuses(server, chat.thread_id, ["cancelled"])

    llm.script(text("好的，我们继续。"))
    chat.send("继续")
    expect(chat.answers.last).to_have_text("好的，我们继续。")
    chat.wait_idle()
    expect(chat.errors).to_have_count(0)
    until_statuses(server, chat.thread_id, ["success", "cancelled"])


def test_a_run_rejoined_after_a_reload_is_stopped_by_the_stop_button_too(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(hang(60, partial="让我想想"))
    chat.open("weather")
    chat.send("慢慢想")
    expect(chat.answers.last).to_contain_text("让我想想")

    chat.page.reload()
    expect(chat.answers).to_have_text(["让我想想"])
    chat.stop_button.click()

    expect(chat.page.locator(".notice-info")).to_contain_text("已停止")
    chat.wait_idle()
    until_statuses(server, chat.thread_id, ["cancelled"])
    chat.page.reload()  # the stopped reply is the thread's now
    expect(chat.answers).to_have_text(["让我想想"])
    expect(chat.stop_button).to_be_hidden()


def test_a_stopped_reply_still_says_it_was_stopped_when_its_thread_is_reopened(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(hang(60, partial="让我慢慢想"))
    chat.open("weather")
    chat.send("慢慢想")
    expect(chat.answers.last).to_contain_text("让我慢慢想")
    chat.stop_button.click()
    chat.wait_idle()
    until_statuses(server, chat.thread_id, ["cancelled"])

    chat.page.reload()

    expect(chat.answers).to_have_text(["让我慢慢想"])
    notice = chat.page.locator(".notice-info")
    expect(notice).to_have_count(1)
    expect(notice).to_contain_text("已停止本次运行")


def test_a_message_sent_during_a_run_can_wait_for_the_run_and_is_answered_after_it(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(slow(), text("第二个问题的回答。"))
    chat.open("weather")
    chat.send("第一个问题")
    expect(chat.answers.last).to_contain_text(SLOW_ANSWER[:4])

    chat.send("第二个问题")
    choice = run_choice(chat)
    expect(choice).to_be_visible()
    expect(choice.get_by_role("button", name=STOP_AND_SEND)).to_be_visible()
    expect(choice.get_by_role("button", name=WAIT)).to_be_focused()
    chat.shot("run-choice")
    choice.get_by_role("button", name=WAIT).click()

    expect(choice).to_be_hidden()
    expect(chat.page.locator(".msg-user.is-queued")).to_have_text("第二个问题")
    chat.shot("run-queued")
    expect(chat.answers).to_have_text([SLOW_ANSWER, "第二个问题的回答。"])
    chat.wait_idle()
    # The waiting message moved below the answer it waited for.
    expect(chat.page.locator("#messages > .msg")).to_have_text(
        ["第一个问题", SLOW_ANSWER, "第二个问题", "第二个问题的回答。"]
    )
    expect(chat.page.locator(".msg-user.is-queued")).to_have_count(0)
    expect(chat.errors).to_have_count(0)
    until_statuses(server, chat.thread_id, ["success", "success"])
    # It ran after the first run had finished: the model saw the whole first answer.
    history = llm.requests[1]["messages"]
    assert {"role": "assistant", "content": SLOW_ANSWER} in [
        {"role": m["role"], "content": m.get("content")} for m in history
    ]


def test_a_reload_while_a_message_waits_follows_both_runs_and_shows_the_waiting_message(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(slow(), text("第二个问题的回答。"))
    chat.open("weather")
    chat.send("第一个问题")
    expect(chat.answers.last).to_contain_text(SLOW_ANSWER[:4])
    chat.send("第二个问题")
    run_choice(chat).get_by_role("button", name=WAIT).click()
    expect(chat.page.locator(".msg-user.is-queued")).to_have_text("第二个问题")
    assert run_statuses(server, chat.thread_id) == ["queued", "running"]

    chat.page.reload()

    expect(chat.page.locator(".msg-assistant.streaming")).to_have_count(1)
    expect(chat.page.locator("#messages > .msg")).to_have_text(
        ["第一个问题", SLOW_ANSWER, "第二个问题", "第二个问题的回答。"]
    )
    chat.wait_idle()
    expect(chat.errors).to_have_count(0)
    until_statuses(server, chat.thread_id, ["success", "success"])


def test_a_message_sent_during_a_run_can_stop_the_run_and_is_answered_at_once(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(hang(60, partial="这个问题很复杂"), text("换个简单的，马上回答。"))
    chat.open("weather")
    chat.send("一个很难的问题")
    expect(chat.answers.last).to_contain_text("这个问题很复杂")

    chat.send("换个简单的")
    choice = run_choice(chat)
    choice.get_by_role("button", name=STOP_AND_SEND).click()

    expect(chat.answers.last).to_have_text("换个简单的，马上回答。")
    chat.wait_idle()
    expect(chat.page.locator("#messages > .msg")).to_have_text(
        ["一个很难的问题", "这个问题很复杂", "换个简单的", "换个简单的，马上回答。"]
    )
    expect(chat.errors).to_have_count(0)
    until_statuses(server, chat.thread_id, ["success", "cancelled"])
    # The new run started from what the stopped one left, its shown text included.
    history = llm.requests[1]["messages"]
    assert {"role": "assistant", "content": "这个问题很复杂"} in [
        {"role": m["role"], "content": m.get("content")} for m in history
    ]


def test_the_question_asked_during_a_run_can_be_dismissed_and_keeps_the_text(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(slow())
    chat.open("weather")
    chat.send("第一个问题")
    expect(chat.answers.last).to_contain_text(SLOW_ANSWER[:4])

    chat.send("还没想好")
    choice = run_choice(chat)
    expect(choice).to_be_visible()
    chat.page.keyboard.press("Escape")

    expect(choice).to_be_hidden()
    expect(chat.composer).to_have_value("还没想好")
    expect(chat.composer).to_be_focused()
    expect(chat.page.locator(".msg-user")).to_have_text(["第一个问题"])
    expect(chat.answers).to_have_text([SLOW_ANSWER])
    chat.wait_idle()
