"""Tushare's three answer shapes, parsed into rows and rendered for the model."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

from tools.mcp.tushare_result import (
    MAX_BARS,
    ErrorReply,
    Table,
    bars_data,
    parse_text,
    readable,
    render,
)

BAR = {"ts_code": "000001.SZ", "trade_date": "20251231", "close": 11.2, "vol": 1234.5}


def test_an_array_of_row_objects_is_a_table() -> None:
    parsed = parse_text(json.dumps([BAR]))
    assert parsed == Table(fields=list(BAR), rows=[BAR])


def test_fields_and_items_become_row_objects() -> None:
    text = json.dumps({"fields": list(BAR), "items": [list(BAR.values())]})
    assert parse_text(text) == Table(fields=list(BAR), rows=[BAR])


def test_a_code_and_msg_answer_is_an_api_error() -> None:
    parsed = parse_text('{"code": 40203, "msg": "抱歉，您每分钟最多访问该接口2次"}')
    assert parsed == ErrorReply(code=40203, msg="抱歉，您每分钟最多访问该接口2次")


def test_the_http_api_envelope_with_code_zero_is_its_data() -> None:
    text = json.dumps({"code": 0, "msg": "", "data": {"fields": ["a"], "items": [[1], [2]]}})
    assert parse_text(text) == Table(fields=["a"], rows=[{"a": 1}, {"a": 2}])


def test_text_that_is_not_a_known_shape_is_left_alone() -> None:
    assert parse_text("平安银行 000001.SZ") is None
    assert readable("平安银行 000001.SZ") == "平安银行 000001.SZ"
    assert readable('{"hello": "world"}') == '{"hello": "world"}'


def test_rows_render_as_a_header_line_rows_and_a_count() -> None:
    text = readable(json.dumps([BAR, {**BAR, "trade_date": "20251230", "close": None}]))
    assert text.splitlines() == [
        "ts_code | trade_date | close | vol",
        "000001.SZ | 20251231 | 11.2 | 1234.5",
        "000001.SZ | 20251230 |  | 1234.5",
        "（共 2 行）",
    ]


def test_an_api_error_renders_as_error_text_with_its_code() -> None:
    text = render(ErrorReply(code=40203, msg="权限不足"))
    assert text.startswith("错误：")
    assert "40203" in text
    assert "权限不足" in text


def test_an_empty_answer_says_so() -> None:
    assert "0 行" in readable("[]")


def test_long_answers_are_cut_with_a_note() -> None:
    rows = [{**BAR, "trade_date": str(20250000 + i)} for i in range(5)]
    text = render(Table(fields=list(BAR), rows=rows), max_rows=2)
    lines = text.splitlines()
    assert len(lines) == 1 + 2 + 1
    assert "共 5 行" in lines[-1]
    assert "前 2 行" in lines[-1]


def ohlc(code: str, day: str, close: float, **extra: Any) -> dict[str, Any]:
    row = {"ts_code": code, "trade_date": day, "open": 1.0, "high": 2.0, "low": 0.5}
    return {**row, "close": close, "vol": 10.0, **extra}


def table(rows: list[dict[str, Any]]) -> Table:
    parsed = parse_text(json.dumps(rows))
    assert isinstance(parsed, Table)
    return parsed


def test_price_rows_become_ascending_bars_of_the_first_stock() -> None:
    rows = [
        ohlc("000001.SZ", "20240103", 3.0),
        ohlc("600519.SH", "20240104", 9.0),
        ohlc("000001.SZ", "20240102", 2.0, vol=None),
    ]

    data = bars_data(table(rows), "daily")

    assert data == {
        "kind": "bars",
        "tsCode": "000001.SZ",
        "freq": "daily",
        "bars": [
            {
                "time": "2024-01-02",
                "open": 1.0,
                "high": 2.0,
                "low": 0.5,
                "close": 2.0,
                "volume": None,
            },
            {
                "time": "2024-01-03",
                "open": 1.0,
                "high": 2.0,
                "low": 0.5,
                "close": 3.0,
                "volume": 10.0,
            },
        ],
    }


def test_only_the_latest_bars_are_kept_one_per_date() -> None:
    first = date(2020, 1, 1)
    days = [(first + timedelta(days=i)).strftime("%Y%m%d") for i in range(MAX_BARS + 5)]
    rows = [ohlc("000001.SZ", day, float(i)) for i, day in enumerate(days)]
    rows.append(ohlc("000001.SZ", days[-1], 99.0))  # the same date twice: the last row wins

    data = bars_data(table(rows))

    assert data is not None
    bars = data["bars"]
    assert len(bars) == MAX_BARS
    assert bars[0]["time"] == (first + timedelta(days=5)).isoformat()
    assert bars[-1]["close"] == 99.0
    assert len({bar["time"] for bar in bars}) == MAX_BARS


def test_rows_without_a_date_or_a_price_are_left_out_and_no_bars_is_no_data() -> None:
    rows = [
        ohlc("000001.SZ", "2024-01-05", 5.0),
        ohlc("000001.SZ", "", 6.0),
        ohlc("000001.SZ", "20240108", 7.0, high=None),
        ohlc("000001.SZ", "20240109", 8.0, low="n/a"),
    ]

    data = bars_data(table(rows), "weekly_basic")

    assert data is not None and data["freq"] is None
    assert [bar["time"] for bar in data["bars"]] == ["2024-01-05"]
    assert bars_data(table([ohlc("000001.SZ", "", 1.0)])) is None
    assert (
        bars_data(table([{"ts_code": "000001.SZ", "trade_date": "20240102", "close": 1}])) is None
    )
