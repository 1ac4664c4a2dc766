"""The tushare agent's tools, connected lazily on first use and cached per process.

Importing or compiling the graph needs no token and no network. The first request
connects; the result is kept for later requests with the same URL, token and event
loop. A failed connection is not kept, so the next request tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from tools.errors import ToolsetUnavailable
from tools.settings import TushareSettings

if TYPE_CHECKING:
    from tools.mcp.tushare_client import TushareMcp

TOKEN_HINT = (
    "还没有配置 Tushare token，暂时无法查询 A 股数据。"
    "请在环境变量或项目根目录的 .env 文件中设置 TUSHARE_TOKEN=<你的 token>"
    "（登录 https://tushare.pro 后在「个人主页 → 接口TOKEN」获取），然后重启服务再试。"
)


@dataclass(frozen=True)
class TushareToolset:
    """A connected client and the tools built on it (one stable tuple, for model binding)."""

    client: TushareMcp
    tools: tuple[BaseTool, ...]


_Key = tuple[str, str, int, tuple[int, ...]]
_cached: tuple[_Key, asyncio.Task[TushareToolset]] | None = None


async def _connect(
    settings: TushareSettings, token: str, extra: tuple[BaseTool, ...]
) -> TushareToolset:
    # The MCP stack is imported on first use, so start-up and `langgraph dev` skip it;
    # in a thread, as importing reads files and a running loop must not block on I/O.
    await asyncio.to_thread(importlib.import_module, "tools.mcp.resolve_tool")
    from tools.mcp.resolve_tool import make_resolve_stock_tool
    from tools.mcp.tushare_client import TushareMcp, TushareMcpError

    client = TushareMcp(
        settings.tushare_mcp_url,
        token,
        connect_timeout_s=settings.tushare_connect_timeout_s,
        call_timeout_s=settings.tushare_call_timeout_s,
    )
    try:
        await client.connect()
    except TushareMcpError as exc:
        raise ToolsetUnavailable(str(exc)) from None
    tools = (*client.langchain_tools(), make_resolve_stock_tool(client), *extra)
    return TushareToolset(client=client, tools=tools)


async def get_tushare_toolset(
    settings: TushareSettings, extra: Sequence[BaseTool] = ()
) -> TushareToolset:
    """The connected toolset: the server's MCP tools, `resolve_stock`, then `extra`.

    Raises ToolsetUnavailable with a readable message (a hint how to set
    TUSHARE_TOKEN when none is configured, else why the server is unreachable).
    """
    global _cached
    if settings.tushare_token is None or not settings.tushare_token.get_secret_value():
        raise ToolsetUnavailable(TOKEN_HINT)
    token = settings.tushare_token.get_secret_value()
    extras = tuple(extra)
    # The token is keyed by digest so the cache holds no second copy of the secret.
    key: _Key = (
        settings.tushare_mcp_url,
        hashlib.sha256(token.encode()).hexdigest(),
        id(asyncio.get_running_loop()),
        tuple(map(id, extras)),
    )
    entry = _cached
    if entry is None or entry[0] != key:
        task = asyncio.create_task(_connect(settings, token, extras))
        task.add_done_callback(_forget_if_failed)
        entry = _cached = (key, task)
    # Shielded: one caller giving up must not cancel the connect others wait for.
    return await asyncio.shield(entry[1])


def _forget_if_failed(task: asyncio.Task[TushareToolset]) -> None:
    global _cached
    if (task.cancelled() or task.exception() is not None) and _cached and _cached[1] is task:
        _cached = None


def forget_tushare_toolset() -> None:
    """Drop the cached toolset; the next request connects again."""
    global _cached
    _cached = None
