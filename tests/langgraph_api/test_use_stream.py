"""LangGraph's React hook against `react-agent serve`: a page built on the run-scoped
`useStream` of @langchain/langgraph-sdk/react (js/page/), as agent-chat-ui uses it, in
headless Chromium. The page is served from an origin of its own, allowed by
AGENT_CORS_ORIGINS, and signs in with the SDK's `apiKey` (both backends)."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import Page, expect

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM
from tests.langgraph_api.pages import (  # noqa: F401
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


# agent-chat-ui fetches the thread's history (where a pending question is also found);
# without it the hook learns of the question from the stream alone.
@pytest.mark.parametrize("history", ["1", "0"], ids=["with-history", "stream-only"])
def test_use_stream_shows_the_question_takes_the_answer_and_streams_the_reply(
    page: Page,  # noqa: F811
    page_server: ServerThread,  # noqa: F811
    server: ServerProcess,  # noqa: F811
    llm: ScriptedLLM,
    api: Api,
    history: str,
) -> None:
    script_the_weather_question(llm)
    calls = calls_to(page, server)
    query = urlencode(
        {"apiUrl": server.url, "apiKey": API_KEY, "assistantId": "weather", "history": history}
    )
    page.goto(f"{page_server.url}/index.html?{query}")

    question, messages = ask_the_weather(page)
    expect(page.get_by_label("answer")).to_have_attribute("placeholder", "北京")
    answer_shanghai(page, question, messages)

    expect(page.locator("main")).to_have_attribute("data-loading", "false")
    thread_id = page.locator("main").get_attribute("data-thread-id")
    assert thread_id
    expect(messages.first).to_have_text("查天气")
    kinds = messages.evaluate_all("items => items.map(item => item.dataset.type)")
    assert kinds == ["human", "ai", "tool", "ai", "tool", "ai"]
    expect(messages.nth(2)).to_have_text("用户回答：上海")

    # The hook spoke the run-scoped API: two runs streamed on the thread it made.
    runs = [call for call in calls if call == f"POST /threads/{thread_id}/runs/stream"]
    assert "POST /threads" in calls and len(runs) == 2, calls
    # The hook learnt each run from its Content-Location (an exposed header).
    last_run = api.http.get(f"/api/threads/{thread_id}/runs").json()[0]["runId"]
    expect(page.locator("main")).to_have_attribute("data-run-id", last_run)
    # One thread, two protocols: the page's API reads what the hook wrote.
    read_back = api.http.get(f"/api/threads/{thread_id}").json()
    assert read_back["interrupts"] == []
    assert read_back["messages"][-1]["content"] == "上海今天晴。"
