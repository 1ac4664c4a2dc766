"""`resolve_stock`: a stock name or code to its ts_code, asking the user when needed.

Neither given: an `input` interrupt asks for one. A code is returned at once; a name
is looked up through the server's stock_basic (or generic query) tool, and several
matches become a `select` interrupt. On resume the tool runs again from the top, so
the lookup repeats and the answer is checked against the same options. A lookup that
fails (the server's error, no lookup tool, no match) raises ToolException: the call's
outcome is `error`, with the reason as its text.
"""

from __future__ import annotations

import json

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from tools.interrupts import (
    Option,
    ask,
    input_payload,
    select_payload,
)
from tools.mcp.stock_resolve import (
    StockCandidate,
    build_stock_basic_args,
    find_lookup_tool,
    narrow_candidates,
    parse_stock_candidates,
)
from tools.mcp.tushare_client import TushareMcp, TushareMcpError, read_result, result_text

NAME = "resolve_stock"
DESCRIPTION = (
    "解析股票名称或代码为 ts_code（如 000001.SZ）。用户只给出简称或模糊名称时必须先调用此工具；"
    "有多只匹配时会让用户选择；两个参数都不给时会请用户输入。返回 JSON：{ts_code, name}。"
)
INPUT_MESSAGE = "请输入股票名称或代码："
INPUT_PLACEHOLDER = "平安银行 / 000001.SZ"
SELECT_MESSAGE = "找到多只股票，请选择："
SELECT_MESSAGE_TRUNCATED = "找到 {count} 只股票，以下是前 {shown} 只，请选择："
NOT_FOUND = "未找到名称「{name}」对应的股票"
NO_LOOKUP_TOOL = (
    "未找到 Tushare MCP 的 stock_basic 工具或通用查询工具，无法按名称查找股票；"
    "请让用户直接提供 ts_code（如 000001.SZ）。"
)
MAX_OPTIONS = 20


class ResolveStockArgs(BaseModel):
    ts_code: str = Field("", description="TS 代码，如 000001.SZ；已知代码时填写")
    name: str = Field("", description="股票名称或简称，支持模糊匹配，如 平安")


def _found(ts_code: str, name: str | None) -> str:
    return json.dumps({"ts_code": ts_code, "name": name}, ensure_ascii=False)


def _pick(candidates: list[StockCandidate]) -> StockCandidate:
    """Ask the user to pick one of several candidates (raises Cancelled)."""
    shown = candidates[:MAX_OPTIONS]
    message = (
        SELECT_MESSAGE
        if len(shown) == len(candidates)
        else SELECT_MESSAGE_TRUNCATED.format(count=len(candidates), shown=len(shown))
    )
    options: list[Option] = [{"label": f"{c.name} {c.ts_code}", "value": c.ts_code} for c in shown]
    code = ask(select_payload(message, options))
    return next(c for c in shown if c.ts_code == code)


async def _lookup(client: TushareMcp, name: str) -> list[StockCandidate]:
    """Candidates for `name`; ToolException with the readable reason when there are none."""
    tool = find_lookup_tool(client.tools)
    if tool is None:
        raise ToolException(NO_LOOKUP_TOOL)
    try:
        result = await client.call_tool(tool.name, build_stock_basic_args(tool, name=name))
    except TushareMcpError as exc:
        raise ToolException(str(exc)) from None
    read = read_result(result)
    if read.failed:
        raise ToolException(client.scrub(read.text))
    candidates = narrow_candidates(parse_stock_candidates(result_text(result)), name)
    if not candidates:
        raise ToolException(NOT_FOUND.format(name=name))
    return candidates


def make_resolve_stock_tool(client: TushareMcp) -> BaseTool:
    """The `resolve_stock` tool, looking names up through `client` (a cancel raises Cancelled)."""

    async def resolve_stock(ts_code: str = "", name: str = "") -> str:
        code, wanted = ts_code.strip(), name.strip()
        if not code and not wanted:
            answer = str(ask(input_payload(INPUT_MESSAGE, INPUT_PLACEHOLDER))).strip()
            if "." in answer:
                code = answer.upper()
            else:
                wanted = answer
        if code:
            return _found(code, wanted or None)
        candidates = await _lookup(client, wanted)
        picked = candidates[0] if len(candidates) == 1 else _pick(candidates)
        return _found(picked.ts_code, picked.name)

    return StructuredTool.from_function(
        coroutine=resolve_stock,
        name=NAME,
        description=DESCRIPTION,
        args_schema=ResolveStockArgs,
        handle_tool_error=True,  # the reason becomes the result, with status "error"
    )
