"""Tool results drawn as charts: a tushare bars result as a candlestick chart with volume
(lightweight-charts, loaded on demand), a get_weather result as a forecast card. Both are
drawn from the data the result carries (`metadata.data`), live and from the history."""

from __future__ import annotations

import pytest

import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.doubles.llm import ScriptedLLM, reasoning, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_data import daily_rows
from tests.support.processes import ServerProcess
from tests.web.conftest import Chat

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

CODE = "000001.SZ"
# July 2025 up to the 30th: 22 weekdays, so 22 daily bars in the double's data.
JULY = {"ts_code": CODE, "start_date": "20250701", "end_date": "20250730"}
ANSWER = "平安银行 7 月震荡上行，成交量温和。"
README_ANSWER = (
    "### 平安银行（000001.SZ）7 月走势\n\n"
    "| 指标 | 数值 | 解读 |\n|---|---|---|\n"
    "| 收盘 | 6.77 | 月内低点附近 |\n"
    "| 区间 | 6.60 – 7.45 | 上沿压力明显 |\n\n"
    "- **均线**：MA5 下穿 MA10，短线偏弱\n"
    "- **成交量**：下跌日放量，注意回撤\n\n"
    "整体走势**偏弱震荡**，可继续观察 MA20 附近的支撑。"
)


def july_rows() -> dict[str, dict[str, Any]]:
    """The double's daily rows of the range, by ISO date."""
    rows = {
        f"{r['trade_date'][:4]}-{r['trade_date'][4:6]}-{r['trade_date'][6:]}": r
        for r in daily_rows(CODE)
        if JULY["start_date"] <= r["trade_date"] <= JULY["end_date"]
    }
    assert len(rows) == 22
    return rows


def tool_message(server: ServerProcess, thread_id: str, name_hint: str) -> dict[str, Any]:
    """The thread's tool message whose result mentions `name_hint`, as the API shows it."""
    view = httpx.get(f"{server.url}/api/threads/{thread_id}", timeout=5).json()
    tools = [m for m in view["messages"] if m["role"] == "tool"]
    found = [m for m in tools if name_hint in str(m.get("metadata", {}).get("data", {}))]
    assert found, tools
    return found[-1]


def candles(chat: Chat) -> Locator:
    return chat.tool("daily").locator(".chart-candles")


def legend_value(chart: Locator, key: str) -> str:
    return chart.locator(f'.chart-legend [data-key="{key}"] .legend-value').inner_text()


def hover(page: Page, chart: Locator, fraction: float) -> str:
    """Move the mouse over the chart's plot at `fraction` of its width; the legend's date."""
    box = chart.locator(".chart-canvas").bounding_box()
    assert box is not None
    before = chart.locator(".chart-legend").get_attribute("data-time")
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] * 0.4)
    expect(chart.locator(".chart-legend")).not_to_have_attribute("data-time", before or "")
    return chart.locator(".chart-legend").get_attribute("data-time") or ""


def price(value: float) -> str:
    return f"{value:,.2f}"


def run_daily(chat: Chat, llm: ScriptedLLM) -> Locator:
    llm.script(tool_call("daily", JULY), text(ANSWER))
    chat.open("tushare")
    chat.send("平安银行 7 月的日线")
    expect(chat.answers.last).to_have_text(ANSWER)
    chat.wait_idle()
    return candles(chat)


