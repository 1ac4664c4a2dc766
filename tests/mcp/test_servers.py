"""A configured server's failure is remembered per server (`AGENT_MCP_RETRY_AFTER`): its
agent serves meanwhile without asking it again, and asks it again once the time is up.
Driven through the weather agent's tools provider, against the Tushare double."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphs.settings import GraphSettings
from graphs.weather import agent_tools
from tests.doubles.tushare_mcp import TushareMCP
from tools.mcp.servers import forget_server_tools

TOKEN = "double-token-31a7c0"


@pytest.fixture
def double() -> Iterator[TushareMCP]:
    forget_server_tools()
    with TushareMCP(token=TOKEN) as server:
        yield server
    forget_server_tools()


def settings_for(
    double: TushareMCP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retry_after: str
) -> GraphSettings:
    config = tmp_path / "mcp.json"
    server = {
        "url": double.url,
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "agents": ["weather"],
        "timeout_s": 5,
    }
    config.write_text(json.dumps({"mcpServers": {"market": server}}))
    monkeypatch.setenv("AGENT_MCP_CONFIG", str(config))
    monkeypatch.setenv("AGENT_MCP_RETRY_AFTER", retry_after)
    return GraphSettings()


async def names(settings: GraphSettings) -> set[str]:
    return {tool.name for tool in await agent_tools(settings)()}


async def test_a_failed_server_is_not_asked_again_until_its_time_is_up(
    double: TushareMCP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(double, tmp_path, monkeypatch, "3600")
    double.stop()

    down = await names(settings)
    double.start()
    still_remembered = await names(settings)

    assert "get_weather" in down and "daily" not in down
    assert "daily" not in still_remembered
    assert double.methods == []  # nothing reached the server once it was up again


async def test_a_failed_server_is_asked_again_once_its_time_is_up(
    double: TushareMCP, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(double, tmp_path, monkeypatch, "0")
    double.stop()

    down = await names(settings)
    double.start()
    back = await names(settings)

    assert "daily" not in down
    assert {"get_weather", "daily", "stock_basic"} <= back
    assert "tools/list" in double.methods
