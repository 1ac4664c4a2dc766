"""Consume: MCP servers from AGENT_MCP_CONFIG give an agent their tools.

One server process per module, its config declaring PyPI's `mcp-server-time` and
`mcp-server-fetch` (stdio), the Tushare double over streamable HTTP and over SSE, a
program that does not exist and an entry with an unknown key. MCP consumption writes
nothing to storage of its own, so these run on SQLite only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.service.conftest import SQLITE, Api, run_body, serving
from tests.support.env import env_for_subprocess
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes

BIN = Path(sys.executable).parent
DOUBLE_TOKEN = "tushare-double-token-77f3a1c9e5"
PAGE_TEXT = "本页由测试服务器提供：今日限行尾号 3 和 8。"


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<html><body><h1>限行</h1><p>{PAGE_TEXT}</p></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def page() -> Iterator[str]:
    """A local web page for mcp-server-fetch to read."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/today.html"
    httpd.shutdown()


@pytest.fixture(scope="module")
def doubles() -> Iterator[tuple[TushareMCP, TushareMCP]]:
    with (
        TushareMCP(token=DOUBLE_TOKEN) as http,
        TushareMCP(token=DOUBLE_TOKEN, transport="sse") as sse,
    ):
        yield http, sse


def _config(http: TushareMCP, sse: TushareMCP) -> dict[str, Any]:
    bearer = {"Authorization": "Bearer ${DOUBLE_TOKEN}"}
    return {
        "mcpServers": {
            "time": {
                "command": str(BIN / "mcp-server-time"),
                "args": ["--local-timezone", "Asia/Shanghai"],
                "agents": ["weather"],
                "risk": {"convert_time": "high"},
                "timeout_s": 30,
            },
            "fetch": {
                "command": str(BIN / "mcp-server-fetch"),
                "args": ["--ignore-robots-txt", "--allow-private-ips"],
                "agents": ["weather"],
                "timeout_s": 30,
            },
            # Both doubles list the same tools: the names clash, each gets its server's.
            "market": {
                "url": http.url,
                "transport": "streamable_http",
                "headers": bearer,
                "agents": ["weather"],
                "include": ["daily", "stock_basic"],
            },
            "market_sse": {
                "url": sse.url,
                "transport": "sse",
                "headers": bearer,
                "agents": ["weather"],
                "exclude": ["stock_basic"],
            },
            "broken": {"command": "/nonexistent/mcp-server-nothing", "agents": ["weather"]},
            "misspelt": {"command": str(BIN / "mcp-server-time"), "agent": ["weather"]},
        }
    }


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    doubles: tuple[TushareMCP, TushareMCP],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("mcp-consume")
    config = data_dir / "mcp.json"
    config.write_text(json.dumps(_config(*doubles)))
    env = {"AGENT_MCP_CONFIG": str(config), "DOUBLE_TOKEN": DOUBLE_TOKEN}
    with serving(_llm_server, _meteo_server, data_dir, SQLITE, **env) as process:
        yield process


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.close()


def offered(llm: ScriptedLLM) -> set[str]:
    """The tool names the model was offered in its first request."""
    return {tool["function"]["name"] for tool in llm.requests[0]["tools"]}


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


def test_the_weather_agent_calls_the_time_servers_tool_and_answers(
    api: Api, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("get_current_time", {"timezone": "Asia/Shanghai"}),
        text("现在是北京时间下午。"),
    )

    reply = api.chat(graph="weather", message="现在几点？")

    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["status"] == "done"
    [result] = tool_results(body["messages"])
    assert '"timezone": "Asia/Shanghai"' in result and '"datetime": "' in result
    assert body["messages"][-1]["content"] == "现在是北京时间下午。"
    # The model read what the server answered.
    assert any(
        m["role"] == "tool" and "Asia/Shanghai" in json.dumps(m["content"], ensure_ascii=False)
        for m in llm.requests[-1]["messages"]
    )


def test_the_fetch_server_reads_a_local_page_for_the_agent(
    api: Api, llm: ScriptedLLM, page: str
) -> None:
    llm.script(tool_call("fetch", {"url": page}), text("今天限行 3 和 8。"))

    reply = api.chat(graph="weather", message="今天限行吗？")

    assert reply.status_code == 200, reply.text
    [result] = tool_results(reply.json()["messages"])
    assert PAGE_TEXT in result


def test_include_and_exclude_choose_the_tools_and_clashing_names_get_their_servers_prefix(
    api: Api, llm: ScriptedLLM
) -> None:
    llm.script(text("好的。"))

    assert api.chat(graph="weather", message="你好").status_code == 200

    names = offered(llm)
    assert {"get_weather", "ask_input", "get_current_time", "convert_time", "fetch"} <= names
    # market: only what `include` names; market_sse: all but what `exclude` names. `daily`
    # is on both, so each is called by its server's name; `monthly` and `stock_basic` are
    # on one only and keep their own.
    assert {"market_daily", "market_sse_daily", "stock_basic", "monthly"} <= names
    assert "daily" not in names and "market_stock_basic" not in names
    assert not any(name.startswith("market_sse_stock") for name in names)


