"""Structured tool results for clients: price bars and forecasts in `metadata.data`.

A real `react-agent serve` on the LLM, Open-Meteo and Tushare MCP doubles. A tool's data
reaches clients in its TOOL_CALL_RESULT event and in the thread view, and never the
model: the next model request holds the text only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.doubles import tushare_data
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import BEIJING, FakeOpenMeteo, forecast_values
from tests.doubles.tushare_mcp import TushareMCP
from tests.service.conftest import Api, Backend, Stream, run_body, serving_tushare
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

CODE = "000001.SZ"
# January 2024 has 22 weekdays from the data set's first day (2 January) on.
JANUARY = {"ts_code": CODE, "start_date": "20240101", "end_date": "20240131"}


@pytest.fixture(scope="module")
def data_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    with serving_tushare(
        _llm_server,
        _meteo_server,
        mcp,
        tmp_path_factory.mktemp("tool-data"),
        backend,
    ) as process:
        yield process


@pytest.fixture
def api(data_server: ServerProcess) -> Iterator[Api]:
    client = Api(data_server)
    yield client
    client.close()


def result_of(stream: Stream) -> dict[str, Any]:
    [result] = stream.of("TOOL_CALL_RESULT")
    return result


def tool_message(api: Api, thread_id: str) -> dict[str, Any]:
    view = api.http.get(f"/api/threads/{thread_id}")
    assert view.status_code == 200, view.text
    [message] = [m for m in view.json()["messages"] if m["role"] == "tool"]
    return message


def model_tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_daily_call_carries_its_bars_to_clients_but_not_to_the_model(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("daily", JANUARY), text("平安银行一月走势平稳。"))
    expected = list(reversed(tushare_data.select_bars(tushare_data.daily_rows(CODE), **_dates())))
    assert len(expected) == 22, "the date range gives 22 trading days"

    stream = api.run("tushare", run_body(thread_id, ("u1", "看看平安银行一月的日线")))

    assert stream.last["outcome"] == {"type": "success"}, stream.events
    result = result_of(stream)
    data = result["metadata"]["data"]
    assert result["metadata"]["outcome"] == "ok"
    assert data["kind"] == "bars"
    assert data["tsCode"] == CODE
    assert data["freq"] == "daily"
    bars = data["bars"]
    assert len(bars) == 22
    assert [bar["time"] for bar in bars] == sorted(bar["time"] for bar in bars)
    assert bars[0]["time"] == "2024-01-02" and bars[-1]["time"] == "2024-01-31"
    assert [(b["open"], b["high"], b["low"], b["close"], b["volume"]) for b in bars] == [
        (row["open"], row["high"], row["low"], row["close"], row["vol"]) for row in expected
    ]
    assert tool_message(api, thread_id)["metadata"] == result["metadata"]
    _, after_tool = llm.requests
    [seen] = model_tool_messages(after_tool)
    assert seen["content"] == result["content"], "the model reads the text as before"
    assert seen["content"].startswith("ts_code | trade_date | open | high | low | close")
    sent = json.dumps(after_tool, ensure_ascii=False)
    assert "2024-01-02" not in sent and '"bars"' not in sent, "no chart data reaches the model"


def test_a_table_without_prices_carries_no_data(api: Api, llm: ScriptedLLM, thread_id: str) -> None:
    llm.script(tool_call("stock_basic", {"name": "平安"}), text("找到了。"))

    stream = api.run("tushare", run_body(thread_id, ("u1", "平安有哪些股票")))

    result = result_of(stream)
    assert "平安银行" in result["content"]
    assert result["metadata"] == {"outcome": "ok"}
    assert tool_message(api, thread_id)["metadata"] == {"outcome": "ok"}


def test_a_weather_call_carries_its_forecast_with_three_days(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天不错。"))
    expected = forecast_values(BEIJING.latitude, BEIJING.longitude)

    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    result = result_of(stream)
    data = result["metadata"]["data"]
    now = expected["current"]
    daily = expected["daily"]
    assert data["kind"] == "forecast"
    assert data["location"] == "北京（北京市，中国）"
    assert result["content"].startswith(data["location"])
    assert data["current"] == {
        "time": data["current"]["time"],
        "temperature": now["temperature_2m"],
        "apparentTemperature": now["apparent_temperature"],
        "humidity": now["relative_humidity_2m"],
        "windSpeed": now["wind_speed_10m"],
        "weatherCode": now["weather_code"],
        "description": data["current"]["description"],
    }
    assert data["current"]["description"] in result["content"]
    # The place's local time, as the text gives it: its date is the first day's.
    assert f"当前（{data['current']['time'].replace('T', ' ')}）" in result["content"]
    days = data["days"]
    assert len(days) == 3
    assert days[0]["date"] == data["current"]["time"][:10]
    assert [d["date"] for d in days] == [d[2:].split("：")[0] for d in _day_lines(result)]
    assert [(d["min"], d["max"], d["precipitation"], d["weatherCode"]) for d in days] == [
        (
            daily["temperature_2m_min"][i],
            daily["temperature_2m_max"][i],
            daily["precipitation_sum"][i],
            daily["weather_code"][i],
        )
        for i in range(3)
    ]
    assert data["units"] == {"temperature": "°C", "precipitation": "mm", "windSpeed": "km/h"}
    assert tool_message(api, thread_id)["metadata"] == result["metadata"]
    assert meteo.forecast_requests[0]["daily"].split(",")[-1] == "precipitation_sum"
    [seen] = model_tool_messages(llm.requests[1])
    assert seen["content"] == result["content"]
    assert '"forecast"' not in json.dumps(llm.requests[1], ensure_ascii=False)


def test_a_failed_tool_call_carries_no_data(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    meteo.fail_forecast(429)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("天气服务忙。"))

    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    result = result_of(stream)
    assert result["metadata"] == {"outcome": "error"}
    assert "HTTP 429" in result["content"]
    view = tool_message(api, thread_id)
    assert view["metadata"] == {"outcome": "error"}
    assert view["error"] == result["content"]


# What a Tushare server says when it does not take the token: a tool result flagged as an
# error, as the real server answers, rather than an HTTP 401 (which fails the connection).
AUTH_FAILED = "token 认证失败，请检查 TUSHARE_TOKEN"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("resolve_stock", {"name": "平安"}),
        ("stock_basic", {"name": "平安"}),
        ("daily", {"ts_code": CODE}),
        ("monthly", {"ts_code": CODE}),
    ],
)
def test_every_tushare_tool_whose_call_the_server_refuses_is_a_failed_call(
    api: Api,
    llm: ScriptedLLM,
    mcp: TushareMCP,
    thread_id: str,
    tool: str,
    arguments: dict[str, Any],
) -> None:
    mcp.echo_auth("tool_error", lambda _authorization: AUTH_FAILED)
    try:
        llm.script(tool_call(tool, arguments), text("认证失败。"))
        stream = api.run("tushare", run_body(thread_id, ("u1", "平安银行")))
    finally:
        mcp.stop_echo()

    result = result_of(stream)
    assert result["metadata"] == {"outcome": "error"}, result
    assert AUTH_FAILED in result["content"]
    view = tool_message(api, thread_id)
    assert view["metadata"] == {"outcome": "error"}
    assert AUTH_FAILED in view["error"]


def _dates() -> dict[str, str]:
    return {"start_date": JANUARY["start_date"], "end_date": JANUARY["end_date"]}


def _day_lines(result: dict[str, Any]) -> list[str]:
    return [line for line in result["content"].splitlines() if line.startswith("- ")]
