"""The tushare agent's tools, connected lazily on first use and cached per process.

Importing or compiling the graph needs no token and no network. The first request
connects; the result is kept for later requests with the same URL, token and event
loop. A failed connection is remembered for TUSHARE_RETRY_AFTER seconds: requests
meanwhile are answered at once with its reason instead of each waiting out the
connect timeout again; the first request after that tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import math
import time
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


BACKING_OFF = "{reason}（{seconds} 秒后再尝试连接）"

_Key = tuple[str, str, int, tuple[int, ...]]
_cached: tuple[_Key, asyncio.Task[TushareToolset]] | None = None
# The last failed connect: its key, until when it is remembered, and why it failed.
_failed: tuple[_Key, float, str] | None = None


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
    failed = _failed
    if failed is not None and failed[0] == key:
        left = failed[1] - time.monotonic()
        if left > 0:
            raise ToolsetUnavailable(BACKING_OFF.format(reason=failed[2], seconds=math.ceil(left)))
    entry = _cached
    if entry is None or entry[0] != key:
        task = asyncio.create_task(_connect(settings, token, extras))
        retry_after = settings.tushare_retry_after_s
        task.add_done_callback(lambda done: _forget_if_failed(done, key, retry_after))
        entry = _cached = (key, task)
    # Shielded: one caller giving up must not cancel the connect others wait for.
    return await asyncio.shield(entry[1])


def _forget_if_failed(task: asyncio.Task[TushareToolset], key: _Key, retry_after: float) -> None:
    global _cached, _failed
    if task.cancelled() or task.exception() is not None:
        if _cached and _cached[1] is task:
            _cached = None
        error = None if task.cancelled() else task.exception()
        if isinstance(error, ToolsetUnavailable):
            _failed = (key, time.monotonic() + retry_after, str(error))


def forget_tushare_toolset() -> None:
    """Drop the cached toolset and any remembered failure; the next request connects."""
    global _cached, _failed
    _cached = None
    _failed = None
