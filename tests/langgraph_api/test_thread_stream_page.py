"""@langchain/react's `useStream`, which speaks LangGraph's thread-scoped streaming
protocol, against `react-agent serve` in headless Chromium (js/page/v2.jsx): the
question, its answer, the reply, on both backends. The page is served from an origin of
its own, allowed by AGENT_CORS_ORIGINS, and signs in with the SDK's `apiKey`."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import Browser, Page, Request, expect, sync_playwright
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.langgraph_api.js_build import PAGE, built_js_clients
from tests.service.conftest import API_KEY, Api, Backend, serving
from tests.support.processes import ServerProcess
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.processes  # real servers, and a browser
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def page_server() -> Iterator[ServerThread]:
    """The built pages, served from their own origin (a port of their own)."""
    built_js_clients()
    app = Starlette(routes=[Mount("/", StaticFiles(directory=PAGE, html=True))])
    with ServerThread(app) as static:
        yield static


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
    page_server: ServerThread,
) -> Iterator[ServerProcess]:
    """The module's server, allowing the page's origin (and that one only)."""
    data_dir = tmp_path_factory.mktemp("thread-stream-page")
    with serving(
        _llm_server, _meteo_server, data_dir, backend, AGENT_CORS_ORIGINS=page_server.url
    ) as process:
        yield process


# Playwright's sync API keeps an event loop running on this thread while it is started
# (see test_use_stream.py): it is stopped with this module.
@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """Debian's Chromium (Playwright never downloads a browser here)."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: run `make test` (its `browser` step installs it)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context()
    yield context.new_page()
    context.close()


def test_react_use_stream_shows_the_question_takes_the_answer_and_shows_the_reply(
    page: Page, page_server: ServerThread, server: ServerProcess, llm: ScriptedLLM, api: Api
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
    page: Page, page_server: ServerThread, server: ServerProcess, llm: ScriptedLLM
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
