"""Signing in on the page (issue 29): a server that asks for a key shows the sign-in
screen; a user's key shows that user and their own threads only; signing out forgets the
key; a wrong key is refused on the screen; a key revoked mid-session brings the screen
back without losing the message being typed; behind a trusted proxy nothing is asked.

One server with AGENT_API_KEY (the admin) for the module: each test signs in as users of
its own, so the threads of one never show in another's list. Users' keys are made in the
server's database (tests/support/user_keys.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.doubles.llm import ScriptedLLM, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.support import user_keys
from tests.web.conftest import Chat, WebServer, server_env, start_server

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ADMIN_KEY = "sign-in-admin-key"
# How long a server keeps a key it has looked up (AGENT_RUN_LEASE_S bounds it): short,
# so that a revoked key is refused within a few seconds of the test.
KEY_CACHE_S = "2"
KEY_IN_TAB = "sessionStorage.getItem('react-agent.apiKey')"
KEY_KEPT = "localStorage.getItem('react-agent.apiKey')"


@pytest.fixture(scope="module")
def keyed_server(
    built_ui: Path,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tushare_mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebServer]:
    data_dir = tmp_path_factory.mktemp("sign-in-server")
    env = server_env(
        _llm_server,
        _meteo_server,
        tushare_mcp,
        data_dir,
        AGENT_API_KEY=ADMIN_KEY,
        AGENT_RUN_LEASE_S=KEY_CACHE_S,
    )
    process = start_server(data_dir, env)
    yield process
    process.stop()


@pytest.fixture
def browse(browser: Browser, artifacts: Path) -> Iterator[Callable[..., Chat]]:
    """A page in a browser context of its own on `url` (`browse(url, lang="en",
    extra_http_headers=...)`); no uncaught script error may happen on any."""
    contexts: list[Any] = []
    crashes: list[str] = []

    def make(url: str, lang: str = "zh", **overrides: Any) -> Chat:
        context = browser.new_context(
            base_url=url,
            viewport={"width": 1280, "height": 860},
            locale="zh-CN" if lang == "zh" else "en-US",
            **overrides,
        )
        context.on("weberror", lambda error: crashes.append(str(error.error)))
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        expect.set_options(timeout=15_000)
        return Chat(page, artifacts, lang)

    yield make
    for context in contexts:
        context.close()
    assert crashes == []


def agent_db(server: WebServer) -> str:
    return str(server.data_dir / "agent.sqlite")


def start_thread(server: WebServer, key: str, message: str) -> str:
    """A thread of the key's user, made over HTTP; its id."""
    answer = httpx.post(
        f"{server.url}/api/chat",
        json={"graph": "weather", "message": message},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    thread_id = answer.json()["threadId"]
    assert isinstance(thread_id, str)
    return thread_id


def sign_in_screen(page: Page) -> Any:
    return page.get_by_role("dialog", name="登录")


def sign_in(page: Page, key: str) -> None:
    page.get_by_label("密钥或令牌", exact=True).fill(key)
    page.get_by_role("button", name="登录", exact=True).click()


def test_a_user_signs_in_with_their_key_and_sees_only_their_own_threads(
    browse: Callable[..., Chat], keyed_server: WebServer, llm: ScriptedLLM
) -> None:
    alice = user_keys.add_user(agent_db(keyed_server), "alice")
    bob = user_keys.add_user(agent_db(keyed_server), "bob")
    llm.script(text("好的。"), text("好的。"), text("好的。"))
    start_thread(keyed_server, alice, "爱丽丝的出差计划")
    start_thread(keyed_server, bob, "鲍勃的秘密")
    start_thread(keyed_server, ADMIN_KEY, "管理员的笔记")

    chat = browse(keyed_server.url)
    page = chat.page
    page.goto("/")
    screen = sign_in_screen(page)
    expect(screen).to_be_visible()
    expect(screen).to_contain_text("这个服务需要登录")
    expect(page.get_by_label("密钥或令牌", exact=True)).to_be_focused()
    chat.shot("sign-in")

    sign_in(page, alice)
    expect(screen).to_be_hidden()
    account = page.locator("#account")
    expect(account).to_contain_text("alice")
    expect(account.get_by_text("管理员")).to_be_hidden()
    expect(page.get_by_role("button", name="退出登录")).to_be_visible()
    threads = page.locator("#thread-list")
    expect(threads).to_contain_text("爱丽丝的出差计划")
    expect(threads.locator("li")).to_have_count(1)
    expect(threads).not_to_contain_text("鲍勃的秘密")
    expect(threads).not_to_contain_text("管理员的笔记")
    chat.shot("signed-in")

    # Her own thread opens; a message goes out as her (the next list still shows hers only).
    threads.get_by_text("爱丽丝的出差计划").click()
    expect(chat.answers.last).to_have_text("好的。")
    llm.script(text("已记下。"))
    chat.send("再加一站")
    expect(chat.answers.last).to_have_text("已记下。")
    expect(threads.locator("li")).to_have_count(1)
    # The key is the tab's only: no script of the origin finds it after the tab is gone.
    assert page.evaluate(KEY_IN_TAB) == alice
    assert page.evaluate(KEY_KEPT) is None


def test_signing_out_forgets_the_key_and_the_list_and_an_admin_then_sees_everyone_s(
    browse: Callable[..., Chat], keyed_server: WebServer, llm: ScriptedLLM
) -> None:
    carol = user_keys.add_user(agent_db(keyed_server), "carol")
    llm.script(text("好的。"))
    start_thread(keyed_server, carol, "卡罗尔的清单")

    chat = browse(keyed_server.url)
    page = chat.page
    page.goto("/")
    sign_in(page, carol)
    expect(page.locator("#thread-list")).to_contain_text("卡罗尔的清单")

    page.get_by_role("button", name="退出登录").click()
    screen = sign_in_screen(page)
    expect(screen).to_be_visible()
    assert page.evaluate(KEY_IN_TAB) is None
    # Nothing of hers stays in the browser for the next person.
    assert page.evaluate("localStorage.getItem('react-agent.threads')") is None
    page.reload()
    expect(screen).to_be_visible()

    # The admin key: the admin mark, and everyone's threads (carol's among them).
    sign_in(page, ADMIN_KEY)
    expect(screen).to_be_hidden()
    account = page.locator("#account")
    expect(account).to_contain_text("admin")
    expect(account.get_by_text("管理员")).to_be_visible()
    expect(page.locator("#thread-list")).to_contain_text("卡罗尔的清单")


def test_a_wrong_key_is_refused_on_the_screen_which_stays_and_keeps_what_was_pasted(
    browse: Callable[..., Chat], keyed_server: WebServer
) -> None:
    chat = browse(keyed_server.url)
    page = chat.page
    page.goto("/")
    screen = sign_in_screen(page)
    field = page.get_by_label("密钥或令牌", exact=True)

    page.get_by_role("button", name="登录", exact=True).click()
    expect(screen.get_by_role("alert")).to_have_text("请先粘贴密钥或令牌。")

    wrong = "ra_000000000000_" + "x" * 43
    sign_in(page, wrong)
    alert = screen.get_by_role("alert")
    expect(alert).to_contain_text("服务拒绝了这个密钥或令牌")
    expect(alert).to_contain_text("not valid")  # the server's own reason
    expect(screen).to_be_visible()
    expect(field).to_have_value(wrong)
    expect(field).to_be_focused()
    assert page.evaluate(KEY_IN_TAB) is None
    chat.shot("sign-in-refused")


def test_a_wrong_key_is_refused_in_english_on_an_english_browser(
    browse: Callable[..., Chat], keyed_server: WebServer
) -> None:
    page = browse(keyed_server.url, lang="en").page
    page.goto("/")
    screen = page.get_by_role("dialog", name="Sign in")
    expect(screen).to_contain_text("This service asks you to sign in")
    page.get_by_label("Key or token", exact=True).fill("not-a-key")
    page.get_by_role("button", name="Sign in", exact=True).click()
    expect(screen.get_by_role("alert")).to_contain_text("The service refused this key or token")


def test_a_key_revoked_mid_session_brings_the_sign_in_back_and_the_message_being_typed_stays(
    browse: Callable[..., Chat], keyed_server: WebServer, llm: ScriptedLLM
) -> None:
    db = agent_db(keyed_server)
    dave = user_keys.add_user(db, "dave")
    chat = browse(keyed_server.url)
    page = chat.page
    page.goto("/")
    sign_in(page, dave)
    expect(page.locator(".welcome")).to_be_visible()
    draft = "帮我查一下明天杭州的天气，还有"
    chat.composer.fill(draft)

    # His key is replaced by a new one: the old one is refused at the next request (the
    # sidebar's list, read every few seconds), and the screen comes back over the page.
    new_key = user_keys.rotate(db, "dave")
    screen = sign_in_screen(page)
    expect(screen).to_be_visible(timeout=20_000)
    expect(screen).to_contain_text("登录已失效")
    assert page.evaluate(KEY_IN_TAB) is None
    chat.shot("sign-in-again")

    sign_in(page, new_key)
    expect(screen).to_be_hidden()
    expect(chat.composer).to_have_value(draft)
    expect(page.locator("#account")).to_contain_text("dave")

    llm.script(text("明天杭州多云。"))
    chat.composer.press("Enter")
    expect(chat.answers.last).to_have_text("明天杭州多云。")
    assert page.evaluate(KEY_IN_TAB) == new_key


@pytest.fixture(scope="module")
def proxied_server(
    built_ui: Path,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tushare_mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebServer]:
    """A server behind a trusted proxy on this machine, which names the user in a header."""
    data_dir = tmp_path_factory.mktemp("proxied-server")
    env = server_env(
        _llm_server,
        _meteo_server,
        tushare_mcp,
        data_dir,
        AGENT_TRUSTED_USER_HEADER="X-Forwarded-User",
        AGENT_TRUSTED_PROXIES="127.0.0.1",
    )
    process = start_server(data_dir, env)
    yield process
    process.stop()


def test_behind_a_trusted_proxy_nothing_is_asked_and_there_is_nothing_to_sign_out_of(
    browse: Callable[..., Chat], proxied_server: WebServer, llm: ScriptedLLM
) -> None:
    chat = browse(proxied_server.url, extra_http_headers={"X-Forwarded-User": "erin"})
    page = chat.page
    chat.open()
    expect(page.locator("#account")).to_contain_text("proxy:erin")
    expect(sign_in_screen(page)).to_be_hidden()
    expect(page.get_by_role("button", name="退出登录")).to_be_hidden()

    llm.script(text("你好，erin。"))
    chat.send("你好")
    expect(chat.answers.last).to_have_text("你好，erin。")
    assert page.evaluate(KEY_IN_TAB) is None
