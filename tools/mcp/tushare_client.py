"""The Tushare MCP client behind the tushare agent's tools (its MCP tools and `resolve_stock`).

Streamable HTTP first, SSE when that fails; the token travels in two headers and
nowhere else. Each operation opens its own short MCP session inside the calling task:
MCP sessions are task-bound async context managers, and a session per call survives
server restarts, event-loop changes and cancellation without any reconnect logic.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, NamedTuple, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_mcp_adapters.sessions import Connection, create_session
from mcp import ClientSession
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

from tools.mcp.tushare_result import (
    BAR_FREQS,
    ErrorReply,
    Table,
    bars_data,
    parse_data,
    parse_text,
    readable,
    render,
)

# mcp 2 renamed McpError to MCPError (both carry the JSON-RPC error as `.error`).
try:
    from mcp import MCPError  # type: ignore[attr-defined, unused-ignore]
except ImportError:  # mcp 1
    from mcp import McpError as MCPError

logger = logging.getLogger("react_agent.tushare_mcp")

Transport = Literal["streamable_http", "sse"]
TRANSPORTS: tuple[Transport, ...] = ("streamable_http", "sse")

ERROR_PREFIX = "错误："
MASK = "***"
ARGS_LOG_LIMIT = 200

CONNECT_FAILED = "无法连接 Tushare MCP 服务 {url}：{reason}。请稍后重试，或检查 TUSHARE_MCP_URL。"
CONNECT_TIMEOUT = (
    "连接 Tushare MCP 服务 {url} 超时：{seconds:g} 秒内没有完成连接和工具列表。请稍后重试。"
)
AUTH_FAILED = (
    "Tushare MCP 服务拒绝了访问（HTTP {status}）：请检查 TUSHARE_TOKEN 是否正确、是否已开通权限。"
)
CALL_FAILED = ERROR_PREFIX + "调用 Tushare 工具 {name} 失败：{reason}"
CALL_TIMEOUT = ERROR_PREFIX + "调用 Tushare 工具 {name} 超时（超过 {seconds:g} 秒）"
NOT_CONNECTED = "Tushare MCP 尚未连接"
EMPTY_RESULT = "（工具没有返回内容）"
DEFAULT_DESCRIPTION = "Tushare MCP 工具：{name}"

REASON_REFUSED = "连接失败（服务未启动、地址错误或网络不通）"
REASON_HTTP = "HTTP {status}"
REASON_TIMEOUT = "请求超时"

# Failures of the transport or the server that a caller should see as text, not a crash.
# Task groups inside the MCP SDK wrap them in ExceptionGroups; a server answering
# malformed JSON-RPC surfaces as ValueError (pydantic), invalid tool output as RuntimeError.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    OSError,
    httpx.HTTPError,
    MCPError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    ExceptionGroup,
    ValueError,
    RuntimeError,
)

R = TypeVar("R")


class TushareMcpError(Exception):
    """A connection or call failed; the message is readable and holds no secret."""


def display_url(url: str) -> str:
    """`url` without credentials, query or fragment, fit for logs and messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def leaf_error(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def http_status(exc: BaseException) -> int | None:
    """The HTTP status behind a failure, if it was an HTTP error response."""
    leaf = leaf_error(exc)
    if isinstance(leaf, httpx.HTTPStatusError):
        return leaf.response.status_code
    return None


def _reason(exc: BaseException) -> str:
    leaf = leaf_error(exc)
    if isinstance(leaf, httpx.HTTPStatusError):
        return REASON_HTTP.format(status=leaf.response.status_code)
    if isinstance(leaf, httpx.TimeoutException | TimeoutError):
        return REASON_TIMEOUT
    if isinstance(leaf, httpx.ConnectError | ConnectionError):
        return REASON_REFUSED
    if isinstance(leaf, MCPError):
        return leaf.error.message
    text = str(leaf)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _raw_text(block: ContentBlock) -> str | None:
    """The text a block carries (text blocks, embedded text resources), else None."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
        return block.resource.text
    return None


def _block_text(block: ContentBlock) -> str:
    """What the model reads for a block without text: a short description."""
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            mime = resource.mimeType or "application/octet-stream"
            return f"[资源 {resource.uri}（{mime}，base64 {len(resource.blob)} 字符）]"
    if isinstance(block, ImageContent):
        return f"[图片 {block.mimeType}，base64 {len(block.data)} 字符]"
    if isinstance(block, AudioContent):
        return f"[音频 {block.mimeType}，base64 {len(block.data)} 字符]"
    if isinstance(block, ResourceLink):
        return f"[资源链接 {block.name} {block.uri}]"
    return f"[{getattr(block, 'type', type(block).__name__)} 内容]"


class ReadResult(NamedTuple):
    """A tool result as the model reads it, the tables it held, and whether it failed."""

    text: str
    tables: list[Table]
    failed: bool  # the server's error answer: `isError`, or an API error body ({code, msg})


def read_result(result: CallToolResult) -> ReadResult:
    """The result as the model reads it (`format_result`), its tables, and its failure.

    Each text block is parsed once, for both: the rows rendered for the model, the
    tables kept for the chart data of `chart_data` (none from an error answer).
    """
    parts: list[str] = []
    tables: list[Table] = []
    failed = result.isError
    for block in result.content:
        raw = _raw_text(block)
        if raw is None:
            text = _block_text(block)
        else:
            parsed = parse_text(raw)
            text = raw if parsed is None else render(parsed)
            if isinstance(parsed, Table):
                tables.append(parsed)
            failed = failed or isinstance(parsed, ErrorReply)
        if text:
            parts.append(text)
    if not parts and result.structuredContent is not None:
        parts = [readable(json.dumps(result.structuredContent, ensure_ascii=False))]
        parsed = parse_data(result.structuredContent)
        if isinstance(parsed, Table):
            tables.append(parsed)
        failed = failed or isinstance(parsed, ErrorReply)
    text = "\n".join(parts)
    if result.isError:
        text = text if text.startswith("错误") else ERROR_PREFIX + (text or EMPTY_RESULT)
    return ReadResult(text or EMPTY_RESULT, [] if failed else tables, failed)


def format_result(result: CallToolResult) -> str:
    """One string for the model: every content block, rows made readable; errors `错误：`."""
    return read_result(result).text


def chart_data(name: str, arguments: dict[str, Any], tables: list[Table]) -> dict[str, Any] | None:
    """Chart data for clients from a call's tables (price bars), or None.

    The frequency is the tool's name (`daily`, `weekly`, `monthly`), or the `api_name`
    of a server's generic query tool.
    """
    api_name = arguments.get("api_name")
    freq = name if name in BAR_FREQS else api_name if isinstance(api_name, str) else None
    for table in tables:
        data = bars_data(table, freq)
        if data is not None:
            return data
    return None


def result_text(result: CallToolResult) -> str:
    """The raw text of a result's text blocks (for parsing, not for the model)."""
    return "\n".join(text for text in map(_raw_text, result.content) if text is not None)


async def _list_all_tools(session: ClientSession) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(cursor=cursor)
        tools.extend(page.tools)
        if not page.nextCursor or page.nextCursor == cursor:
            return tools
        cursor = page.nextCursor


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)


