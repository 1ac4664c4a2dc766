"""`react-agent chat` in a pseudo-terminal: streaming, tool spinners, every interrupt prompt."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import CHAT_PROMPT, CTRL_C, CTRL_D, DOWN, Terminal
from tests.doubles.llm import ScriptedLLM, hang, text, tool_call, tool_calls
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.support.processes import REACT_AGENT

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

ASK_CITY = {"message": "请问要查询哪个城市？", "placeholder": "北京 / Shanghai"}
TUSHARE_TOKEN = "tushare-test-token"
BEIJING_ANSWER = "北京今天晴，气温 12°C，适合出门。"


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool messages the model was sent in one request."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def lines_with(screen: str, part: str) -> list[str]:
    """The lines of `screen` (escape sequences removed) that contain `part`, stripped."""
    return [line.strip() for line in screen.splitlines() if part in line]


@pytest.mark.parametrize("on_path", [False, True], ids=["venv-not-on-path", "venv-on-path"])
def test_the_start_banner_prints_the_continue_command_as_this_shell_can_run_it(
    cli: Cli, cli_env: dict[str, str], on_path: bool
) -> None:
    venv_bin = str(Path(REACT_AGENT).parent)
    others = [d for d in cli_env.get("PATH", "/usr/bin:/bin").split(":") if d != venv_bin]
    path = ":".join([venv_bin, *others] if on_path else others)
    term = cli("chat", "weather", env={**cli_env, "PATH": path}, columns=110)
    screen = term.expect(CHAT_PROMPT)
    [command] = lines_with(screen, "--thread")
    program = "react-agent" if on_path else ".venv/bin/react-agent"  # run from the project
    assert re.fullmatch(rf"{re.escape(program)} chat weather --thread [0-9a-f]{{32}}", command)
    term.line("/exit")
    assert term.exit_code() == 0


def test_the_weather_flow_asks_for_the_city_shows_the_spinner_and_streams_the_answer(
    cli: Cli, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        tool_call("ask_input", ASK_CITY),
        tool_call("get_weather", {"location": "北京"}),
        text(BEIJING_ANSWER),
    )
    term = cli("chat", "weather")
    term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("查天气")
    term.expect("请问要查询哪个城市？")
    term.expect("北京 / Shanghai")  # the placeholder, shown before anything is typed
    term.line("")
    term.expect("请输入非空文本")  # an invalid answer is refused here and asked again
    term.expect("请问要查询哪个城市？")
    term.line("北京")
    term.expect("正在执行 查询天气...")
    term.expect("查询天气(location=北京)")  # the one-line result summary
    term.expect(BEIJING_ANSWER)
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0
    assert tool_results(llm.requests[1]) == ["用户回答：北京"]
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("39.9075", "116.39723")
    ]


def test_a_select_is_answered_with_the_arrow_keys_and_leaves_only_its_echo_line(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_choice", {"message": "想看哪个城市？", "options": ["北京", "上海", "广州"]}),
        text("好的，上海。"),
    )
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("帮我选个城市")
    before = term.expect("? 想看哪个城市？")
    assert not before.endswith(" "), repr(before[-40:])  # the prompt starts at the margin
    term.expect("广州")
    term.send(DOWN)
    term.expect("上海")  # the list redrawn with the marker on 上海
    term.send("\r")
    after = term.expect("好的，上海。")
    assert lines_with(after, "想看哪个城市？") == ["? 想看哪个城市？ 上海"]
    assert "北京" not in after  # the option list is not drawn again, nor left on screen
    term.expect(CHAT_PROMPT)
    assert tool_results(llm.requests[1]) == ["用户选择：上海"]


def test_a_multi_select_ticks_with_space_and_refuses_fewer_than_min(
    cli: Cli, llm: ScriptedLLM
) -> None:
    options = {"message": "要对比哪些城市？", "options": ["北京", "上海", "广州"], "min": 2}
    llm.script(tool_call("ask_multi_choice", options), text("对比北京和广州。"))
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("对比几个城市")
    term.expect("要对比哪些城市？")
    term.send(" ")  # tick 北京
    term.send("\r")
    term.expect("至少选择 2 项")
    term.send("3 ")  # a digit moves to 广州, space ticks it
    term.send("\r")
    term.expect("? 要对比哪些城市？ 北京、广州")  # the echo, like the text prompt's
    term.expect("对比北京和广州。")
    assert tool_results(llm.requests[1]) == ["用户选择：北京、广州"]


def test_ctrl_c_at_a_prompt_cancels_that_question(cli: Cli, llm: ScriptedLLM) -> None:
    llm.script(tool_call("ask_input", ASK_CITY), text("好的，不查了。"))
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("查天气")
    term.expect("请问要查询哪个城市？")
    term.send(CTRL_C)
    term.expect("好的，不查了。")
    term.expect(CHAT_PROMPT)
    assert tool_results(llm.requests[1]) == ["用户取消了操作"]


def test_a_cli_killed_at_a_question_leaves_it_for_the_next_cli_to_answer(
    cli: Cli, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(tool_call("ask_input", ASK_CITY))
    first = cli("chat", "weather")
    thread = first.thread_id()
    first.expect(CHAT_PROMPT)
    first.line("查天气")
    first.expect("请问要查询哪个城市？")
    first.child.kill(signal.SIGKILL)
    first.child.wait()

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天多云。"))
    second = cli("chat", "weather", "--thread", thread)
    second.expect("查天气")  # the history comes back first
    second.expect("请问要查询哪个城市？")
    second.line("上海")
    second.expect("上海今天多云。")
    second.expect(CHAT_PROMPT)
    second.line("/exit")
    assert second.exit_code() == 0
    assert tool_results(llm.requests[1]) == ["用户回答：上海"]


def test_ctrl_c_stops_a_slow_reply_and_the_next_message_works(cli: Cli, llm: ScriptedLLM) -> None:
    llm.script(hang(60, partial="让我慢慢想想"))
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("讲个长故事")
    term.expect("让我慢慢想想")
    term.send(CTRL_C)
    term.expect("已停止")
    term.expect(CHAT_PROMPT)
    llm.script(text("这次很快。"))
    term.line("换个短的")
    term.expect("这次很快。")
    term.expect(CHAT_PROMPT)
    assert [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "user"][-1] == (
        "换个短的"
    )


def test_ctrl_d_leaves_the_chat(cli: Cli) -> None:
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.send(CTRL_D)
    assert term.exit_code() == 0


def test_declining_the_confirm_gate_keeps_the_sensitive_tool_from_running(
    cli: Cli, cli_env: dict[str, str], llm: ScriptedLLM, data_dir: Path
) -> None:
    report = {"title": "平安银行分析", "markdown": "# 平安银行\n\n量价平稳。"}
    llm.script(tool_call("save_report", report), text("好的，报告没有保存。"))
    with TushareMCP(token=TUSHARE_TOKEN) as mcp:
        env = {**cli_env, "TUSHARE_TOKEN": TUSHARE_TOKEN, "TUSHARE_MCP_URL": mcp.url}
        term = cli("chat", "tushare", env=env)
        term.expect(CHAT_PROMPT)
        term.line("把分析存成报告")
        term.expect("确认执行 save_report ?")
        term.expect("save_report")
        term.expect("sensitive")
        term.expect("平安银行分析")  # the arguments are shown
        term.expect("确认执行？[y/N]")
        term.line("n")
        term.expect("? 确认执行？ 否")  # the echo, like the text prompt's
        term.expect("好的，报告没有保存。")
        term.expect(CHAT_PROMPT)
    assert tool_results(llm.requests[1]) == ["用户拒绝执行 save_report：该工具没有运行。"]
    reports = data_dir / "reports"
    assert not reports.exists() or not any(reports.iterdir())


def test_parallel_questions_are_asked_in_turn_and_answered_in_one_resume(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_calls(
            [
                ("ask_input", {"message": "出发城市？", "placeholder": "北京"}),
                ("ask_input", {"message": "到达城市？", "placeholder": "上海"}),
            ]
        ),
        text("从广州到深圳。"),
    )
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("规划行程")
    term.expect("出发城市？")
    term.line("广州")
    term.expect("到达城市？")
    term.line("深圳")
    term.expect("从广州到深圳。")
    assert sorted(tool_results(llm.requests[1])) == ["用户回答：广州", "用户回答：深圳"]


def test_a_failed_tool_call_is_marked_failed_live_and_in_the_resumed_history(
    cli: Cli, llm: ScriptedLLM
) -> None:
    # "查询「…」天气失败：…" starts with no error prefix: the ✗ comes from the result's data.
    llm.script(tool_call("get_weather", {"location": "火星基地"}), text("没有找到这个地方。"))
    term = cli("chat", "weather")
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("火星基地的天气")
    term.expect("✗ 查询天气")
    term.expect("没有找到这个地方。")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    resumed = cli("chat", "weather", "--thread", thread_id)
    resumed.expect("✗ 查询天气")
    resumed.expect(CHAT_PROMPT)
    resumed.line("/exit")
    assert resumed.exit_code() == 0


def test_an_answered_ask_input_line_reads_the_same_live_and_in_the_resumed_history(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("ask_input", ASK_CITY), text("好的，北京。"))
    term = cli("chat", "weather")
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("查天气")
    term.expect("请问要查询哪个城市？")
    term.line("北京")
    live = lines_with(term.expect("好的，北京。"), "✓ 向你提问")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    resumed = cli("chat", "weather", "--thread", thread_id)
    history = lines_with(resumed.expect("以上是历史记录"), "✓ 向你提问")
    resumed.expect(CHAT_PROMPT)
    resumed.line("/exit")
    assert resumed.exit_code() == 0
    assert live == history == ["✓ 向你提问 → 用户回答：北京"]