def test_a_prefixed_tool_calls_its_own_server(
    api: Api, llm: ScriptedLLM, doubles: tuple[TushareMCP, TushareMCP]
) -> None:
    _, sse = doubles
    before = len(sse.calls)
    llm.script(
        tool_call("market_sse_daily", {"ts_code": "000001.SZ", "trade_date": "20240105"}),
        text("查到了。"),
    )

    reply = api.chat(graph="weather", message="平安银行日线")

    assert reply.status_code == 200, reply.text
    [result] = tool_results(reply.json()["messages"])
    assert "000001.SZ" in result
    assert [name for name, _ in sse.calls[before:]] == ["daily"]


def test_a_high_risk_tool_waits_for_the_users_confirmation(api: Api, llm: ScriptedLLM) -> None:
    args = {"source_timezone": "Asia/Shanghai", "time": "09:30", "target_timezone": "Europe/London"}
    llm.script(tool_call("convert_time", args), text("伦敦是凌晨一点半。"))

    asked = api.chat(graph="weather", message="北京九点半是伦敦几点？")

    assert asked.status_code == 200, asked.text
    body = asked.json()
    assert body["status"] == "interrupted"
    [question] = body["interrupts"]
    payload = question["metadata"]["payload"]
    assert payload["type"] == "confirm" and payload["tool"] == "convert_time"
    assert payload["args"] == args and payload["risk"] == "sensitive"
    assert len(llm.requests) == 1  # nothing ran while it waited

    resume = [{"interruptId": question["id"], "status": "resolved", "payload": {"value": True}}]
    done = api.chat(graph="weather", threadId=body["threadId"], resume=resume)

    assert done.status_code == 200, done.text
    [result] = tool_results(done.json()["messages"])
    assert "Europe/London" in result
    assert done.json()["messages"][-1]["content"] == "伦敦是凌晨一点半。"


def test_a_bad_server_entry_is_one_line_at_start_up_and_the_others_still_serve(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    broken = server.logged("server 'broken'", within_s=30)
    misspelt = server.logged("server 'misspelt'")

    assert "AGENT_MCP_CONFIG " in broken and "mcp.json" in broken
    assert "mcp-server-nothing" in broken or "No such file" in broken
    assert "unknown key 'agent'" in misspelt and "mcp.json" in misspelt
    assert sum("server 'broken'" in line for line in server.log) == 1
    llm.script(tool_call("get_current_time", {"timezone": "UTC"}), text("UTC 时间已查到。"))
    reply = api.chat(graph="weather", message="UTC 几点？")
    assert reply.status_code == 200, reply.text
    assert '"timezone": "UTC"' in tool_results(reply.json()["messages"])[0]


def test_a_secret_in_a_header_never_appears_in_logs_events_or_history(
    server: ServerProcess, api: Api, llm: ScriptedLLM, doubles: tuple[TushareMCP, TushareMCP]
) -> None:
    http, _ = doubles
    http.echo_auth("tool_error")  # the server answers with the Authorization it got
    try:
        llm.script(
            tool_call("market_daily", {"ts_code": "000001.SZ", "trade_date": "20240105"}),
            text("没查到。"),
        )
        thread_id = "t-mcp-secret"
        stream = api.run("weather", _run_body(thread_id, "平安银行日线"))
    finally:
        http.stop_echo()

    assert stream.status == 200
    results = stream.of("TOOL_CALL_RESULT")
    assert results and "request rejected: authorization=" in results[0]["content"]
    assert DOUBLE_TOKEN in http.request_headers[-1]["authorization"]  # it was sent
    history = api.http.get(f"/api/threads/{thread_id}").text
    run_id = stream.events[0]["runId"]
    replay = api.join(thread_id, run_id).raw.decode()
    for where, seen in {
        "events": stream.raw.decode(),
        "replayed events": replay,
        "history": history,
        "log": server.log_text,
        "model's requests": json.dumps(llm.requests, ensure_ascii=False),
    }.items():
        assert DOUBLE_TOKEN not in seen, where
        assert DOUBLE_TOKEN[:12] not in seen, where


def _run_body(thread_id: str, message: str) -> dict[str, Any]:
    return run_body(thread_id, ("m1", message))


def test_react_agent_tools_lists_every_agents_tools_with_source_and_risk(
    doubles: tuple[TushareMCP, TushareMCP], tmp_path: Path, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(_config(*doubles)))
    env = env_for_subprocess(
        llm, meteo, tmp_path, AGENT_MCP_CONFIG=str(config), DOUBLE_TOKEN=DOUBLE_TOKEN
    )

    listed = subprocess.run(
        [str(BIN / "react-agent"), "tools"], env=env, capture_output=True, text=True, timeout=120
    )

    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0] == ["AGENT", "TOOL", "SOURCE", "RISK"]
    assert ["weather", "get_weather", "built-in", "safe"] in rows
    assert ["weather", "get_current_time", "mcp:time", "safe"] in rows
    assert ["weather", "convert_time", "mcp:time", "sensitive"] in rows
    assert ["weather", "market_daily", "mcp:market", "safe"] in rows
    assert ["weather", "market_sse_daily", "mcp:market_sse", "safe"] in rows
    # The tushare agent has no token here: said on stderr, with the broken server's line.
    problems = listed.stderr.splitlines()
    assert any(line.startswith("tushare: tools unavailable") for line in problems)
    assert any("server 'broken'" in line and "mcp.json" in line for line in problems)
    assert any("unknown key 'agent'" in line for line in problems)
    assert DOUBLE_TOKEN not in listed.stdout + listed.stderr