def test_a_daily_price_answer_draws_22_candles_with_volume_and_hovering_shows_a_bars_prices(
    chat: Chat, llm: ScriptedLLM, server: ServerProcess
) -> None:
    rows = july_rows()
    chart = run_daily(chat, llm)

    expect(chart).to_have_attribute("data-bars", "22")
    expect(chart).to_have_attribute("data-volume", "22")
    expect(chart.locator("canvas").first).to_be_visible()
    expect(chart.locator(".chart-caption")).to_contain_text(CODE)
    expect(chart.locator(".chart-caption")).to_contain_text("日K")
    # At rest the legend shows the newest bar.
    last = max(rows)
    expect(chart.locator(".chart-legend")).to_have_attribute("data-time", last)
    assert legend_value(chart, "close") == price(rows[last]["close"])
    chat.shot("chart-candles")

    # The crosshair follows the mouse: the legend shows the hovered bar's own prices.
    left = hover(chat.page, chart, 0.2)
    right = hover(chat.page, chart, 0.6)
    assert left in rows and right in rows and left < right
    bar = rows[right]
    for key in ("open", "high", "low", "close"):
        assert legend_value(chart, key) == price(bar[key]), key
    assert legend_value(chart, "volume")
    chat.shot("chart-card", of=chat.tool("daily"))
    chat.shot("chart-hover")

    # The bars travel with the result as data (not read from its text)...
    message = tool_message(server, chat.thread_id, CODE)
    data = message["metadata"]["data"]
    assert data["kind"] == "bars" and data["freq"] == "daily" and len(data["bars"]) == 22
    # ...and the thread read back draws the same chart.
    chat.page.reload()
    expect(candles(chat)).to_have_attribute("data-bars", "22")
    expect(candles(chat)).to_have_attribute("data-volume", "22")
    expect(chat.tool("daily")).to_have_attribute("data-state", "done")


def test_moving_averages_and_the_colour_convention_toggle_and_are_remembered(
    chat: Chat, llm: ScriptedLLM
) -> None:
    chart = run_daily(chat, llm)
    expect(chart).to_have_attribute("data-bars", "22")
    ma20 = chart.get_by_role("button", name="MA20")
    convention = chart.locator(".chip-convention")
    expect(ma20).to_have_attribute("aria-pressed", "true")
    expect(chart.locator('.chart-legend [data-key="ma20"]')).to_have_count(1)
    expect(chart).to_have_attribute("data-convention", "red-up")
    expect(convention).to_have_text("红涨绿跌")
    up = chart.locator('.chart-legend .legend-value[data-dir="up"], .legend-value[data-dir="down"]')
    colour_before = up.first.evaluate("el => getComputedStyle(el).color")

    ma20.click()
    expect(ma20).to_have_attribute("aria-pressed", "false")
    expect(chart.locator('.chart-legend [data-key="ma20"]')).to_have_count(0)
    convention.click()
    expect(chart).to_have_attribute("data-convention", "green-up")
    expect(convention).to_have_text("绿涨红跌")
    assert up.first.evaluate("el => getComputedStyle(el).color") != colour_before
    chat.shot("chart-toggled")

    chat.page.reload()
    expect(candles(chat)).to_have_attribute("data-bars", "22")
    expect(candles(chat).get_by_role("button", name="MA20")).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(candles(chat)).to_have_attribute("data-convention", "green-up")


def test_the_chart_can_be_read_with_the_keyboard_bar_by_bar(chat: Chat, llm: ScriptedLLM) -> None:
    rows = july_rows()
    dates = sorted(rows)
    chart = run_daily(chat, llm)
    expect(chart).to_have_attribute("data-bars", "22")
    plot = chart.locator(".chart-canvas")
    expect(plot).to_have_attribute("aria-label", re.compile("22"))

    plot.focus()
    chat.page.keyboard.press("Home")
    legend = chart.locator(".chart-legend")
    expect(legend).to_have_attribute("data-time", dates[0])
    chat.page.keyboard.press("ArrowRight")
    expect(legend).to_have_attribute("data-time", dates[1])
    assert legend_value(chart, "open") == price(rows[dates[1]]["open"])
    chat.page.keyboard.press("End")
    expect(legend).to_have_attribute("data-time", dates[-1])


