"""The lazy, cached tushare toolset: no token, first use, caching, retry after failure."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from langchain_core.tools import BaseTool

from tests.doubles.tushare_mcp import TushareMCP
from tools.errors import ToolsetUnavailable
from tools.mcp.toolset import TOKEN_HINT, TushareToolset, forget_tushare_toolset
from tools.mcp.toolset import get_tushare_toolset as connect_toolset
from tools.settings import ToolSettings, TushareSettings

TOKEN = "tushare-token-a81c44d2"


@pytest.fixture(autouse=True)
def _fresh_toolset() -> Iterator[None]:
    forget_tushare_toolset()
    yield
    forget_tushare_toolset()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[TushareMCP]:
    with TushareMCP(token=TOKEN) as double:
        point_at(monkeypatch, double.url, TOKEN)
        yield double


def point_at(monkeypatch: pytest.MonkeyPatch, url: str, token: str) -> None:
    monkeypatch.setenv("TUSHARE_MCP_URL", url)
    monkeypatch.setenv("TUSHARE_TOKEN", token)


async def get_tushare_toolset(extra: tuple[BaseTool, ...] = ()) -> TushareToolset:
    """The toolset for the settings the test's environment gives now."""
    return await connect_toolset(TushareSettings(), extra)


def initializations(server: TushareMCP) -> int:
    """How many MCP sessions were opened (each starts with a POST carrying no session id)."""
    return sum("mcp-session-id" not in h for h in server.request_headers)


async def test_without_a_token_the_toolset_is_unavailable_with_a_hint() -> None:
    with pytest.raises(ToolsetUnavailable) as raised:
        await get_tushare_toolset()
    assert str(raised.value) == TOKEN_HINT
    assert "TUSHARE_TOKEN=" in TOKEN_HINT


async def test_the_toolset_holds_the_mcp_tools_resolve_stock_and_the_extras(
    server: TushareMCP,
) -> None:
    from tools.report import report_tool

    toolset = await get_tushare_toolset((report_tool(ToolSettings()),))
    names = [tool.name for tool in toolset.tools]
    assert names == ["stock_basic", "daily", "monthly", "resolve_stock", "save_report"]


async def test_the_connection_is_made_once_and_reused(server: TushareMCP) -> None:
    first, second = await asyncio.gather(get_tushare_toolset(), get_tushare_toolset())
    third = await get_tushare_toolset()
    assert first is second is third
    assert initializations(server) == 1


async def test_a_different_url_gets_a_new_connection(
    server: TushareMCP, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await get_tushare_toolset()
    with TushareMCP(token=TOKEN) as other:
        point_at(monkeypatch, other.url, TOKEN)
        second = await get_tushare_toolset()
        assert second is not first
        assert second.client.url == other.url


async def test_a_failed_connection_is_answered_at_once_until_its_back_off_passes_then_retried(
    server: TushareMCP, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUSHARE_RETRY_AFTER", "0.5")
    server.stop()
    with pytest.raises(ToolsetUnavailable) as raised:
        await get_tushare_toolset()
    assert "无法连接 Tushare MCP 服务" in str(raised.value)
    server.start()

    with pytest.raises(ToolsetUnavailable) as again:  # remembered: no new connect
        await get_tushare_toolset()
    assert "无法连接 Tushare MCP 服务" in str(again.value)
    assert "秒后再尝试连接" in str(again.value)
    assert initializations(server) == 0

    toolset = await _first_success(deadline_s=10)
    assert "daily" in [tool.name for tool in toolset.tools]
    assert initializations(server) == 1


async def _first_success(deadline_s: float) -> TushareToolset:
    """Ask until the back-off has passed (each refusal inside it is immediate)."""
    deadline = asyncio.get_running_loop().time() + deadline_s
    while True:
        try:
            return await get_tushare_toolset()
        except ToolsetUnavailable:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)  # polling interval, not a wait for a result


async def test_a_wrong_token_makes_the_toolset_unavailable_with_a_readable_reason(
    server: TushareMCP, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, server.url, "not-the-token-91")
    with pytest.raises(ToolsetUnavailable) as raised:
        await get_tushare_toolset()
    assert "TUSHARE_TOKEN" in str(raised.value)
    assert "not-the-token-91" not in str(raised.value)
