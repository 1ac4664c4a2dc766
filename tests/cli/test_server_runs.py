"""`react-agent chat --server URL` and the server's durable runs: Ctrl-C cancels, --thread joins."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import httpx
import pexpect
import pytest

from tests.cli.conftest import CHAT_PROMPT, CTRL_C, Terminal
from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

API_KEY = "cli-runs-agent-key"
BEIJING_ANSWER = "北京今天晴，气温 12°C，适合出门。"
LOOKING = "我先查一下北京的天气。"


@pytest.fixture
def cli_env(cli_env: dict[str, str]) -> dict[str, str]:
    """A bearer key the CLI must send on every call (the cancel too); a patient forecast.

    The forecast hangs until the test releases it, after a second CLI has started: the
    tool must not time out meanwhile.
    """
    return {**cli_env, "AGENT_API_KEY": API_KEY, "OPEN_METEO_TIMEOUT": "60"}


def runs_of(server: str, thread_id: str) -> list[dict[str, Any]]:
    """`GET /api/threads/{thread_id}/runs`: the thread's run records, newest first."""
    response = httpx.get(
        f"{server}/api/threads/{thread_id}/runs",
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=10,
    )
    response.raise_for_status()
    records: list[dict[str, Any]] = response.json()
    return records


def test_ctrl_c_during_a_run_on_a_server_cancels_it_through_the_api_and_the_thread_goes_on(
    cli: Cli, server: str, llm: ScriptedLLM
) -> None:
    llm.script(hang(60, partial="从前有座山，"))
    term = cli("chat", "weather", "--server", server)
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("讲个长故事")
    term.expect("从前有座山，")
    term.send(CTRL_C)
    term.expect("已停止")
    term.expect(CHAT_PROMPT)

    # Dropping the stream would leave the run going on the server: it was cancelled.
    [stopped] = runs_of(server, thread_id)
    assert stopped["status"] == "cancelled"
    assert stopped["error"]["code"] == "cancelled"

    llm.script(text("山里有座庙。"))
    term.line("接着讲")
    term.expect("山里有座庙。")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    turns = [(m["role"], m["content"]) for m in llm.requests[1]["messages"][1:]]
    assert turns == [("user", "讲个长故事"), ("assistant", "从前有座山，"), ("user", "接着讲")]
    assert [run["status"] for run in runs_of(server, thread_id)] == ["success", "cancelled"]


def leave_a_weather_run_going(cli: Cli, server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo) -> str:
    """A run whose forecast hangs, its terminal killed: the run goes on; its thread id."""
    llm.script(
        tool_call("get_weather", {"location": "北京"}, content=LOOKING),
        text(BEIJING_ANSWER),
    )
    meteo.hang_forecast()
    first = cli("chat", "weather", "--server", server)
    thread_id = first.thread_id()
    first.expect(CHAT_PROMPT)
    first.line("北京天气怎么样")
    first.expect("正在执行 查询天气...")
    first.child.kill(signal.SIGKILL)  # no Ctrl-C, no goodbye: the connection just drops
    first.child.expect(pexpect.EOF)
    [running] = runs_of(server, thread_id)
    assert running["status"] == "running"
    return thread_id


def test_chat_with_the_thread_of_a_run_still_going_on_the_server_joins_it_to_its_answer(
    cli: Cli, server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    thread_id = leave_a_weather_run_going(cli, server, llm, meteo)

    term = cli("chat", "weather", "--server", server, "--thread", thread_id)
    before = term.expect("正在执行 查询天气...")  # joined while the tool still runs
    meteo.reset()  # the forecast answers now
    after = term.expect(BEIJING_ANSWER)
    screen = before + after + term.expect(CHAT_PROMPT)
    assert "你> 北京天气怎么样" in before  # the history came first
    assert screen.count(LOOKING) == 1  # in the history, not drawn again by the replay
    assert "查询天气(location=北京)" in after  # the tool's result, drawn when it came
    term.line("/exit")
    assert term.exit_code() == 0

    assert [run["status"] for run in runs_of(server, thread_id)] == ["success"]
    assert len(llm.requests) == 2


def test_ctrl_c_in_a_joined_run_cancels_it_through_the_api_and_the_thread_goes_on(
    cli: Cli, server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    thread_id = leave_a_weather_run_going(cli, server, llm, meteo)

    term = cli("chat", "weather", "--server", server, "--thread", thread_id)
    term.expect("正在执行 查询天气...")
    term.send(CTRL_C)
    term.expect("已停止")
    term.expect(CHAT_PROMPT)
    [stopped] = runs_of(server, thread_id)
    assert stopped["status"] == "cancelled"

    llm.reset()  # drop the answer scripted for the cancelled run
    llm.script(text("好的，不查了。"))
    term.line("算了")
    term.expect("好的，不查了。")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0
    assert [run["status"] for run in runs_of(server, thread_id)] == ["success", "cancelled"]
