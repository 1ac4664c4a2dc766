"""From a stock name or code to candidate stocks: pure functions over MCP tool shapes.

A server either lists one tool per Tushare API (`stock_basic`) or one generic query
tool taking `api_name` and `params`; both are handled here, as are all the answer
shapes of `tools.mcp.tushare_result` plus plain text such as `000001.SZ 平安银行`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tools.mcp.tushare_result import Table, parse_text

STOCK_BASIC = "stock_basic"
GENERIC_QUERY_NAMES = ("sdk_call", "tushare_query", "get_api_query", "query", "call_api")

_CODE_AND_NAME = re.compile(r"(\d{6}\.[A-Z]{2})\s+([^\n,|]+)")


class ToolShape(Protocol):
    """What is needed of an MCP tool description (`mcp.types.Tool` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def inputSchema(self) -> dict[str, Any]: ...


T = TypeVar("T", bound=ToolShape)


@dataclass(frozen=True)
class StockCandidate:
    ts_code: str
    name: str


def _properties(tool: ToolShape) -> Mapping[str, Any]:
    schema = tool.inputSchema or {}
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def find_stock_basic_tool(tools: Iterable[T]) -> T | None:
    """The server's `stock_basic` tool, if it lists one."""
    return next((tool for tool in tools if tool.name == STOCK_BASIC), None)


def find_query_tool(tools: Iterable[T]) -> T | None:
    """A generic query tool: a known name first, else any tool taking `api_name`."""
    listed = list(tools)
    for name in GENERIC_QUERY_NAMES:
        for tool in listed:
            if tool.name == name and "api_name" in _properties(tool):
                return tool
    return next((tool for tool in listed if "api_name" in _properties(tool)), None)


def find_lookup_tool(tools: Iterable[T]) -> T | None:
    """The tool to look stocks up with: `stock_basic`, else a generic query tool."""
    listed = list(tools)
    return find_stock_basic_tool(listed) or find_query_tool(listed)


def _accepts_only_string(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind is not None:
        return kind == "string" or (isinstance(kind, list) and "object" not in kind)
    variants = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(variants, list):
        kinds = {v.get("type") for v in variants if isinstance(v, dict)}
        return "string" in kinds and "object" not in kinds
    return False


def build_stock_basic_args(tool: ToolShape, *, name: str = "", ts_code: str = "") -> dict[str, Any]:
    """Arguments for a listed-stocks lookup through `tool`.

    `stock_basic` gets `{list_status: "L", ts_code?, name?}`; a generic query tool gets
    `{api_name: "stock_basic", params: {...}}`, with `params` as a JSON string when its
    schema only takes a string.
    """
    params: dict[str, Any] = {"list_status": "L"}
    if ts_code:
        params["ts_code"] = ts_code
    if name:
        params["name"] = name
    if tool.name == STOCK_BASIC:
        return params
    params_schema = _properties(tool).get("params")
    if _accepts_only_string(params_schema):
        return {"api_name": STOCK_BASIC, "params": json.dumps(params, ensure_ascii=False)}
    return {"api_name": STOCK_BASIC, "params": params}


def _from_rows(table: Table) -> list[StockCandidate]:
    found = []
    for row in table.rows:
        code, name = row.get("ts_code"), row.get("name")
        if isinstance(code, str) and code and isinstance(name, str) and name:
            found.append(StockCandidate(ts_code=code.strip(), name=name.strip()))
    return found


def parse_stock_candidates(text: str) -> list[StockCandidate]:
    """Candidates (unique by ts_code, in order) in a lookup's answer text."""
    parsed = parse_text(text)
    if isinstance(parsed, Table):
        found = _from_rows(parsed)
    else:
        found = [
            StockCandidate(ts_code=code, name=name.strip())
            for code, name in _CODE_AND_NAME.findall(text)
            if name.strip()
        ]
    unique: dict[str, StockCandidate] = {}
    for candidate in found:
        unique.setdefault(candidate.ts_code, candidate)
    return list(unique.values())


def narrow_candidates(candidates: Sequence[StockCandidate], name: str) -> list[StockCandidate]:
    """Keep the stocks that match `name`: an exact name wins, else names containing it.

    A server that matched by its own rules (or ignored the name) may return others;
    when nothing contains the name, the server's list is kept as it is.
    """
    wanted = name.strip()
    exact = [c for c in candidates if c.name == wanted]
    if exact:
        return exact
    containing = [c for c in candidates if wanted and wanted in c.name]
    return containing or list(candidates)
