"""An MCP server's tool in the terminal: `react-agent chat` shows its call like any
other's (name, arguments, outcome), and asks before a high-risk one."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import CHAT_PROMPT, Terminal
from tests.doubles.llm import ScriptedLLM, text, tool_call

pytestmark = pytest.mark.processes

TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))


def test_the_terminal_shows_an_mcp_tools_call_and_asks_before_a_high_risk_one(
    cli: Callable[..., Terminal], cli_env: dict[str, str], llm: ScriptedLLM, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    servers = {
        "time": {"command": TIME_SERVER, "agents": ["weather"], "risk": {"convert_time": "high"}}
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    convert = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    llm.script(
        tool_call("get_current_time", {"timezone": "UTC"}),
        tool_call("convert_time", convert),
        text("东京是晚上九点。"),
    )

    term = cli("chat", "weather", env={**cli_env, "AGENT_MCP_CONFIG": str(config)})
    term.expect(CHAT_PROMPT)
    term.line("UTC 中午是东京几点？")
    term.expect("✓ get_current_time(timezone=UTC)")
    term.expect("确认执行 convert_time ?")  # the confirmation: the tool, its risk, its arguments
    term.expect("sensitive")
    term.expect("Asia/Tokyo")
    term.expect("确认执行？[y/N]")
    term.line("y")
    screen = term.expect("东京是晚上九点。", timeout=60)
    term.expect(CHAT_PROMPT)
    term.line("/exit")

    assert term.exit_code() == 0
    assert "✓ convert_time(" in screen and "target_timezone=Asia/Tokyo" in screen