def test_a_result_without_bars_shows_its_text_and_no_chart(chat: Chat, llm: ScriptedLLM) -> None:
    llm.script(tool_call("stock_basic", {"ts_code": CODE}), text("找到了平安银行。"))
    chat.open("tushare")
    chat.send("平安银行的基本信息")
    expect(chat.answers.last).to_have_text("找到了平安银行。")
    card = chat.tool("stock_basic")
    expect(card).to_have_attribute("data-state", "done")
    expect(card.locator(".chart")).to_have_count(0)
    expect(card.locator(".tool-preview")).to_contain_text("平安银行")
    card.locator("summary").click()
    expect(card.locator(".tool-pre").last).to_contain_text("平安银行")


def test_the_forecast_names_the_place_s_today_whatever_the_browser_s_clock_says(
    new_chat: Callable[..., Chat], llm: ScriptedLLM
) -> None:
    chat = new_chat()
    # Three days behind: the browser's own "today" is none of the forecast's days.
    chat.page.clock.set_fixed_time(dt.datetime.now(dt.UTC) - dt.timedelta(days=3))
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    chat.open("weather")
    chat.send("北京天气")
    expect(chat.answers.last).to_have_text("北京今天晴。")

    names = chat.tool("get_weather").locator(".chart-forecast .fc-day-name")
    expect(names).to_have_count(3)
    expect(names.nth(0)).to_have_text("今天")
    expect(names.nth(1)).to_have_text("明天")


def test_a_weather_answer_draws_the_current_conditions_and_a_three_day_forecast(
    chat: Chat, llm: ScriptedLLM, meteo: FakeOpenMeteo, server: ServerProcess
) -> None:
    meteo.set_current(temperature_2m=21.4, relative_humidity_2m=40, weather_code=0)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    chat.open("weather")
    chat.send("北京天气")
    expect(chat.answers.last).to_have_text("北京今天晴。")

    card = chat.tool("get_weather")
    forecast = card.locator(".chart-forecast")
    expect(forecast).to_have_attribute("data-days", "3")
    expect(forecast.locator(".fc-day")).to_have_count(3)
    expect(forecast.locator(".fc-now-temp")).to_have_text("21°")
    expect(forecast.locator(".fc-now-desc")).to_contain_text("晴")
    expect(forecast.locator(".fc-facts")).to_contain_text("40%")
    expect(forecast.locator(".fc-day-name").first).to_have_text("今天")

    data = tool_message(server, chat.thread_id, "forecast")["metadata"]["data"]
    for i, day in enumerate(data["days"]):
        column = forecast.locator(".fc-day").nth(i)
        expect(column).to_have_attribute("data-date", day["date"])
        expect(column.locator(".fc-max")).to_have_text(f"{round(day['max'])}°")
        expect(column.locator(".fc-min")).to_have_text(f"{round(day['min'])}°")
        expect(column.locator(".fc-rain-value")).to_have_text(f"{day['precipitation']:g} mm")
    chat.shot("forecast-card", of=card)
    chat.shot("forecast")

    chat.page.reload()
    expect(chat.tool("get_weather").locator(".fc-day")).to_have_count(3)


def test_the_chart_library_is_loaded_only_when_a_chart_is_drawn(
    chat: Chat, llm: ScriptedLLM
) -> None:
    scripts: list[str] = []
    chat.page.on("request", lambda r: scripts.append(r.url) if r.url.endswith(".js") else None)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    chat.open("weather")
    chat.send("北京天气")
    expect(chat.tool("get_weather").locator(".fc-day")).to_have_count(3)
    chat.wait_idle()
    assert not [url for url in scripts if "candles" in url]

    llm.script(tool_call("daily", JULY), text(ANSWER))
    chat.page.get_by_label("智能体", exact=True).select_option("tushare")
    chat.send("平安银行 7 月的日线")
    expect(candles(chat)).to_have_attribute("data-bars", "22")
    assert len([url for url in scripts if "candles" in url]) == 1


