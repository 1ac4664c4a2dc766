"""`chat -m`, `graphs`, `--help`, and errors as one clear line with no traceback."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from graphs.model import MISSING_VARIABLE
from tests.cli.conftest import CHAT_PROMPT, THREAD_ID, Terminal, run_cli
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.processes import ServerProcess, refused_port

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

ANSWER = "北京今天晴，气温 12°C。"
I18N = Path(__file__).resolve().parents[2] / "web" / "src" / "i18n.ts"


def one_line(stderr: str) -> str:
    """The one error line a failing command wrote; fails on more, or on a traceback."""
    lines = [line for line in stderr.splitlines() if line.startswith("错误")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_one_shot_prints_the_answer_and_exits_0(
    cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text(ANSWER))
    done = run_cli(cli_env, "chat", "weather", "-m", "北京今天天气怎么样")
    assert done.returncode == 0, done.stderr
    # Piped stdout carries the answer alone; the thread id and tool lines go to stderr.
    assert done.stdout.strip() == ANSWER
    assert THREAD_ID.search(done.stderr)
    assert "查询天气(location=北京)" in done.stderr


def test_a_one_shot_that_needs_an_answer_without_a_terminal_exits_3_and_stays_resumable(
    cli: Cli, cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(tool_call("ask_input", {"message": "请问要查询哪个城市？", "placeholder": "北京"}))
    done = run_cli(cli_env, "chat", "weather", "-m", "查天气")
    assert done.returncode == 3
    assert "请问要查询哪个城市？" in done.stderr
    assert "标准输入不是终端" in done.stderr
    match = THREAD_ID.search(done.stderr)
    assert match is not None

    llm.script(tool_call("get_weather", {"location": "北京"}), text(ANSWER))
    term = cli("chat", "weather", "--thread", match.group(1))
    term.expect("请问要查询哪个城市？")
    term.line("北京")
    term.expect(ANSWER)
    term.expect(CHAT_PROMPT)


def test_without_a_terminal_each_stdin_line_is_a_message_until_eof(
    cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(text("第一个回答。"), text("第二个回答。"))
    done = run_cli(cli_env, "chat", "weather", stdin="你好\n\n再说一句\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["第一个回答。", "第二个回答。"]
    users = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"]
    assert users == ["你好", "再说一句"]


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "OPENAI_MODEL"])
def test_a_missing_model_setting_is_one_chinese_line_naming_it_the_page_s_text_and_exit_1(
    cli_env: dict[str, str], llm: ScriptedLLM, variable: str
) -> None:
    env = {k: v for k, v in cli_env.items() if k != variable}
    done = run_cli(env, "chat", "weather", "-m", "你好")
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"模型未配置：需要设置环境变量 {variable}（或写入 .env）" in line
    assert MISSING_VARIABLE.format(var=variable) in line  # the page's Chinese text, word for word
    assert done.stdout == ""
    assert llm.requests == []


def test_a_server_without_a_model_setting_is_explained_by_the_terminal_in_the_same_line(
    cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    server = ServerProcess({k: v for k, v in cli_env.items() if k != "OPENAI_MODEL"})
    try:
        done = run_cli(cli_env, "chat", "weather", "--server", server.url, "-m", "你好")
    finally:
        server.stop()
    assert done.returncode == 1
    assert MISSING_VARIABLE.format(var="OPENAI_MODEL") in one_line(done.stderr)
    assert "not set" not in done.stderr
    assert llm.requests == []


def test_the_page_s_chinese_text_for_a_missing_model_setting_is_the_terminal_s() -> None:
    source = I18N.read_text(encoding="utf-8")
    found = re.search(r"modelNotConfigured: \(variable: string\) =>\s*`([^`]*)`", source)
    assert found is not None, f"no Chinese modelNotConfigured in {I18N}"
    assert found.group(1).replace("${variable}", "{var}") == MISSING_VARIABLE


def test_a_model_server_that_cannot_be_reached_is_named_with_its_variable_and_no_password(
    cli_env: dict[str, str],
) -> None:
    with refused_port() as port:
        base = f"http://someone:pa55-WORD@127.0.0.1:{port}/v1?api-key=q-SECRET"
        env = {**cli_env, "OPENAI_BASE_URL": base, "OPENAI_MAX_RETRIES": "0"}
        done = run_cli(env, "chat", "weather", "-m", "你好")
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"无法连接到模型服务 http://127.0.0.1:{port}/v1" in line
    assert "OPENAI_BASE_URL" in line
    assert "pa55-WORD" not in done.stderr and "q-SECRET" not in done.stderr


def test_a_url_that_is_no_model_server_says_it_usually_ends_with_v1(
    cli_env: dict[str, str], meteo: FakeOpenMeteo
) -> None:
    env = {**cli_env, "OPENAI_BASE_URL": meteo.url, "OPENAI_MAX_RETRIES": "0"}
    done = run_cli(env, "chat", "weather", "-m", "你好")
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert f"{meteo.url}/chat/completions 回答 HTTP 404" in line
    assert "OPENAI_BASE_URL（通常以 /v1 结尾）" in line


def test_an_unknown_thread_is_one_line_and_exit_1(cli_env: dict[str, str]) -> None:
    done = run_cli(cli_env, "chat", "weather", "--thread", "no-such-thread")
    assert done.returncode == 1
    assert "找不到会话 no-such-thread" in one_line(done.stderr)


def test_an_unreachable_server_is_one_line_and_exit_1(cli_env: dict[str, str]) -> None:
    with refused_port() as port:
        url = f"http://127.0.0.1:{port}"
        done = run_cli(cli_env, "chat", "weather", "--server", url, "-m", "你好")
    assert done.returncode == 1
    assert f"无法连接服务 {url}" in one_line(done.stderr)


def test_graphs_lists_the_agents(cli_env: dict[str, str]) -> None:
    done = run_cli(cli_env, "graphs")
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    assert listed == ["weather", "tushare"]
    assert "天气" in done.stdout


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ((), r"\{serve,chat,graphs,tools,prune,users\}"),
        (("chat",), r"--thread ID.*--server URL.*-m TEXT"),
        (("graphs",), r"--server URL"),
        (("tools",), r"usage: react-agent tools"),
        (("prune",), r"--keep N.*--idle-days D.*--dry-run"),
    ],
)
def test_help_is_available_for_every_command(
    cli_env: dict[str, str], args: tuple[str, ...], shown: str
) -> None:
    done = run_cli(cli_env, *args, "--help")
    assert done.returncode == 0
    assert re.search(shown, done.stdout, re.DOTALL), done.stdout
