"""A Tushare-shaped MCP server (FastMCP) on 127.0.0.1 for tests.

    with TushareMCP(token="t0k3n") as server:   # streamable HTTP at server.url
        ...
    TushareMCP(token=..., transport="sse")       # SSE only, same URL
    TushareMCP(token=..., generic=True)          # one generic `tushare_query` tool
    server.shape = "fields_items"                # or "rows" (default) / "error" (40203)
    server.stop(); server.start()                # down, then up again on the same port
    server.echo_auth("malformed")                # tools/call answers echo the Authorization
    server.echo_auth("not_json", on="initialize")  # header (see `EchoKind`); stop_echo() ends it
    server.methods                               # every JSON-RPC method served, in order

Every HTTP request must carry `Authorization: Bearer <token>`, else 401. The data
(tests/doubles/tushare_data.py) has real names and codes but synthetic prices.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Self

from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.doubles import tushare_data
from tests.doubles._server import ServedDouble, ServerThread

Shape = Literal["rows", "fields_items", "error"]
# How an answer that echoes the request's Authorization header fails:
EchoKind = Literal[
    "tool_error",  # a tool result with isError true, its text the echo
    "rpc_error",  # a JSON-RPC error (-32603), its message the echo
    "malformed",  # a result that is not a valid result: `content` is the echo (a string)
    "not_json",  # HTTP 200 application/json whose body is the echo, not JSON
]
ECHO_KINDS: tuple[EchoKind, ...] = ("tool_error", "rpc_error", "malformed", "not_json")

PATH = "/mcp/"
RATE_LIMIT_MSG = "抱歉，您每分钟最多访问该接口2次，权限的具体详情访问：https://tushare.pro/document/1?doc_id=108。"


def _answer(rows: list[dict[str, Any]], fields: list[str], shape: Shape) -> str:
    if shape == "error":
        return json.dumps({"code": 40203, "msg": RATE_LIMIT_MSG}, ensure_ascii=False)
    if shape == "fields_items":
        items = [[row.get(name) for name in fields] for row in rows]
        return json.dumps({"fields": fields, "items": items}, ensure_ascii=False)
    return json.dumps(rows, ensure_ascii=False)


def _default_echo(authorization: str) -> str:
    return f"request rejected: authorization={authorization}"


@dataclass(frozen=True)
class _Echo:
    kind: EchoKind
    text: Callable[[str], str]
    on: str
    when: Callable[[dict[str, Any]], bool] | None = None


def _echo_answer(echo: _Echo, request_id: Any, authorization: str) -> bytes:
    text = echo.text(authorization)
    if echo.kind == "not_json":
        return text.encode()
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if echo.kind == "rpc_error":
        reply["error"] = {"code": -32603, "message": text}
    elif echo.kind == "malformed":
        reply["result"] = {"content": text}
    else:
        reply["result"] = {"content": [{"type": "text", "text": text}], "isError": True}
    return json.dumps(reply, ensure_ascii=False).encode()


class _RequireBearer:
    """ASGI middleware: 401 unless the bearer token matches; keeps every request's headers."""

    def __init__(self, app: ASGIApp, double: TushareMCP) -> None:
        self.app = app
        self.double = double

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        self.double._record_headers(headers)
        if headers.get("authorization") != f"Bearer {self.double.token}":
            body = json.dumps({"code": 401, "msg": "token 无效或缺失"}, ensure_ascii=False).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b"Bearer"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["method"] == "POST":
            await self._rpc(headers, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _rpc(
        self, headers: dict[str, str], scope: Scope, receive: Receive, send: Send
    ) -> None:
        """Record a JSON-RPC request's method, answer it with the echo a rule matches, or
        pass it on."""
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and isinstance(request.get("method"), str):
            self.double._record_method(request["method"])
        echo = self.double._echo_for(request)
        if echo is not None:
            answer = _echo_answer(echo, request["id"], headers.get("authorization", ""))
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class _PinnedServerThread(ServerThread):
    """A ServerThread that binds a given port, so a restarted double comes back there."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        super().__init__(app)
        self._pinned_port = port

    def start(self) -> Self:
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._pinned_port))
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name=f"double:{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout_s
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError(f"server on port {self.port} died during startup")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"server on port {self.port} did not start in time")
            self._thread.join(0.005)
        return self


class TushareMCP(ServedDouble):
    """The double. `url` is what TUSHARE_MCP_URL should be set to."""

    def __init__(
        self,
        *,
        token: str,
        transport: Literal["streamable_http", "sse"] = "streamable_http",
        generic: bool = False,
        shape: Shape = "rows",
    ) -> None:
        self.token = token
        self.transport = transport
        self.generic = generic
        self.shape: Shape = shape
        self._lock = threading.Lock()
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._headers: list[dict[str, str]] = []
        self._methods: list[str] = []
        self._live: ServerThread | None = None
        self._port = 0
        self._echoes: tuple[_Echo, ...] = ()

    # --- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        """Serve (again, on the same port after a stop)."""
        if self._live is not None:
            return self
        app = _RequireBearer(self._mcp_app(), self)
        server = _PinnedServerThread(app, self._port) if self._port else ServerThread(app)
        server.start()
        self._live, self._port = server, server.port
        return self

    def stop(self) -> None:
        """Stop serving: connections are refused until `start()`."""
        if self._live is not None:
            self._live.stop()
            self._live = None

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp/` (same for both transports)."""
        if not self._port:
            raise RuntimeError("TushareMCP not started")
        return f"http://127.0.0.1:{self._port}{PATH}"

    # --- faults ----------------------------------------------------------------------

    def echo_auth(
        self,
        kind: EchoKind,
        text: Callable[[str], str] = _default_echo,
        *,
        on: str = "tools/call",
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Answer JSON-RPC `on` requests with a `kind` failure carrying
        `text(<the request's Authorization header>)`: a server echoing the credential.

        `when` (given the JSON-RPC request) narrows which requests; each call adds a
        rule, the first that matches answers.
        """
        if kind not in ECHO_KINDS:
            raise ValueError(f"unknown echo kind {kind!r}")
        with self._lock:
            self._echoes = (*self._echoes, _Echo(kind, text, on, when))

    def stop_echo(self) -> None:
        """Answer normally again (every `echo_auth` rule is dropped)."""
        with self._lock:
            self._echoes = ()

    def _echo_for(self, request: Any) -> _Echo | None:
        if not isinstance(request, dict) or "id" not in request:
            return None
        for echo in self._echoes:
            if request.get("method") == echo.on and (echo.when is None or echo.when(request)):
                return echo
        return None

    # --- what the tests look at ------------------------------------------------------

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tool call served: (tool name, arguments)."""
        with self._lock:
            return list(self._calls)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every HTTP request (lower-case names), refused ones included."""
        with self._lock:
            return list(self._headers)

    def _record_headers(self, headers: dict[str, str]) -> None:
        with self._lock:
            self._headers.append(headers)

    @property
    def methods(self) -> list[str]:
        """The JSON-RPC method of every request served, notifications included."""
        with self._lock:
            return list(self._methods)

    def _record_method(self, method: str) -> None:
        with self._lock:
            self._methods.append(method)

    def _record_call(self, name: str, arguments: dict[str, Any]) -> None:
        with self._lock:
            self._calls.append((name, arguments))

    # --- the Tushare APIs ------------------------------------------------------------

    def api(self, api_name: str, params: dict[str, Any]) -> str:
        """Answer one Tushare API call in the current result shape."""
        if api_name == "stock_basic":
            rows = tushare_data.stock_basic_rows()
            if params.get("ts_code"):
                rows = [r for r in rows if r["ts_code"] == params["ts_code"]]
            if params.get("name"):
                rows = [r for r in rows if params["name"] in r["name"]]
            return _answer(rows, tushare_data.STOCK_BASIC_FIELDS, self.shape)
        if api_name in ("daily", "monthly"):
            source = tushare_data.daily_rows if api_name == "daily" else tushare_data.monthly_rows
            rows = tushare_data.select_bars(
                source(str(params.get("ts_code", ""))),
                trade_date=str(params.get("trade_date", "")),
                start_date=str(params.get("start_date", "")),
                end_date=str(params.get("end_date", "")),
            )
            return _answer(rows, tushare_data.BAR_FIELDS, self.shape)
        return json.dumps({"code": 40101, "msg": f"接口 {api_name} 不存在"}, ensure_ascii=False)

    def _mcp_app(self) -> ASGIApp:
        # A fresh FastMCP per start: its session manager runs only once.
        mcp = FastMCP(
            "tushare-double",
            host="127.0.0.1",
            streamable_http_path=PATH,
            sse_path=PATH,
            message_path="/messages/",
            transport_security=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1:*", "localhost:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
            ),
        )
        if self.generic:
            self._add_generic_tool(mcp)
        else:
            self._add_api_tools(mcp)
        return mcp.sse_app() if self.transport == "sse" else mcp.streamable_http_app()

    def _add_api_tools(self, mcp: FastMCP) -> None:
        @mcp.tool(structured_output=False)
        def stock_basic(
            ts_code: str = "",
            name: str = "",
            market: str = "",
            list_status: str = "L",
            exchange: str = "",
        ) -> str:
            """股票列表：上市股票的代码、名称、地区、行业、市场、上市日期。name 模糊匹配。"""
            return self._answer(
                "stock_basic", {"ts_code": ts_code, "name": name, "list_status": list_status}
            )

        @mcp.tool(structured_output=False)
        def daily(
            ts_code: str = "", trade_date: str = "", start_date: str = "", end_date: str = ""
        ) -> str:
            """A股日线行情（未复权）。日期格式 YYYYMMDD。"""
            return self._answer("daily", _bar_params(ts_code, trade_date, start_date, end_date))

        @mcp.tool(structured_output=False)
        def monthly(
            ts_code: str = "", trade_date: str = "", start_date: str = "", end_date: str = ""
        ) -> str:
            """A股月线行情。日期格式 YYYYMMDD。"""
            return self._answer("monthly", _bar_params(ts_code, trade_date, start_date, end_date))

    def _answer(self, api_name: str, params: dict[str, str]) -> str:
        """Record the call (given arguments only) and answer it from the data set."""
        self._record_call(api_name, {k: v for k, v in params.items() if v})
        return self.api(api_name, params)

    def _add_generic_tool(self, mcp: FastMCP) -> None:
        @mcp.tool(structured_output=False)
        def tushare_query(api_name: str, params: str = "{}", fields: str = "") -> str:
            """调用任意 Tushare 接口。api_name 如 stock_basic、daily；params 为 JSON 字符串。"""
            try:
                decoded = json.loads(params or "{}")
            except json.JSONDecodeError:
                return json.dumps({"code": 40001, "msg": "params 不是 JSON"}, ensure_ascii=False)
            self._record_call("tushare_query", {"api_name": api_name, "params": decoded})
            return self.api(api_name, decoded if isinstance(decoded, dict) else {})


def _bar_params(ts_code: str, trade_date: str, start_date: str, end_date: str) -> dict[str, str]:
    return {
        "ts_code": ts_code,
        "trade_date": trade_date,
        "start_date": start_date,
        "end_date": end_date,
    }
