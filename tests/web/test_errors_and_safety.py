"""What goes wrong, shown inline, and the thread still works; nothing renders as HTML."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from graphs.model import MISSING_VARIABLE
from tests.doubles.llm import ScriptedLLM, error, hang, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat, literal, server_env, start_server

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

IMG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "<script>window.__pwned=2</script>"
ASK_CITY = {"message": "请问您想查询哪个城市的天气？", "placeholder": "例如：北京"}


def _assert_nothing_ran(page: Page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#messages img, #messages script, #messages iframe").count() == 0


def test_markup_from_the_user_a_tool_and_the_model_renders_as_text(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("get_weather", {"location": f"{IMG}{SCRIPT}"}),
        text(f"查询结果：{IMG}\n\n{SCRIPT}\n\n以上就是**全部**内容。"),
    )
    chat.open("weather")
    chat.send(f"查一下 {IMG} 的天气")

    answer = chat.answers.last
    expect(answer).to_contain_text(literal(IMG))
    expect(answer).to_contain_text(literal(SCRIPT))
    expect(answer.locator("strong")).to_have_text("全部")
    card = chat.tool("get_weather")
    expect(card).to_have_attribute("data-state", "failed")  # the result says the call failed
    card.locator("summary").click()
    expect(card.locator(".tool-pre").last).to_contain_text(
        literal(f"查询「{IMG}{SCRIPT}」天气失败")
    )
    expect(card.locator(".tool-pre").first).to_contain_text(literal("<img src=x onerror="))
    expect(chat.page.locator(".msg-user")).to_contain_text(literal(IMG))
    chat.wait_idle()
    _assert_nothing_ran(chat.page)

    # The same thread read back from the server goes through the history renderer.
    chat.page.reload()
    expect(chat.answers.last).to_contain_text(literal(IMG))
    expect(chat.tool("get_weather")).to_contain_text(literal(IMG))
    _assert_nothing_ran(chat.page)


def test_a_link_with_an_unsafe_target_shows_as_plain_text_and_a_safe_link_stays_a_link(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        text(
            "[点我](javascript:alert(1)) 或 ![图](javascript:alert(2))，"
            "详见[文档](https://example.com/docs)。"
        )
    )
    chat.open("weather")
    chat.send("给我一个链接")

    answer = chat.answers.last
    expect(answer).to_have_text("点我 或 图，详见文档。")
    expect(answer.locator("a")).to_have_count(1)
    expect(answer.get_by_role("link", name="文档")).to_have_attribute(
        "href", "https://example.com/docs"
    )
    chat.wait_idle()

    # The same answer read back from the server goes through the history renderer.
    chat.page.reload()
    answer = chat.answers.last
    expect(answer).to_have_text("点我 或 图，详见文档。")
    expect(answer.locator("a")).to_have_count(1)
    expect(answer.get_by_role("link", name="文档")).to_be_visible()


def test_a_model_failure_shows_the_run_error_and_the_next_message_works(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(error(500))
    chat.open("weather")
    chat.send("你好")

    expect(chat.errors).to_have_count(1)
    expect(chat.errors).to_contain_text("运行出错")
    expect(chat.errors).to_contain_text("500")
    chat.wait_idle()
    chat.shot("run-error")

    llm.script(text("你好！我是天气助手。"))
    chat.send("再试一次")
    expect(chat.answers.last).to_have_text("你好！我是天气助手。")
    expect(chat.page.locator(".msg-user")).to_have_text(["你好", "再试一次"])


def test_the_stop_button_aborts_the_run_and_the_thread_takes_the_next_message(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(hang(60, partial="让我想想"))
    chat.open("weather")
    chat.send("慢慢想")
    expect(chat.answers.last).to_contain_text("让我想想")
    expect(chat.page.locator("#progress")).to_be_visible()

    chat.stop_button.click()
    expect(chat.page.locator(".notice-info")).to_contain_text("已停止")
    chat.wait_idle()

    # Sent right away: the server may not have let go of the stopped run yet.
    llm.script(text("好的，我们继续。"))
    chat.send("继续")
    expect(chat.answers.last).to_have_text("好的，我们继续。")
    expect(chat.errors).to_have_count(0)


def test_network_loss_is_shown_inline_and_the_message_can_be_sent_again(
    chat: Chat, llm: ScriptedLLM
) -> None:
    chat.open("weather")
    chat.page.context.set_offline(True)
    chat.send("北京天气")

    expect(chat.errors).to_contain_text("网络连接中断")
    expect(chat.page.locator(".msg-user.is-unsent")).to_have_text("北京天气")
    expect(chat.composer).to_have_value("北京天气")

    chat.page.context.set_offline(False)
    llm.script(text("北京今天晴。"))
    chat.composer.press("Enter")
    expect(chat.answers.last).to_have_text("北京今天晴。")


def test_a_second_tab_sending_on_a_busy_thread_sees_the_conflict_inline(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(text("你好。"))
    chat.open("weather")
    chat.send("你好")
    expect(chat.answers.last).to_have_text("你好。")
    chat.wait_idle()
    # A tab that opened the thread before the run began does not know of it.
    other = Chat(chat.page.context.new_page(), chat.artifacts)
    other.page.goto("/")
    expect(other.page.locator(".msg-user")).to_have_text(["你好"])
    slow = "正在分析，" + "数据很多，" * 40 + "分析完毕。"
    llm.script(text(slow, chunk_size=2, delay_s=0.03))
    chat.send("慢慢想")
    expect(chat.answers.last).to_contain_text("正在分析")

    other.send("我又来了")
    expect(other.errors).to_contain_text("请求冲突")
    expect(other.errors).to_contain_text("already has a run in progress")
    expect(other.page.locator(".msg-user.is-unsent")).to_have_text("我又来了")

    # Once the first tab's run is over, the same message goes through.
    expect(chat.answers.last).to_contain_text("分析完毕。")
    chat.wait_idle()
    llm.script(text("这次可以了。"))
    other.composer.press("Enter")
    expect(other.answers.last).to_have_text("这次可以了。")


def test_an_answer_the_server_refuses_keeps_the_control_and_shows_its_message(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    llm.script(tool_call("ask_input", ASK_CITY), text("好的，查上海。"))
    chat.open("weather")
    chat.send("查天气")
    control = chat.interrupt
    expect(control).to_be_visible()
    interrupt_id = control.get_attribute("data-interrupt-id")

    # Someone answers it elsewhere (the CLI, a script) before this page does.
    elsewhere = httpx.post(
        f"{server.url}/api/chat",
        json={
            "graph": "weather",
            "threadId": chat.thread_id,
            "resume": [
                {"interruptId": interrupt_id, "status": "resolved", "payload": {"value": "上海"}}
            ],
        },
        timeout=15,
    )
    assert elsewhere.status_code == 200, elsewhere.text

    control.get_by_label(ASK_CITY["message"]).fill("北京")
    control.get_by_role("button", name="提交").click()

    error_line = control.locator(".interrupt-error")
    expect(error_line).to_contain_text("no pending interrupt")
    expect(control.get_by_role("button", name="提交")).to_be_enabled()
    expect(control.get_by_label(ASK_CITY["message"])).to_have_value("北京")

    error_line.get_by_role("button", name="刷新会话").click()
    expect(chat.interrupt).to_have_count(0)
    expect(chat.answers.last).to_have_text("好的，查上海。")
    expect(chat.page.locator(".interrupt.is-answered")).to_contain_text("上海")


@pytest.fixture
def server_with(
    built_ui: Path,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tushare_mcp: TushareMCP,
    tmp_path: Path,
) -> Iterator[Callable[..., ServerProcess]]:
    """Starts a server on the doubles whose environment differs: a value sets, None unsets."""
    started: list[ServerProcess] = []

    def start(**changes: str | None) -> ServerProcess:
        data_dir = tmp_path / f"server-{len(started)}"
        env = server_env(_llm_server, _meteo_server, tushare_mcp, data_dir)
        for name, value in changes.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        started.append(start_server(data_dir, env))
        return started[-1]

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def keyed_server(server_with: Callable[..., ServerProcess]) -> ServerProcess:
    return server_with(AGENT_API_KEY="s3cret-key")


def test_a_missing_api_key_asks_for_it_and_the_key_the_tab_keeps_is_sent_as_bearer(
    chat: Chat, llm: ScriptedLLM, keyed_server: ServerProcess
) -> None:
    page = chat.page
    page.goto(keyed_server.url)
    key_field = page.get_by_label("密钥或令牌", exact=True)
    expect(key_field).to_be_visible()
    expect(key_field).to_be_focused()
    chat.shot("unauthorized")

    key_field.fill("s3cret-key")
    page.get_by_role("button", name="登录", exact=True).click()
    expect(page.locator(".welcome")).to_be_visible()

    llm.script(text("钥匙对了。"))
    chat.send("你好")
    expect(chat.answers.last).to_have_text("钥匙对了。")
    # The tab's storage only: no script of the origin finds it after the tab is gone.
    assert page.evaluate("sessionStorage.getItem('react-agent.apiKey')") == "s3cret-key"
    assert page.evaluate("localStorage.getItem('react-agent.apiKey')") is None


def test_a_key_an_older_page_left_in_local_storage_leaves_it_on_load_and_still_works(
    chat: Chat, llm: ScriptedLLM, keyed_server: ServerProcess
) -> None:
    page = chat.page
    page.goto(keyed_server.url)
    expect(page.get_by_label("密钥或令牌", exact=True)).to_be_visible()
    page.evaluate("localStorage.setItem('react-agent.apiKey', 's3cret-key')")

    page.reload()
    expect(page.locator(".welcome")).to_be_visible()
    llm.script(text("钥匙还在。"))
    chat.send("你好")

    expect(chat.answers.last).to_have_text("钥匙还在。")
    assert page.evaluate("localStorage.getItem('react-agent.apiKey')") is None
    assert page.evaluate("sessionStorage.getItem('react-agent.apiKey')") == "s3cret-key"


@pytest.fixture
def keyless_server(server_with: Callable[..., ServerProcess]) -> ServerProcess:
    """A server whose environment has no OPENAI_API_KEY (its runs end in model_not_configured)."""
    return server_with(OPENAI_API_KEY=None)


def test_a_server_without_a_model_key_is_explained_in_chinese_naming_the_variable_to_set(
    chat: Chat, llm: ScriptedLLM, keyless_server: ServerProcess
) -> None:
    page = chat.page
    page.goto(keyless_server.url)
    expect(page.locator(".welcome")).to_be_visible()
    chat.send("你好")

    expect(chat.errors).to_have_count(1)
    expect(chat.errors).to_contain_text("运行出错：模型未配置")
    # The terminal says the same, word for word (the server's own message).
    expect(chat.errors).to_contain_text(MISSING_VARIABLE.format(var="OPENAI_API_KEY"))
    expect(chat.errors).not_to_contain_text("is not set")
    expect(chat.errors).not_to_contain_text("OPENAI_MODEL")
    chat.wait_idle()
    assert llm.requests == []
