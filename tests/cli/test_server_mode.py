"""`react-agent chat --server URL`: the same screens, from a real `react-agent serve` over SSE."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.conftest import CHAT_PROMPT, Terminal
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

API_KEY = "cli-test-agent-key"


@pytest.fixture
def cli_env(cli_env: dict[str, str]) -> dict[str, str]:
    """The server and the CLI share a bearer key: the CLI must send it."""
    return {**cli_env, "AGENT_API_KEY": API_KEY}


def test_the_weather_flow_runs_against_a_real_server(
    cli: Cli, server: str, cli_env: dict[str, str], llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        tool_call(
            "ask_input", {"message": "请问要查询哪个城市？", "placeholder": "北京 / Shanghai"}
        ),
        tool_call("get_weather", {"location": "北京"}),
        text("北京今天晴，适合出门。"),
    )
    term = cli("chat", "weather", "--server", server)
    thread = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("查天气")
    term.expect("请问要查询哪个城市？")
    term.expect("北京 / Shanghai")
    term.line("北京")
    term.expect("正在执行 查询天气...")
    term.expect("查询天气(location=北京)")
    term.expect("北京今天晴，适合出门。")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("39.9075", "116.39723")
    ]

    # The server keeps the thread: a later CLI shows its history from there.
    again = cli("chat", "weather", "--server", server, "--thread", thread)
    again.expect("北京今天晴，适合出门。")
    again.expect(CHAT_PROMPT)
