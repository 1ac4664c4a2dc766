"""@langchain/react's `useStream`, which speaks LangGraph's thread-scoped streaming
protocol, against `react-agent serve` in headless Chromium (js/page/v2.jsx): the
question, its answer, the reply, on both backends. The page is served from an origin of
its own, allowed by AGENT_CORS_ORIGINS, and signs in with the SDK's `apiKey`."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import Page, expect

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM
from tests.langgraph_api.pages import (  # noqa: F401
    WAIT_MS,
    answer_shanghai,
    ask_the_weather,
    calls_to,
    chromium,
    page,
    page_server,
    script_the_weather_question,
    server,
)
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
    script_the_weather_question(llm)
    calls = calls_to(page, server)
    query = urlencode({"apiUrl": server.url, "apiKey": API_KEY, "assistantId": "weather"})
    page.goto(f"{page_server.url}/v2.html?{query}")

    question, messages = ask_the_weather(page)
    answer_shanghai(page, question, messages)

    expect(page.locator("main")).to_have_attribute("data-loading", "false")
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
    script_the_weather_question(llm)
    query = {"apiUrl": server.url, "apiKey": API_KEY, "assistantId": "weather"}
    page.goto(f"{page_server.url}/v2.html?{urlencode(query)}")
    question, messages = ask_the_weather(page)
    thread_id = page.locator("main").get_attribute("data-thread-id")
    assert thread_id

    # A reload: the hook reads the thread's state and streams, and finds the question.
    page.goto(f"{page_server.url}/v2.html?{urlencode({**query, 'threadId': thread_id})}")
    expect(question).to_have_text("哪个城市？", timeout=WAIT_MS)
    answer_shanghai(page, question, messages)
