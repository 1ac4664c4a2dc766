"""Browser tests: Debian's Chromium (headless, via pytest-playwright) against a real
`react-agent serve` process wired to the LLM, Open-Meteo and Tushare MCP doubles.

One server serves the whole session; every test opens a fresh browser context (so a
fresh localStorage, hence a new thread), starts with no threads on the server (the
sidebar lists the server's), and the doubles are reset between tests.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    BrowserType,
    Locator,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from tests.support.env import env_for_subprocess
from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.processes import ServerProcess
from tests.support.webui import BuildFailed, build_web_ui

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
TUSHARE_TOKEN = "web-ui-test-token"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Debian's Chromium: Playwright never downloads a browser here."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: run `make test` (its `browser` step installs it)")
    return {**browser_type_launch_args, "executable_path": executable, "args": CHROMIUM_ARGS}


# Playwright's sync API keeps an event loop marked as running on the main thread for as
# long as it is started, and pytest-asyncio cannot run a test while one is. pytest-
# playwright starts it once per session; these overrides end it with this package, so
# the async tests of other packages run normally whatever the order.


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser_type(playwright: Playwright, browser_name: str) -> BrowserType:
    browser_type: BrowserType = getattr(playwright, browser_name)
    return browser_type


@pytest.fixture(scope="package")
def launch_browser(
    browser_type_launch_args: dict[str, Any], browser_type: BrowserType
) -> Callable[..., Browser]:
    def launch(**kwargs: Any) -> Browser:
        return browser_type.launch(**{**browser_type_launch_args, **kwargs})

    return launch


@pytest.fixture(scope="package")
def browser(launch_browser: Callable[..., Browser]) -> Iterator[Browser]:
    browser = launch_browser()
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def built_ui() -> Path:
    """The web UI's index.html, built from the current sources (`make web`)."""
    try:
        return build_web_ui()
    except BuildFailed as failed:
        pytest.fail(str(failed), pytrace=False)


@pytest.fixture(scope="session")
def tushare_mcp() -> Iterator[TushareMCP]:
    with TushareMCP(token=TUSHARE_TOKEN) as server:
        yield server


class WebServer(ServerProcess):
    """The browser tests' `react-agent serve`; `data_dir` holds its SQLite file and reports."""

    def __init__(self, env: dict[str, str], data_dir: Path) -> None:
        super().__init__(env)
        self.data_dir = data_dir


def start_server(data_dir: Path, env: dict[str, str]) -> WebServer:
    """Start `react-agent serve` with its data under `data_dir`; returns once /healthz answers.
    (Ask for `built_ui` first: the server serves the UI that is built when it starts.)"""
    data_dir.mkdir(parents=True, exist_ok=True)
    return WebServer(env, data_dir)


def server_env(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, mcp: TushareMCP, data_dir: Path, **extra: str
) -> dict[str, str]:
    """The server's environment: every external service is a double; no model retries."""
    return env_for_subprocess(
        llm,
        meteo,
        data_dir,
        TUSHARE_TOKEN=TUSHARE_TOKEN,
        TUSHARE_MCP_URL=mcp.url,
        OPENAI_MAX_RETRIES="0",
        **extra,
    )


@pytest.fixture(scope="session")
def server(
    built_ui: Path,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tushare_mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebServer]:
    data_dir = tmp_path_factory.mktemp("web-server")
    process = start_server(data_dir, server_env(_llm_server, _meteo_server, tushare_mcp, data_dir))
    yield process
    process.stop()


@pytest.fixture(scope="session")
def base_url(server: ServerProcess) -> str:
    """pytest-playwright resolves `page.goto("/")` against this."""
    return server.url


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


# The page's own words the helpers below look for, per UI language (web/src/i18n.ts).
WORDS = {
    "zh": {"agent": "智能体", "message": "消息", "stop": "停止"},
    "en": {"agent": "Agent", "message": "Message", "stop": "Stop"},
}


