"""Stock resolution's pure parts: which tool to ask, with what, and reading its answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from tools.mcp.stock_resolve import (
    StockCandidate,
    build_stock_basic_args,
    find_lookup_tool,
    find_query_tool,
    find_stock_basic_tool,
    narrow_candidates,
    parse_stock_candidates,
)


@dataclass
class FakeTool:
    name: str
    inputSchema: dict[str, Any] = field(default_factory=dict)


def schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


DAILY = FakeTool("daily", schema(ts_code={"type": "string"}))
STOCK_BASIC = FakeTool("stock_basic", schema(name={"type": "string"}))
QUERY_OBJECT = FakeTool("query", schema(api_name={"type": "string"}, params={"type": "object"}))
QUERY_STRING = FakeTool(
    "tushare_query", schema(api_name={"type": "string"}, params={"type": "string"})
)
ODD_GENERIC = FakeTool("run_tushare", schema(api_name={"type": "string"}, params={}))

PINGAN = [
    StockCandidate("000001.SZ", "平安银行"),
    StockCandidate("601318.SH", "中国平安"),
]


def test_stock_basic_is_found_among_per_api_tools() -> None:
    assert find_stock_basic_tool([DAILY, STOCK_BASIC]) is STOCK_BASIC
    assert find_lookup_tool([DAILY, QUERY_OBJECT, STOCK_BASIC]) is STOCK_BASIC


def test_a_generic_query_tool_is_found_by_known_name_before_schema() -> None:
    assert find_query_tool([ODD_GENERIC, QUERY_OBJECT]) is QUERY_OBJECT
    assert find_lookup_tool([DAILY, QUERY_STRING]) is QUERY_STRING


def test_any_tool_taking_api_name_counts_as_a_generic_query_tool() -> None:
    assert find_query_tool([DAILY, ODD_GENERIC]) is ODD_GENERIC


def test_a_server_without_lookup_tools_yields_none() -> None:
    assert find_lookup_tool([DAILY]) is None
    assert find_stock_basic_tool([]) is None


def test_stock_basic_args_ask_for_listed_stocks_by_name_or_code() -> None:
    assert build_stock_basic_args(STOCK_BASIC, name="平安") == {"list_status": "L", "name": "平安"}
    assert build_stock_basic_args(STOCK_BASIC, ts_code="000001.SZ") == {
        "list_status": "L",
        "ts_code": "000001.SZ",
    }


def test_generic_tool_args_carry_the_api_name_and_params_as_an_object() -> None:
    assert build_stock_basic_args(QUERY_OBJECT, name="平安") == {
        "api_name": "stock_basic",
        "params": {"list_status": "L", "name": "平安"},
    }


def test_generic_tool_params_become_a_json_string_when_the_schema_says_string() -> None:
    args = build_stock_basic_args(QUERY_STRING, name="平安")
    assert args["api_name"] == "stock_basic"
    assert json.loads(args["params"]) == {"list_status": "L", "name": "平安"}
    assert "平安" in args["params"]  # kept readable, not \u-escaped


ROWS = json.dumps(
    [
        {"ts_code": "000001.SZ", "symbol": "000001", "name": "平安银行"},
        {"ts_code": "601318.SH", "symbol": "601318", "name": "中国平安"},
    ],
    ensure_ascii=False,
)
FIELDS_ITEMS = json.dumps(
    {
        "fields": ["ts_code", "name", "industry"],
        "items": [["000001.SZ", "平安银行", "银行"], ["601318.SH", "中国平安", "保险"]],
    },
    ensure_ascii=False,
)
HTTP_API_ENVELOPE = json.dumps(
    {"code": 0, "msg": "", "data": json.loads(FIELDS_ITEMS)}, ensure_ascii=False
)


@pytest.mark.parametrize("text", [ROWS, FIELDS_ITEMS, HTTP_API_ENVELOPE])
def test_candidates_are_read_from_every_json_shape(text: str) -> None:
    assert parse_stock_candidates(text) == PINGAN


def test_candidates_fall_back_to_code_and_name_in_plain_text() -> None:
    text = "查询结果：\n000001.SZ 平安银行\n601318.SH  中国平安, 保险\n"
    assert parse_stock_candidates(text) == PINGAN


def test_repeated_codes_are_listed_once_in_first_seen_order() -> None:
    rows = json.loads(ROWS) * 2
    assert parse_stock_candidates(json.dumps(rows, ensure_ascii=False)) == PINGAN


def test_an_error_answer_has_no_candidates() -> None:
    assert parse_stock_candidates('{"code": 40203, "msg": "每分钟最多访问该接口2次"}') == []
    assert parse_stock_candidates("[]") == []


def test_an_exact_name_wins_over_names_containing_it() -> None:
    listed = [*PINGAN, StockCandidate("000002.SZ", "平安")]
    assert narrow_candidates(listed, "平安") == [StockCandidate("000002.SZ", "平安")]


def test_names_containing_the_query_are_kept() -> None:
    listed = [*PINGAN, StockCandidate("600519.SH", "贵州茅台")]
    assert narrow_candidates(listed, "平安") == PINGAN


def test_a_server_match_without_the_name_in_it_is_kept_as_is() -> None:
    # e.g. a server matching pinyin or English names by its own rules
    assert narrow_candidates(PINGAN, "pingan") == PINGAN
