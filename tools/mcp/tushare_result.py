"""The shapes a Tushare answer comes in, parsed into rows and rendered for the model.

Tushare MCP servers answer with a text block holding JSON in one of three shapes: an
array of row objects, `{"fields": [...], "items": [[...]]}` (possibly nested under
`data`, as the Tushare HTTP API does), or `{"code": 40203, "msg": "..."}` for an error.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_RENDERED_ROWS = 200

API_ERROR = "错误：Tushare 接口返回错误 {code}：{msg}"
EMPTY_TABLE = "查询结果为空（0 行）。"
TABLE_FOOTER = "（共 {count} 行）"
TRUNCATED_FOOTER = "（共 {count} 行，仅显示前 {shown} 行；请缩小日期范围或减少字段）"

# Keys under which an envelope may nest the table.
_NESTED_KEYS = ("data", "items", "rows", "result", "records")

# Price bars for charts: rows with these fields carry them, at most this many (the latest).
BAR_FIELDS = ("trade_date", "open", "high", "low", "close")
MAX_BARS = 1000
BAR_FREQS = ("daily", "weekly", "monthly")


@dataclass(frozen=True)
class Table:
    """Rows of one answer, with the field order the server gave."""

    fields: list[str]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class ErrorReply:
    """A `{code, msg}` answer: rate or permission limits (40203) and the like."""

    code: int | str
    msg: str


def parse_data(data: Any) -> Table | ErrorReply | None:
    """The rows (or the API error) in decoded JSON, or None when it has no known shape."""
    if isinstance(data, list):
        if all(isinstance(row, dict) for row in data):
            fields: dict[str, None] = {}
            for row in data:
                fields.update(dict.fromkeys(row))
            return Table(fields=list(fields), rows=list(data))
        return None
    if not isinstance(data, dict):
        return None
    fields_value, items = data.get("fields"), data.get("items")
    if isinstance(fields_value, list) and isinstance(items, list):
        names = [str(name) for name in fields_value]
        rows = [dict(zip(names, item, strict=False)) for item in items if isinstance(item, list)]
        return Table(fields=names, rows=rows)
    code = data.get("code")
    if code not in (None, 0, "0") and ("msg" in data or "message" in data):
        return ErrorReply(code=code, msg=str(data.get("msg") or data.get("message") or ""))
    for key in _NESTED_KEYS:
        if key in data:
            nested = parse_data(data[key])
            if nested is not None:
                return nested
    return None


def parse_text(text: str) -> Table | ErrorReply | None:
    """`parse_data` of a text block; None when it is not JSON of a known shape."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return parse_data(data)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("\n", " ").replace("|", "/")
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)


def render(parsed: Table | ErrorReply, *, max_rows: int = MAX_RENDERED_ROWS) -> str:
    """A compact pipe-separated table (header first), or the `错误：` text of an API error."""
    if isinstance(parsed, ErrorReply):
        return API_ERROR.format(code=parsed.code, msg=parsed.msg)
    if not parsed.rows:
        return EMPTY_TABLE
    shown = parsed.rows[:max_rows]
    lines = [" | ".join(parsed.fields)]
    lines.extend(" | ".join(_cell(row.get(name)) for name in parsed.fields) for row in shown)
    count = len(parsed.rows)
    footer = (
        TABLE_FOOTER.format(count=count)
        if count == len(shown)
        else TRUNCATED_FOOTER.format(count=count, shown=len(shown))
    )
    lines.append(footer)
    return "\n".join(lines)


def readable(text: str) -> str:
    """`text` rendered as rows when it holds a known shape, else unchanged."""
    parsed = parse_text(text)
    return text if parsed is None else render(parsed)


def _number(value: Any) -> float | None:
    """`value` as a finite float (numbers or numeric strings), else None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _iso_date(value: Any) -> str | None:
    """A Tushare date (`YYYYMMDD`, or already `YYYY-MM-DD`) as `YYYY-MM-DD`, else None."""
    text = str(value or "").strip()
    if len(text) not in (8, 10):  # strptime takes one-digit months and days too
        return None
    for form in ("%Y%m%d", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, form).date().isoformat()
        except ValueError:
            continue
    return None


def bars_data(table: Table, freq: str | None = None) -> dict[str, Any] | None:
    """The table's price bars as chart data, or None when it holds none.

    `{"kind": "bars", "tsCode", "freq", "bars": [{"time", "open", "high", "low", "close",
    "volume"}]}`: one stock (the first row's), ascending by date, one bar per date (charts
    refuse repeated times), the latest MAX_BARS. Rows missing a date or a price are left out.
    """
    if not set(BAR_FIELDS) <= set(table.fields) or not table.rows:
        return None
    code = table.rows[0].get("ts_code")
    by_date: dict[str, dict[str, Any]] = {}
    for row in table.rows:
        if row.get("ts_code") != code:
            continue
        day = _iso_date(row.get("trade_date"))
        prices = [_number(row.get(name)) for name in ("open", "high", "low", "close")]
        if day is None or any(price is None for price in prices):
            continue
        open_, high, low, close = prices
        volume = _number(row.get("vol"))
        by_date[day] = {
            "time": day,
            "open": open_,
            "high": high,
            "low": low,
            "close": close,
            "volume": volume,
        }
    if not by_date:
        return None
    bars = [by_date[day] for day in sorted(by_date)][-MAX_BARS:]
    return {
        "kind": "bars",
        "tsCode": code if isinstance(code, str) and code else None,
        "freq": freq if freq in BAR_FREQS else None,
        "bars": bars,
    }