class Chat:
    """The chat page, in the words a user would use (`lang`: the page's UI language)."""

    def __init__(self, page: Page, artifacts: Path, lang: str = "zh") -> None:
        self.page = page
        self.artifacts = artifacts
        self.words = WORDS[lang]

    def open(self, graph: str = "weather") -> Chat:
        self.page.goto("/")
        picker = self.page.get_by_label(self.words["agent"], exact=True)
        expect(picker.locator(f'option[value="{graph}"]')).to_have_count(1)
        if picker.input_value() != graph:
            picker.select_option(graph)
        expect(self.page.locator(".welcome")).to_be_visible()
        return self

    @property
    def composer(self) -> Locator:
        return self.page.get_by_label(self.words["message"], exact=True)

    def send(self, text: str) -> None:
        self.composer.fill(text)
        self.composer.press("Enter")

    @property
    def interrupt(self) -> Locator:
        """The pending (unanswered) interrupt control."""
        return self.page.locator(".interrupt:not(.is-answered)")

    def tool(self, name: str) -> Locator:
        return self.page.locator(f'.tool[data-tool-name="{name}"]')

    @property
    def answers(self) -> Locator:
        return self.page.locator(".msg-assistant")

    @property
    def errors(self) -> Locator:
        return self.page.locator(".notice-error")

    @property
    def stop_button(self) -> Locator:
        return self.page.get_by_role("button", name=self.words["stop"], exact=True)

    def wait_idle(self) -> None:
        expect(self.stop_button).to_be_hidden()
        expect(self.page.locator("#progress")).to_be_hidden()

    @property
    def thread_id(self) -> str:
        value = self.page.evaluate("localStorage.getItem('react-agent.current')")
        assert isinstance(value, str) and value
        return value

    def shot(self, name: str, of: Locator | None = None) -> Path:
        """A screenshot artifact of the page (or of the element `of`)."""
        path = self.artifacts / f"{name}.png"
        (of or self.page).screenshot(path=str(path), animations="disabled")
        return path


def forget_all_threads(server: ServerProcess, within_s: float = 10.0) -> None:
    """Delete every thread the server lists (the sidebar shows them all).

    A thread whose run a previous test left ending (a released hang) refuses deletion
    with 409 for a moment: its runs are cancelled and the delete tried again.
    """
    deadline = time.monotonic() + within_s
    with httpx.Client(base_url=server.url, timeout=5) as client:
        while threads := client.get("/api/threads", params={"limit": 200}).json():
            for thread in threads:
                thread_id = thread["threadId"]
                if client.delete(f"/api/threads/{thread_id}").status_code != 409:
                    continue
                for run in client.get(f"/api/threads/{thread_id}/runs").json():
                    if run["status"] in ("queued", "running"):
                        client.post(f"/api/threads/{thread_id}/runs/{run['runId']}/cancel")
            if time.monotonic() > deadline:
                pytest.fail(f"threads left on the server: {threads}")
            time.sleep(0.05)


@pytest.fixture
def no_threads(server: ServerProcess) -> None:
    """The server starts the test with no threads."""
    forget_all_threads(server)


@pytest.fixture
def chat(page: Page, artifacts: Path, server: ServerProcess, no_threads: None) -> Iterator[Chat]:
    """The page; at the end, no uncaught script error may have happened on it."""
    page.set_default_timeout(15_000)
    expect.set_options(timeout=15_000)
    crashes: list[str] = []
    page.context.on("weberror", lambda error: crashes.append(str(error.error)))
    yield Chat(page, artifacts)
    assert crashes == []


@pytest.fixture
def new_chat(
    browser: Browser, browser_context_args: dict[str, Any], artifacts: Path, no_threads: None
) -> Iterator[Callable[..., Chat]]:
    """Another page in a context of its own: `new_chat(locale="en-US", color_scheme="dark",
    viewport={...})`. Like `chat`, no uncaught script error may happen on it."""
    contexts: list[Any] = []
    crashes: list[str] = []

    def make(lang: str | None = None, **overrides: Any) -> Chat:
        context = browser.new_context(**{**browser_context_args, **overrides})
        context.on("weberror", lambda error: crashes.append(str(error.error)))
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        locale = str(overrides.get("locale", browser_context_args["locale"]))
        return Chat(page, artifacts, lang or ("zh" if locale.startswith("zh") else "en"))

    yield make
    for context in contexts:
        context.close()
    assert crashes == []


def literal(text: str) -> re.Pattern[str]:
    """A pattern matching `text` literally (for Playwright's text assertions)."""
    return re.compile(re.escape(text))


@pytest.fixture(scope="package")
def browser_context_args(base_url: str) -> dict[str, Any]:
    """Every test's browser context: the server, a desktop window, Chinese locale.

    (Replaces pytest-playwright's session fixture, which needs its session `playwright`.)
    """
    return {
        "base_url": base_url,
        "viewport": {"width": 1280, "height": 860},
        "locale": "zh-CN",
        "device_scale_factor": 1,
    }


def until_thread_gone(server: ServerProcess, thread_id: str, within_s: float = 15.0) -> None:
    """Poll until the server answers 404 for the thread: the page sends a delete only once
    its undo has run out (web/src/page.ts, UNDO_DELETE_MS)."""
    deadline = time.monotonic() + within_s
    while (got := httpx.get(f"{server.url}/api/threads/{thread_id}", timeout=5).status_code) != 404:
        if time.monotonic() > deadline:
            raise AssertionError(f"thread {thread_id} still answers {got}")
        time.sleep(0.05)
