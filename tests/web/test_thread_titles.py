"""The sidebar shows the title the model gave a thread after its first exchange, and
marks the threads a terminal (`react-agent chat`) started."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Locator, expect

from tests.cli.conftest import THREAD_ID, run_cli
from tests.doubles.llm import ScriptedLLM, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.env import env_for_subprocess
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat, WebServer, server_env, start_server

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def row(chat: Chat, thread_id: str) -> Locator:
    return chat.page.locator(f'li.thread[data-thread-id="{thread_id}"]')


@pytest.fixture
def titling_server(
    built_ui: Path,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tushare_mcp: TushareMCP,
    tmp_path: Path,
) -> Iterator[WebServer]:
    """A server of this test's own with titles on (the session's has them off)."""
    env = server_env(_llm_server, _meteo_server, tushare_mcp, tmp_path, AGENT_THREAD_TITLES="true")
    process = start_server(tmp_path, env)
    yield process
    process.stop()


def test_the_sidebar_and_the_heading_show_the_title_the_model_gave_after_the_first_answer(
    chat: Chat, llm: ScriptedLLM, titling_server: WebServer
) -> None:
    llm.script(text("北京明天晴，最高 13 度。"), text("北京明天天气"))
    chat.page.goto(f"{titling_server.url}/")
    expect(chat.page.locator(".welcome")).to_be_visible()

    chat.send("明天北京怎么样")
    expect(chat.answers.last).to_have_text("北京明天晴，最高 13 度。")
    thread_id = chat.thread_id

    # The page's next read of the list brings the model's title, without a reload.
    expect(row(chat, thread_id).locator(".thread-name")).to_have_text("北京明天天气")
    expect(chat.page.get_by_role("heading", level=1)).to_have_text("北京明天天气")
    chat.page.get_by_role("searchbox").fill("明天天气")
    expect(row(chat, thread_id)).to_be_visible()
    chat.shot("sidebar-model-title")


def test_a_thread_the_terminal_started_is_marked_in_the_sidebar_with_a_tooltip(
    chat: Chat,
    new_chat: Callable[..., Chat],
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    server: ServerProcess,
    tmp_path: Path,
) -> None:
    chat.open("weather")
    llm.script(text("终端里的回答。"), text("网页接口的回答。"))
    env = env_for_subprocess(llm, meteo, tmp_path)
    done = run_cli(env, "chat", "weather", "--server", server.url, "-m", "终端里问的问题")
    assert done.returncode == 0, done.stderr
    match = THREAD_ID.search(done.stderr)
    assert match is not None, done.stderr
    from_terminal = match.group(1)
    made = httpx.post(
        f"{server.url}/api/chat", json={"graph": "weather", "message": "脚本里问的问题"}, timeout=30
    )
    assert made.status_code == 200, made.text
    from_api = made.json()["threadId"]

    mark = row(chat, from_terminal).locator(".thread-origin")
    expect(mark).to_have_text("终端 · ")
    expect(mark).to_have_attribute("title", "在终端里用 react-agent chat 开始的会话")
    expect(row(chat, from_api)).to_contain_text("脚本里问的问题")
    expect(row(chat, from_api).locator(".thread-origin")).to_have_count(0)
    chat.shot("sidebar-terminal-mark", of=row(chat, from_terminal))

    english = new_chat(locale="en-US")
    english.open("weather")
    english_mark = row(english, from_terminal).locator(".thread-origin")
    expect(english_mark).to_have_text("terminal · ")
    expect(english_mark).to_have_attribute("title", "Started in a terminal with react-agent chat")
