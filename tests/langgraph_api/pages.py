"""The pages of tests/langgraph_api/js/ (LangGraph's React hooks) in headless Chromium:
the fixtures the page tests share. The pages are served from an origin of their own,
allowed by AGENT_CORS_ORIGINS on the module's server (and that origin only)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Locator, Page, Request, expect, sync_playwright
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.langgraph_api.js_build import PAGE, built_js_clients
from tests.service.conftest import Backend, serving
from tests.support.processes import ServerProcess
from tests.web.conftest import CHROMIUM, CHROMIUM_ARGS

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
    """The module's server, allowing the pages' origin (and that one only)."""
    data_dir = tmp_path_factory.mktemp("pages")
    with serving(
        _llm_server, _meteo_server, data_dir, backend, AGENT_CORS_ORIGINS=page_server.url
    ) as process:
        yield process


# Playwright's sync API keeps an event loop running on this thread while it is started,
# and pytest-asyncio cannot run a test then: it is stopped with the module using it, so
# the async tests of the other modules run normally whatever the order.
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


def script_the_weather_question(llm: ScriptedLLM) -> None:
    """The model asks which city, then looks up Shanghai's weather and answers."""
    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天晴。"),
    )


def calls_to(page: Page, server: ServerProcess) -> list[str]:
    """The `METHOD /path` of each request the page makes to `server`, as it makes them."""
    calls: list[str] = []

    def record(request: Request) -> None:
        if request.url.startswith(server.url):
            calls.append(f"{request.method} {urlsplit(request.url).path}")

    page.on("request", record)
    return calls


def ask_the_weather(page: Page) -> tuple[Locator, Locator]:
    """Send "查天气" and wait for the question: (the question, the messages' items)."""
    page.get_by_label("message", exact=True).fill("查天气")
    page.get_by_role("button", name="Send").click()
    question = page.get_by_test_id("question")
    expect(question).to_have_text("哪个城市？", timeout=WAIT_MS)
    return question, page.get_by_role("list", name="messages").locator("li")


def answer_shanghai(page: Page, question: Locator, messages: Locator) -> None:
    """Answer the question with "上海" and wait for the reply, the question gone."""
    expect(messages.first).to_have_text("查天气")
    page.get_by_label("answer").fill("上海")
    page.get_by_role("button", name="Answer").click()
    expect(messages.last).to_have_text("上海今天晴。", timeout=WAIT_MS)
    expect(question).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)
