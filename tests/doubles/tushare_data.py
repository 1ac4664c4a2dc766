"""A small Tushare data set for the MCP double.

The names, codes, areas, industries, markets and listing dates are those of real
A-share stocks. ALL PRICES AND VOLUMES ARE SYNTHETIC: a seeded random walk per stock,
deterministic across runs, useful only for testing. Trading days are weekdays of
2024-2025 (holidays ignored).
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from functools import cache
from typing import Any

STOCK_BASIC_FIELDS = ["ts_code", "symbol", "name", "area", "industry", "market", "list_date"]
BAR_FIELDS = [
    "ts_code",
    "trade_date",
    "open",
    "high",
    "low",
    "close",
    "pre_close",
    "change",
    "pct_chg",
    "vol",
    "amount",
]

# (ts_code, name, area, industry, market, list_date, synthetic starting price)
_STOCKS: list[tuple[str, str, str, str, str, str, float]] = [
    ("000001.SZ", "平安银行", "深圳", "银行", "主板", "19910403", 10.5),
    ("601318.SH", "中国平安", "深圳", "保险", "主板", "20070301", 42.0),
    ("600519.SH", "贵州茅台", "贵州", "白酒", "主板", "20010827", 1680.0),
    ("000858.SZ", "五粮液", "四川", "白酒", "主板", "19980427", 140.0),
    ("600036.SH", "招商银行", "深圳", "银行", "主板", "20020409", 31.0),
    ("000333.SZ", "美的集团", "广东", "家用电器", "主板", "20130918", 62.0),
    ("300750.SZ", "宁德时代", "福建", "电气设备", "创业板", "20180611", 165.0),
    ("601398.SH", "工商银行", "北京", "银行", "主板", "20061027", 5.2),
    ("002594.SZ", "比亚迪", "深圳", "汽车整车", "主板", "20110630", 230.0),
    ("600276.SH", "恒瑞医药", "江苏", "化学制药", "主板", "20000718", 45.0),
    ("000002.SZ", "万科A", "深圳", "全国地产", "主板", "19910129", 9.8),
    ("601857.SH", "中国石油", "北京", "石油开采", "主板", "20071105", 7.4),
    ("688981.SH", "中芯国际", "上海", "半导体", "科创板", "20200716", 52.0),
    ("601628.SH", "中国人寿", "北京", "保险", "主板", "20070109", 28.0),
]

FIRST_DAY = date(2024, 1, 2)
LAST_DAY = date(2025, 12, 31)


def stock_basic_rows() -> list[dict[str, Any]]:
    """Every listed stock, in the row shape of Tushare's stock_basic."""
    return [
        {
            "ts_code": code,
            "symbol": code.split(".")[0],
            "name": name,
            "area": area,
            "industry": industry,
            "market": market,
            "list_date": listed,
        }
        for code, name, area, industry, market, listed, _ in _STOCKS
    ]


def _trading_days() -> list[date]:
    days, day = [], FIRST_DAY
    while day <= LAST_DAY:
        if day.weekday() < 5:
            days.append(day)
        day += timedelta(days=1)
    return days


def _bar(
    ts_code: str, day: str, o: float, h: float, lo: float, c: float, pre: float, vol: float
) -> dict[str, Any]:
    return {
        "ts_code": ts_code,
        "trade_date": day,
        "open": round(o, 2),
        "high": round(h, 2),
        "low": round(lo, 2),
        "close": round(c, 2),
        "pre_close": round(pre, 2),
        "change": round(c - pre, 2),
        "pct_chg": round((c - pre) / pre * 100, 4),
        "vol": round(vol, 2),
        # amount in thousands of yuan; vol in lots of 100 shares, as Tushare reports them
        "amount": round(vol * 100 * (o + c) / 2 / 1000, 3),
    }


@cache
def daily_rows(ts_code: str) -> tuple[dict[str, Any], ...]:
    """Synthetic daily bars of `ts_code`, newest first (Tushare's order)."""
    start = next((s[6] for s in _STOCKS if s[0] == ts_code), None)
    if start is None:
        return ()
    rng = random.Random(ts_code)
    rows, close = [], start
    for day in _trading_days():
        pre = close
        open_ = pre * (1 + rng.uniform(-0.01, 0.01))
        close = max(0.01, pre * (1 + rng.gauss(0.0003, 0.017)))
        high = max(open_, close) * (1 + rng.uniform(0, 0.012))
        low = min(open_, close) * (1 - rng.uniform(0, 0.012))
        vol = rng.uniform(2e5, 1.5e6) * (20 / max(start, 1)) ** 0.5
        rows.append(_bar(ts_code, day.strftime("%Y%m%d"), open_, high, low, close, pre, vol))
    return tuple(reversed(rows))


@cache
def monthly_rows(ts_code: str) -> tuple[dict[str, Any], ...]:
    """Monthly bars made from the daily ones, dated on each month's last trading day."""
    months: dict[str, list[dict[str, Any]]] = {}
    for row in reversed(daily_rows(ts_code)):
        months.setdefault(row["trade_date"][:6], []).append(row)
    bars, pre = [], None
    for days in months.values():
        first, last = days[0], days[-1]
        pre_close = first["pre_close"] if pre is None else pre
        bars.append(
            _bar(
                ts_code,
                last["trade_date"],
                first["open"],
                max(d["high"] for d in days),
                min(d["low"] for d in days),
                last["close"],
                pre_close,
                sum(d["vol"] for d in days),
            )
        )
        pre = last["close"]
    return tuple(reversed(bars))


def select_bars(
    rows: tuple[dict[str, Any], ...],
    *,
    trade_date: str = "",
    start_date: str = "",
    end_date: str = "",
) -> list[dict[str, Any]]:
    """Rows filtered the way Tushare filters by trade_date or a date range."""
    if trade_date:
        return [r for r in rows if r["trade_date"] == trade_date]
    return [
        r
        for r in rows
        if (not start_date or r["trade_date"] >= start_date)
        and (not end_date or r["trade_date"] <= end_date)
    ]