def test_a_tushare_analysis_shows_the_choice_the_reasoning_the_chart_and_the_answer(
    new_chat: Callable[..., Chat], llm: ScriptedLLM
) -> None:
    # The README's pictures (docs/screenshot.png, docs/chart.png) are these artifacts.
    chat = new_chat(viewport={"width": 1280, "height": 1190})
    llm.script(
        tool_call("resolve_stock", {"name": "平安"}),
        reasoning(
            "用户选了平安银行。先取 7 月的日线，看价格区间和成交量的配合。",
            tool_call("daily", JULY),
        ),
        text(README_ANSWER),
    )
    chat.open("tushare")
    chat.send("分析一下平安最近的走势")
    control = chat.interrupt
    control.get_by_role("radio", name=re.compile("平安银行")).check()
    control.get_by_role("button", name="提交").click()
    expect(chat.answers.last).to_contain_text("整体走势")
    chat.wait_idle()
    chart = candles(chat)
    expect(chart).to_have_attribute("data-bars", "22")
    hover(chat.page, chart, 0.55)
    chat.shot("readme-screenshot")
    chat.shot("readme-chart", of=chat.tool("daily"))


def _call(call_id: str, name: str, args: dict[str, Any], data: Any) -> list[dict[str, Any]]:
    """The events of one finished tool call whose result carries `data`."""
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": json.dumps(args)},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{call_id}-result",
            "toolCallId": call_id,
            "content": f"{name} 的结果文本",
            "role": "tool",
            "metadata": {"outcome": "ok", "data": data},
        },
    ]


def test_data_of_a_wrong_shape_is_not_drawn_and_never_breaks_the_page(chat: Chat) -> None:
    # A recorded stream (the server only sends good shapes): the page checks them anyway.
    good = {"time": "2025-07-02", "open": 7, "high": 7.2, "low": 6.9, "close": 7.1, "volume": 9}
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        # Out of order, a date twice, a bar with a price missing: 3 bars are drawn, in order.
        *_call(
            "c1",
            "daily",
            {"ts_code": CODE},
            {
                "kind": "bars",
                "tsCode": CODE,
                "freq": "weekly",
                "bars": [
                    {**good, "time": "2025-07-03", "volume": None},
                    good,
                    {**good, "close": 7.3},
                    {**good, "time": "2025-07-01"},
                    {**good, "time": "2025-07-04", "close": "7.0"},
                    "not a bar",
                ],
            },
        ),
        *_call("c2", "monthly", {"ts_code": CODE}, {"kind": "bars", "bars": "oops"}),
        *_call("c3", "get_weather", {"location": "北京"}, {"kind": "forecast", "days": 3}),
        *_call("c4", "stock_basic", {}, {"kind": "table", "rows": [[1, 2]]}),
        *_call("c5", "daily_basic", {}, ["kind", "bars"]),
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}},
    ]
    body = "".join(f"data: {json.dumps(event, ensure_ascii=False)}\n\n" for event in events)
    chat.page.route(
        "**/api/agents/tushare",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body=body),
    )
    chat.open("tushare")
    chat.send("画几张图")

    chart = chat.tool("daily").locator(".chart-candles")
    expect(chart).to_have_attribute("data-bars", "3")
    expect(chart).to_have_attribute("data-volume", "2")
    expect(chart.locator(".chart-caption")).to_contain_text("周K")
    chart.locator(".chart-canvas").focus()
    chat.page.keyboard.press("Home")
    expect(chart.locator(".chart-legend")).to_have_attribute("data-time", "2025-07-01")
    chat.page.keyboard.press("ArrowRight")
    expect(chart.locator(".chart-legend")).to_have_attribute("data-time", "2025-07-02")
    assert legend_value(chart, "close") == "7.30"  # the later of the two 07-02 bars
    for name in ("monthly", "get_weather", "stock_basic", "daily_basic"):
        card = chat.tool(name)
        expect(card).to_have_attribute("data-state", "done")
        expect(card.locator(".chart")).to_have_count(0)
        expect(card.locator(".tool-preview")).to_have_text(f"{name} 的结果文本")
