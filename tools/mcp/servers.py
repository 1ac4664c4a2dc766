"""The tools of the MCP servers AGENT_MCP_CONFIG declares, for the agents it names.

Through langchain-mcp-adapters (`MultiServerMCPClient`, one session per call, as the
adapters open them), with what the Tushare tools have (`tools.mcp.toolset`): nothing
connects at import or compile time; the first request an agent serves lists each of its
servers' tools, and the list is kept for later requests on the same event loop. A server
that fails to start is logged once (one line naming the file, the server and why) and
left out for AGENT_MCP_RETRY_AFTER seconds: the agent serves meanwhile with its other
tools, and the first request after that tries the server again.

Each call goes through an interceptor that bounds it by the server's `timeout_s` and
masks the configured secrets in any failure it reports. A server's tool whose name
another tool of the agent has is called `<server>_<name>` there.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool, ToolException

from tools.mcp.config import SERVER_PROBLEM, McpServer
from tools.risk import with_risk
from tools.secrets import Redactor, redactor_for
from tools.settings import McpSettings

if TYPE_CHECKING:
    from langchain_mcp_adapters.interceptors import MCPToolCallRequest, MCPToolCallResult

logger = logging.getLogger(__name__)

CALL_TIMEOUT = "MCP 服务器 {server} 的工具 {tool} 超过 {seconds:g} 秒没有回答"
CALL_FAILED = "MCP 服务器 {server} 的工具 {tool} 调用失败：{reason}"
START_TIMEOUT = "no answer to initialize and tools/list within {seconds:g} s"
SOURCE_KEY = "source"  # a tool's metadata: where it comes from (`react-agent tools` shows it)
SERVER_KEY = "mcp_server"

_Key = tuple[str, str, int]
_loading: dict[_Key, asyncio.Task[tuple[BaseTool, ...]]] = {}
_failed: dict[_Key, tuple[float, str]] = {}  # until when a failure is remembered, and why
_digests: dict[int, tuple[McpServer, str]] = {}
# Merged tool tuples by the ids of their parts; the parts are kept, so no id is reused.
_merged: dict[tuple[int, ...], tuple[tuple[object, ...], tuple[BaseTool, ...]]] = {}


class ServerUnavailable(Exception):
    """A configured server could not be started or listed; the message says why."""


def source_of(tool: BaseTool) -> str:
    """Where a tool comes from: `mcp:<server>` for a server's, else `built-in`."""
    return str((tool.metadata or {}).get(SOURCE_KEY, "built-in"))


def _key(server: McpServer) -> _Key:
    # The connection is keyed by digest: it holds headers, and the cache no secret copy.
    # Digested once per server (the server is kept beside it, so its id is not reused).
    known = _digests.get(id(server))
    if known is None or known[0] is not server:
        connection = json.dumps(server.connection, sort_keys=True).encode()
        known = _digests[id(server)] = (server, hashlib.sha256(connection).hexdigest())
    return (server.name, known[1], id(asyncio.get_running_loop()))


