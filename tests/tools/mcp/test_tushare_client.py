"""The Tushare MCP client over the wire, against the FastMCP double on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from starlette.types import Receive, Scope, Send

from tests.doubles._server import ServerThread
from tests.doubles.tushare_mcp import TushareMCP
from tools.mcp.tushare_client import TushareMcp, TushareMcpError, format_result

TOKEN = "tushare-token-5f0c2b9e7d"


@pytest.fixture
def server() -> Iterator[TushareMCP]:
    with TushareMCP(token=TOKEN) as double:
        yield double


def client_for(url: str, token: str = TOKEN, **timeouts: float) -> TushareMcp:
    return TushareMcp(url, token, **timeouts)


def text_result(text: str, *, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=is_error)


async def test_connects_over_streamable_http_and_lists_the_server_tools(
    server: TushareMCP,
) -> None:
    client = client_for(server.url)
    tools = await client.connect()
    assert client.transport == "streamable_http"
    assert [tool.name for tool in tools] == ["stock_basic", "daily", "monthly"]


async def test_every_request_carries_the_token_in_both_headers(server: TushareMCP) -> None:
    client = client_for(server.url)
    await client.connect()
    await client.call_text("daily", {"ts_code": "000001.SZ", "trade_date": "20251231"})
    assert server.request_headers
    for headers in server.request_headers:
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["x-tushare-token"] == TOKEN


async def test_an_sse_only_server_is_reached_through_the_fallback() -> None:
    with TushareMCP(token=TOKEN, transport="sse") as server:
        client = client_for(server.url)
        await client.connect()
        assert client.transport == "sse"
        text = await client.call_text("stock_basic", {"name": "茅台"})
    assert "600519.SH" in text
    assert "贵州茅台" in text


async def test_a_call_returns_readable_rows(server: TushareMCP) -> None:
    client = client_for(server.url)
    await client.connect()
    text = await client.call_text("daily", {"ts_code": "000001.SZ", "start_date": "20251229"})
    lines = text.splitlines()
    assert lines[0].startswith("ts_code | trade_date | open | high | low | close")
    assert lines[1].startswith("000001.SZ | 20251231 |")
    assert lines[-1] == "（共 3 行）"
    assert server.calls == [("daily", {"ts_code": "000001.SZ", "start_date": "20251229"})]


async def test_fields_and_items_answers_read_like_row_answers(server: TushareMCP) -> None:
    client = client_for(server.url)
    await client.connect()
    args = {"ts_code": "600519.SH", "start_date": "20250101", "end_date": "20250630"}
    rows = await client.call_text("monthly", args)
    server.shape = "fields_items"
    assert await client.call_text("monthly", args) == rows
    assert rows.endswith("（共 6 行）")


async def test_a_rate_limit_answer_comes_back_as_error_text(server: TushareMCP) -> None:
    server.shape = "error"
    client = client_for(server.url)
    await client.connect()
    text = await client.call_text("daily", {"ts_code": "000001.SZ"})
    assert text.startswith("错误：")
    assert "40203" in text
    assert "每分钟最多访问该接口" in text


async def test_a_wrong_token_is_a_readable_error_without_the_token(
    server: TushareMCP,
) -> None:
    wrong = "wrong-token-0d3e1f"
    with pytest.raises(TushareMcpError) as raised:
        await client_for(server.url, wrong).connect()
    message = str(raised.value)
    assert "401" in message
    assert "TUSHARE_TOKEN" in message
    assert wrong not in message
    assert TOKEN not in message


async def test_a_server_that_is_down_is_a_readable_error(server: TushareMCP) -> None:
    url = server.url
    server.stop()
    with pytest.raises(TushareMcpError) as raised:
        await client_for(url).connect()
    assert "无法连接 Tushare MCP 服务" in str(raised.value)
    assert url in str(raised.value)


async def test_a_call_while_the_server_is_down_fails_readably_and_works_once_it_is_back(
    server: TushareMCP,
) -> None:
    client = client_for(server.url)
    await client.connect()
    server.stop()
    down = await client.call_text("daily", {"ts_code": "000001.SZ", "trade_date": "20251231"})
    assert down.startswith("错误：调用 Tushare 工具 daily 失败")
    server.start()
    up = await client.call_text("daily", {"ts_code": "000001.SZ", "trade_date": "20251231"})
    assert "000001.SZ | 20251231" in up


@pytest.fixture
def silent_server() -> Iterator[ServerThread]:
    """An HTTP server that accepts requests and never answers them."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await holder.hang(60)

    holder = ServerThread(app, lifespan="off")
    with holder:
        yield holder


