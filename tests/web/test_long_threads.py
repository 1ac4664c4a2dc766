"""A long thread in the page: its latest messages first, older ones as the reader scrolls
up, with the message being read kept where it was."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx
import pytest
from playwright.sync_api import Locator, Page, Route, expect

from tests.doubles.llm import ScriptedLLM, text
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

TURNS = 150  # 300 messages: three pages of 100
OLDER_PAGE = re.compile(r"/api/threads/[^/?]+\?before=")
WAIT_S = 15.0


def question(n: int) -> str:
    return f"问题{n:03d}"


def make_long_thread(server: ServerProcess, llm: ScriptedLLM) -> str:
    """A weather thread of TURNS questions and answers, made through `/api/chat`."""
    thread_id = "long-thread-in-the-page"
    with httpx.Client(base_url=server.url, timeout=30) as client:
        for n in range(TURNS):
            llm.script(text(f"回答{n:03d}"))
            body = {"graph": "weather", "threadId": thread_id, "message": question(n)}
            assert client.post("/api/chat", json=body).status_code == 200
    return thread_id


# 150 runs through /api/chat, each reading and writing a growing thread: about a minute
# on a busy machine, before the browser starts.
@pytest.mark.timeout(360)
def test_scrolling_up_a_long_thread_brings_older_messages_and_keeps_the_place(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    page = chat.page
    make_long_thread(server, llm)
    asked: list[str] = []
    page.on(
        "request",
        lambda request: asked.extend([request.url] if OLDER_PAGE.search(request.url) else []),
    )
    held: list[Route] = []  # the next older page's request, held until the test lets it go
    page.route(OLDER_PAGE, lambda route: held.append(route))

    page.goto("/")
    page.get_by_role("navigation", name="历史会话").get_by_role("listitem").first.click()
    questions = page.locator(".msg-user")
    # The latest page: the last 50 questions and answers, the newest at the bottom.
    expect(questions).to_have_count(50)
    expect(questions.first).to_have_text(question(100))
    expect(chat.answers.last).to_be_in_viewport()
    assert asked == []

    conversation = page.locator("#conversation")
    reading = questions.filter(has_text=question(100))
    conversation.evaluate("el => el.scrollTo({ top: 0, behavior: 'instant' })")
    expect(page.locator(".older")).to_have_text("正在加载更早的消息…")
    wait_for(page, lambda: bool(held), "the older page's request")
    place = box_top(reading)

    held.pop().continue_()
    expect(questions).to_have_count(100)
    expect(questions.first).to_have_text(question(50))
    expect(page.locator(".older")).to_have_count(0)
    assert abs(box_top(reading) - place) <= 1, "the message being read moved"
    assert conversation.evaluate("el => el.scrollTop") > 1000

    page.unroute(OLDER_PAGE)
    conversation.evaluate("el => el.scrollTo({ top: 0, behavior: 'instant' })")
    expect(questions).to_have_count(TURNS)
    expect(questions).to_have_text([question(n) for n in range(TURNS)])
    expect(chat.answers).to_have_count(TURNS)
    # The thread's start is shown: scrolling to the top again asks for nothing.
    conversation.evaluate("el => el.scrollTo({ top: 0, behavior: 'instant' })")
    expect(questions.first).to_be_in_viewport()
    assert len(asked) == 2, asked


def box_top(locator: Locator) -> float:
    box = locator.bounding_box()
    assert box is not None
    return float(box["y"])


def wait_for(page: Page, check: Callable[[], bool], what: str) -> None:
    """Poll `check()` (state Playwright's event handlers fill in) until it holds."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        page.wait_for_timeout(20)  # lets Playwright deliver its events; a polling interval
