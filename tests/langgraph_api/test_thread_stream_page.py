"""@langchain/react's `useStream`, which speaks LangGraph's thread-scoped streaming
protocol, against `react-agent serve` in headless Chromium (js/page/v2.jsx): the
question, its answer, the reply, on both backends. The page is served from an origin of
its own, allowed by AGENT_CORS_ORIGINS, and signs in with the SDK's `apiKey`."""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import Page, Request, expect

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.langgraph_api.pages import WAIT_MS, chromium, page, page_server, server  # noqa: F401
from tests.service.conftest import API_KEY, Api
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, and a browser


def test_react_use_stream_shows_the_question_takes_the_answer_and_shows_the_reply(
    page: Page,  # noqa: F811
    page_server: ServerThread,  # noqa: F811
    server: ServerProcess,  # noqa: F811
    llm: ScriptedLLM,
    api: Api,
) -> None:
    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天晴。"),
    )
    calls: list[str] = []

    def record(request: Request) -> None:
        if request.url.startswith(server.url):
            calls.append(f"{request.method} {urlsplit(request.url).path}")

    page.on("request", record)
    query = urlencode({"apiUrl": server.url, "apiKey": API_KEY, "assistantId": "weather"})
    page.goto(f"{page_server.url}/v2.html?{query}")

    page.get_by_label("message", exact=True).fill("查天气")
    page.get_by_role("button", name="Send").click()
    question = page.get_by_test_id("question")
    expect(question).to_have_text("哪个城市？", timeout=WAIT_MS)
    messages = page.get_by_role("list", name="messages").locator("li")
    expect(messages.first).to_have_text("查天气")

    page.get_by_label("answer").fill("上海")
    page.get_by_role("button", name="Answer").click()

    expect(messages.last).to_have_text("上海今天晴。", timeout=WAIT_MS)
    expect(question).to_have_count(0)
    expect(page.locator("main")).to_have_attribute("data-loading", "false")
    expect(page.get_by_role("alert")).to_have_count(0)
    thread_id = page.locator("main").get_attribute("data-thread-id")
    assert thread_id
    kinds = messages.evaluate_all("items => items.map(item => item.dataset.type)")
    assert kinds == ["human", "ai", "tool", "ai", "tool", "ai"]
    expect(messages.nth(2)).to_have_text("用户回答：上海")

    # The hook spoke the thread-scoped protocol: commands and event streams, no run route.
    assert calls.count(f"POST /threads/{thread_id}/commands") == 2, calls
    assert f"POST /threads/{thread_id}/stream/events" in calls
    assert not [call for call in calls if "/runs" in call], calls
    # One thread, two protocols: the page's API reads what the hook wrote.
    read_back = api.http.get(f"/api/threads/{thread_id}").json()
    assert read_back["interrupts"] == []
    assert read_back["messages"][-1]["content"] == "上海今天晴。"


def test_react_use_stream_reopening_a_thread_shows_its_pending_question_and_takes_the_answer(
    page: Page,  # noqa: F811
    page_server: ServerThread,  # noqa: F811
    server: ServerProcess,  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天晴。"),
    )
    query = {"apiUrl": server.url, "apiKey": API_KEY, "assistantId": "weather"}
    page.goto(f"{page_server.url}/v2.html?{urlencode(query)}")
    page.get_by_label("message", exact=True).fill("查天气")
    page.get_by_role("button", name="Send").click()
    question = page.get_by_test_id("question")
    expect(question).to_have_text("哪个城市？", timeout=WAIT_MS)
    thread_id = page.locator("main").get_attribute("data-thread-id")
    assert thread_id

    # A reload: the hook reads the thread's state and streams, and finds the question.
    page.goto(f"{page_server.url}/v2.html?{urlencode({**query, 'threadId': thread_id})}")
    expect(question).to_have_text("哪个城市？", timeout=WAIT_MS)
    messages = page.get_by_role("list", name="messages").locator("li")
    expect(messages.first).to_have_text("查天气")
    page.get_by_label("answer").fill("上海")
    page.get_by_role("button", name="Answer").click()

    expect(messages.last).to_have_text("上海今天晴。", timeout=WAIT_MS)
    expect(question).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)