class TushareMcp:
    """A connected Tushare MCP server: its tools, and calls to them."""

    def __init__(
        self, url: str, token: str, *, connect_timeout_s: float = 15.0, call_timeout_s: float = 30.0
    ) -> None:
        self.url = url
        self.display_url = display_url(url)
        self._token = token
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.transport: Transport | None = None
        self.tools: list[Tool] = []

    def scrub(self, text: str) -> str:
        """`text` with the token masked (servers and libraries may echo it)."""
        return text.replace(self._token, MASK) if self._token else text

    def _connection(self, transport: Transport) -> Connection:
        headers = {"Authorization": f"Bearer {self._token}", "X-Tushare-Token": self._token}
        if transport == "sse":
            return {
                "transport": "sse",
                "url": self.url,
                "headers": headers,
                "timeout": self.connect_timeout_s,
                "sse_read_timeout": self.call_timeout_s,
            }
        return {
            "transport": "streamable_http",
            "url": self.url,
            "headers": headers,
            "timeout": self.connect_timeout_s,
            "sse_read_timeout": self.call_timeout_s,
        }

    async def _in_session(
        self, transport: Transport, operation: Callable[[ClientSession], Awaitable[R]]
    ) -> R:
        """Run `operation` in a fresh initialized session over `transport`."""
        async with create_session(self._connection(transport)) as session:
            await session.initialize()
            # The SDK re-lists tools before validating a call's structured output;
            # the list we already hold spares that round trip.
            session._tool_output_schemas.update({t.name: t.outputSchema for t in self.tools})
            return await operation(session)

    async def connect(self) -> list[Tool]:
        """Find a working transport and list the tools, within the connect timeout.

        Raises TushareMcpError with a readable reason when neither transport works.
        """
        started = time.perf_counter()
        logger.info("tushare-mcp list_tools start url=%s", self.display_url)
        failures: dict[Transport, BaseException] = {}
        try:
            with anyio.fail_after(self.connect_timeout_s):
                for transport in TRANSPORTS:
                    try:
                        tools = await self._in_session(transport, _list_all_tools)
                    except TRANSPORT_ERRORS as exc:
                        failures[transport] = exc
                        logger.info(
                            "tushare-mcp list_tools over %s failed: %s",
                            transport,
                            self.scrub(_reason(exc)),
                        )
                        if http_status(exc) in (401, 403):
                            break  # the server is there and refuses the token
                        continue
                    self.transport, self.tools = transport, tools
                    logger.info(
                        "tushare-mcp list_tools end transport=%s tools=%d elapsed_ms=%d",
                        transport,
                        len(tools),
                        _elapsed_ms(started),
                    )
                    return tools
        except TimeoutError:
            message = CONNECT_TIMEOUT.format(url=self.display_url, seconds=self.connect_timeout_s)
            logger.warning(
                "tushare-mcp list_tools failed elapsed_ms=%d: timeout", _elapsed_ms(started)
            )
            raise TushareMcpError(message) from None
        message = self._connect_failure(failures)
        logger.warning(
            "tushare-mcp list_tools failed elapsed_ms=%d: %s", _elapsed_ms(started), message
        )
        raise TushareMcpError(message)

    def _connect_failure(self, failures: dict[Transport, BaseException]) -> str:
        for exc in failures.values():
            status = http_status(exc)
            if status in (401, 403):
                return AUTH_FAILED.format(status=status)
        reasons = list(dict.fromkeys(_reason(exc) for exc in failures.values()))
        return self.scrub(CONNECT_FAILED.format(url=self.display_url, reason="；".join(reasons)))

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call tool `name`, within the call timeout; raises TushareMcpError on failure."""
        if self.transport is None:
            raise TushareMcpError(NOT_CONNECTED)
        args_text = self.scrub(json.dumps(arguments, ensure_ascii=False, default=str))
        logger.info("tushare-mcp call start tool=%s args=%s", name, args_text[:ARGS_LOG_LIMIT])
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.call_timeout_s):
                result = await self._in_session(
                    self.transport, lambda session: session.call_tool(name, arguments)
                )
        except TimeoutError:
            logger.warning(
                "tushare-mcp call failed tool=%s elapsed_ms=%d: timeout", name, _elapsed_ms(started)
            )
            raise TushareMcpError(
                CALL_TIMEOUT.format(name=name, seconds=self.call_timeout_s)
            ) from None
        except TRANSPORT_ERRORS as exc:
            status = http_status(exc)
            reason = (
                AUTH_FAILED.format(status=status)
                if status in (401, 403)
                else self.scrub(_reason(exc))
            )
            logger.warning(
                "tushare-mcp call failed tool=%s elapsed_ms=%d: %s",
                name,
                _elapsed_ms(started),
                reason,
            )
            raise TushareMcpError(CALL_FAILED.format(name=name, reason=reason)) from None
        logger.info(
            "tushare-mcp call end tool=%s elapsed_ms=%d is_error=%s result_len=%d",
            name,
            _elapsed_ms(started),
            result.isError,
            len(result_text(result)),
        )
        return result

    async def call_text(self, name: str, arguments: dict[str, Any]) -> str:
        """The call's result as one readable string; failures come back as `错误：` text."""
        try:
            result = await self.call_tool(name, arguments)
        except TushareMcpError as exc:
            return str(exc)
        return self.scrub(format_result(result))

    def langchain_tools(self) -> list[BaseTool]:
        """The server's tools as LangChain tools, with the names and schemas it lists."""
        return [self._langchain_tool(tool) for tool in self.tools]

    def _langchain_tool(self, tool: Tool) -> BaseTool:
        name = tool.name

        async def call(**arguments: Any) -> tuple[str, dict[str, Any] | None]:
            # Models send null for optional arguments; Tushare wants them absent.
            given = {key: value for key, value in arguments.items() if value is not None}
            try:
                result = await self.call_tool(name, given)
            except TushareMcpError as exc:
                raise ToolException(str(exc)) from None  # a failed call, as data
            read = read_result(result)
            text = self.scrub(read.text)
            if read.failed:  # the server's own error answer
                raise ToolException(text)
            # The text is what the model reads; the chart data (the ToolMessage's
            # artifact) goes to clients only.
            return text, chart_data(name, given, read.tables)

        return StructuredTool(
            name=name,
            description=tool.description or DEFAULT_DESCRIPTION.format(name=name),
            args_schema=tool.inputSchema,
            coroutine=call,
            # `source`: what `react-agent tools` shows (tools.mcp.servers.source_of).
            metadata={"mcp_server": self.display_url, "source": "mcp:tushare (built-in)"},
            handle_tool_error=True,  # the message becomes the result, with status "error"
            response_format="content_and_artifact",
        )
