"""The pages of tests/langgraph_api/js/ (LangGraph's React hooks) in headless Chromium:
the fixtures the page tests share. The pages are served from an origin of their own,
allowed by AGENT_CORS_ORIGINS on the module's server (and that origin only)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from tests.doubles._server import ServerThread
from tests.doubles.llm import ScriptedLLM
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