async def test_a_silent_server_times_out_on_connect(silent_server: ServerThread) -> None:
    client = client_for(f"{silent_server.url}/mcp/", connect_timeout_s=0.3)
    with pytest.raises(TushareMcpError) as raised:
        await client.connect()
    assert "超时" in str(raised.value)


async def test_a_silent_server_times_out_on_a_call(silent_server: ServerThread) -> None:
    client = client_for(f"{silent_server.url}/mcp/", call_timeout_s=0.3)
    client.transport = "streamable_http"  # as if connected before the server went quiet
    text = await client.call_text("daily", {"ts_code": "000001.SZ"})
    assert text.startswith("错误：调用 Tushare 工具 daily 超时")


async def test_calls_are_logged_with_timing_and_cut_arguments_but_never_the_token(
    server: TushareMCP, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = client_for(server.url)
    await client.connect()
    await client.call_text("stock_basic", {"name": "平安", "fields": "x" * 500})
    ours = [r.getMessage() for r in caplog.records if r.name == "react_agent.tushare_mcp"]
    assert any("list_tools start" in m for m in ours)
    assert any("list_tools end" in m and "elapsed_ms=" in m for m in ours)
    start = next(m for m in ours if "call start tool=stock_basic" in m)
    assert len(start.split("args=", 1)[1]) == 200
    end = next(m for m in ours if "call end tool=stock_basic" in m)
    assert "elapsed_ms=" in end
    assert "is_error=False" in end
    assert "result_len=" in end
    everything = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert TOKEN not in everything


async def test_failures_are_logged_without_the_token(
    server: TushareMCP, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TushareMcpError):
        await client_for(server.url, "wrong-" + TOKEN).connect()
    assert any(
        "list_tools failed" in r.getMessage()
        for r in caplog.records
        if r.name == "react_agent.tushare_mcp"
    )
    assert TOKEN not in caplog.text


async def test_langchain_tools_keep_the_server_names_and_schemas(server: TushareMCP) -> None:
    client = client_for(server.url)
    await client.connect()
    tools = {tool.name: tool for tool in client.langchain_tools()}
    assert set(tools) == {"stock_basic", "daily", "monthly"}
    assert {"ts_code", "start_date", "end_date", "trade_date"} <= set(tools["daily"].args)
    text = await tools["daily"].ainvoke(
        {"ts_code": "000001.SZ", "trade_date": "20251231", "start_date": None}
    )
    assert "000001.SZ | 20251231" in text


async def test_a_failing_langchain_tool_returns_text_instead_of_raising(
    server: TushareMCP,
) -> None:
    client = client_for(server.url)
    await client.connect()
    tool = client.langchain_tools()[0]
    server.stop()
    text = await tool.ainvoke({"name": "平安"})
    assert text.startswith("错误：")


def test_an_error_result_is_prefixed() -> None:
    assert format_result(text_result("接口不存在", is_error=True)) == "错误：接口不存在"
    assert format_result(CallToolResult(content=[], isError=True)).startswith("错误：")


def test_every_content_block_kind_is_rendered_as_text() -> None:
    blob = base64.b64encode(b"%PDF-1.7").decode()
    result = CallToolResult(
        content=[
            TextContent(type="text", text=json.dumps([{"ts_code": "000001.SZ", "close": 11.2}])),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="tushare://note", text="附注：数据为日线"),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="tushare://report.pdf", blob=blob, mimeType="application/pdf"
                ),
            ),
            ImageContent(type="image", data="aGVsbG8=", mimeType="image/png"),
            AudioContent(type="audio", data="aGVsbG8=", mimeType="audio/wav"),
            ResourceLink(type="resource_link", uri="https://tushare.pro/doc", name="文档"),
        ]
    )
    lines = format_result(result).splitlines()
    assert lines[:3] == ["ts_code | close", "000001.SZ | 11.2", "（共 1 行）"]
    assert lines[3] == "附注：数据为日线"
    assert "tushare://report.pdf" in lines[4] and "application/pdf" in lines[4]
    assert "图片" in lines[5] and "image/png" in lines[5]
    assert "音频" in lines[6] and "audio/wav" in lines[6]
    assert "https://tushare.pro/doc" in lines[7]


def test_an_error_payload_inside_a_normal_result_is_not_prefixed_twice() -> None:
    text = format_result(text_result('{"code": 40203, "msg": "限流"}', is_error=True))
    assert text.startswith("错误：")
    assert not text.startswith("错误：错误")