def _reason(exc: BaseException) -> str:
    """One readable line for a failure, the first leaf of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Guard:
    """The interceptor every call of one server goes through: its deadline, and no
    secret in what a failure says."""

    def __init__(self, server: McpServer, redact: Redactor) -> None:
        self._server = server
        self._redact = redact

    async def __call__(
        self,
        request: MCPToolCallRequest,
        handler: Callable[[MCPToolCallRequest], Awaitable[MCPToolCallResult]],
    ) -> MCPToolCallResult:
        from mcp.types import CallToolResult, TextContent  # the MCP stack: on first use

        server, seconds = self._server.name, self._server.timeout_s
        try:
            async with asyncio.timeout(seconds):
                result = await handler(request)
        except TimeoutError:
            message = CALL_TIMEOUT.format(server=server, tool=request.name, seconds=seconds)
            raise ToolException(message) from None
        except Exception as exc:
            reason = self._redact(_reason(exc))
            failed = CALL_FAILED.format(server=server, tool=request.name, reason=reason)
            raise ToolException(failed) from exc
        if self._redact and isinstance(result, CallToolResult):
            # A server may echo what it was sent (a header's token): masked before anyone
            # reads it, the model included.
            blocks = [
                block.model_copy(update={"text": self._redact(block.text)})
                if isinstance(block, TextContent)
                else block
                for block in result.content
            ]
            result = result.model_copy(update={"content": blocks})
        return result


async def _list(server: McpServer, redact: Redactor) -> tuple[BaseTool, ...]:
    """The server's tools that `include`/`exclude` let through, marked with their source
    and risk; ServerUnavailable when it does not start or list them in time."""
    # The MCP stack is imported on first use, in a thread: importing reads files, and a
    # running loop must not block on I/O.
    await asyncio.to_thread(importlib.import_module, "langchain_mcp_adapters.client")
    from langchain_mcp_adapters.client import MultiServerMCPClient

    connection: Any = dict(server.connection)
    client = MultiServerMCPClient(
        {server.name: connection}, tool_interceptors=[_Guard(server, redact)]
    )
    try:
        async with asyncio.timeout(server.timeout_s):
            listed = await client.get_tools(server_name=server.name)
    except TimeoutError:
        raise ServerUnavailable(START_TIMEOUT.format(seconds=server.timeout_s)) from None
    except Exception as exc:
        raise ServerUnavailable(redact(_reason(exc))) from exc
    kept = []
    for tool in listed:
        if not server.offers(tool.name):
            continue
        tool.metadata = {
            **(tool.metadata or {}),
            SOURCE_KEY: f"mcp:{server.name}",
            SERVER_KEY: server.name,
        }
        kept.append(with_risk(tool, server.risk.get(tool.name, "safe")))
    return tuple(kept)


async def server_tools(server: McpServer, settings: McpSettings) -> tuple[BaseTool, ...]:
    """The tools of one configured server, listed once per event loop; ServerUnavailable
    (at once, while a failure is remembered) when it cannot be had."""
    key = _key(server)
    failed = _failed.get(key)
    if failed is not None:
        if failed[0] > time.monotonic():
            raise ServerUnavailable(failed[1])
        del _failed[key]
    task = _loading.get(key)
    if task is None:
        task = asyncio.create_task(_list(server, redactor_for(settings)))
        retry_after = settings.agent_mcp_retry_after_s
        path = settings.agent_mcp_config.path
        task.add_done_callback(lambda done: _settle(done, key, server.name, path, retry_after))
        _loading[key] = task
    # Shielded: one request giving up must not cancel the start others wait for.
    return await asyncio.shield(task)


def _listed(server: McpServer) -> tuple[BaseTool, ...] | None:
    """The server's tools if they are listed already, () while its failure is remembered,
    None when it must be asked (not started, starting, or its failure has expired)."""
    key = _key(server)
    failed = _failed.get(key)
    if failed is not None:
        return () if failed[0] > time.monotonic() else None
    task = _loading.get(key)
    if task is None or not task.done() or task.cancelled() or task.exception() is not None:
        return None
    return task.result()


def _settle(
    task: asyncio.Task[tuple[BaseTool, ...]],
    key: _Key,
    name: str,
    path: str | None,
    retry_after: float,
) -> None:
    if not task.cancelled() and task.exception() is None:
        return
    if _loading.get(key) is task:
        del _loading[key]
    error = None if task.cancelled() else task.exception()
    if isinstance(error, ServerUnavailable):
        _failed[key] = (time.monotonic() + retry_after, str(error))
        logger.warning("%s", SERVER_PROBLEM.format(path=path, name=name, reason=error))


async def configured_tools(
    graph_id: str, settings: McpSettings
) -> list[tuple[str, tuple[BaseTool, ...]]]:
    """(server name, its tools) for each server of `graph_id` that answers, in the
    file's order; a server that does not is left out (and logged when it failed)."""
    servers = settings.agent_mcp_config.for_agent(graph_id)
    if not servers:
        return []
    listed = [_listed(server) for server in servers]
    if all(tools is not None for tools in listed):  # every model turn asks: no task then
        return [
            (server.name, tools) for server, tools in zip(servers, listed, strict=True) if tools
        ]
    found = await asyncio.gather(
        *(server_tools(server, settings) for server in servers), return_exceptions=True
    )
    kept = []
    for server, tools in zip(servers, found, strict=True):
        if isinstance(tools, ServerUnavailable):
            continue
        if isinstance(tools, BaseException):
            raise tools
        kept.append((server.name, tools))
    return kept


def merge_tools(
    own: Sequence[BaseTool], servers: Sequence[tuple[str, tuple[BaseTool, ...]]]
) -> tuple[BaseTool, ...]:
    """`own` then each server's tools, a name any other tool has prefixed with its
    server's; the same tuple for the same inputs (the model binds tools once per tuple)."""
    key = (id(own), *(id(tools) for _, tools in servers))
    cached = _merged.get(key)
    if cached is not None:
        return cached[1]
    names = [tool.name for tool in own] + [tool.name for _, tools in servers for tool in tools]
    result: list[BaseTool] = list(own)
    for server, tools in servers:
        for tool in tools:
            if names.count(tool.name) > 1:
                tool = tool.model_copy(update={"name": f"{server}_{tool.name}"})
            result.append(tool)
    merged = tuple(result)
    _merged[key] = ((own, *(tools for _, tools in servers)), merged)
    return merged


def forget_server_tools() -> None:
    """Drop every listed server and remembered failure; the next request starts them."""
    _loading.clear()
    _failed.clear()
    _merged.clear()
