"""get_weather against the fake Open-Meteo, over real HTTP."""

from __future__ import annotations

import time

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool

from tests.doubles.open_meteo import (
    BEIJING,
    ERROR_CITY,
    ERROR_CITY_REASON,
    GARBLED_CITY,
    HANG_CITY,
    TOKYO,
    FakeOpenMeteo,
    forecast_values,
)
from tools.settings import OpenMeteoSettings
from tools.weather import WMO_CODES, describe_code, weather_tool


async def weather(location: str) -> str:
    # Built per call: the tool takes the settings the test's environment gives now.
    result = await weather_tool(OpenMeteoSettings()).ainvoke({"location": location})
    assert isinstance(result, str)
    return result


def forecast_coordinates(meteo: FakeOpenMeteo) -> list[tuple[float, float]]:
    return [(float(p["latitude"]), float(p["longitude"])) for p in meteo.forecast_requests]


async def test_beijing_in_chinese_picks_the_capital_not_the_village(meteo: FakeOpenMeteo) -> None:
    report = await weather("北京")

    assert forecast_coordinates(meteo) == [(BEIJING.latitude, BEIJING.longitude)]
    assert meteo.geocoding_requests[0]["language"] == "zh"
    assert report.startswith("北京（北京市，中国）")


async def test_beijing_in_english_falls_back_to_english_geocoding(meteo: FakeOpenMeteo) -> None:
    report = await weather("Beijing")

    assert [p["language"] for p in meteo.geocoding_requests] == ["zh", "en"]
    assert forecast_coordinates(meteo) == [(BEIJING.latitude, BEIJING.longitude)]
    assert report.startswith("Beijing（China）")


async def test_report_carries_current_values_and_three_days(meteo: FakeOpenMeteo) -> None:
    expected = forecast_values(TOKYO.latitude, TOKYO.longitude)

    report = await weather("东京")

    now = expected["current"]
    assert f"气温 {now['temperature_2m']}°C" in report
    assert f"体感 {now['apparent_temperature']}°C" in report
    assert f"湿度 {now['relative_humidity_2m']}%" in report
    assert f"风速 {now['wind_speed_10m']} km/h" in report
    assert report.count("\n- ") == 3
    daily = expected["daily"]
    assert f"{daily['temperature_2m_min'][0]}~{daily['temperature_2m_max'][0]}°C" in report
    assert f"降水量 {daily['precipitation_sum'][0]} mm" in report
    assert meteo.forecast_requests[0]["timezone"] == "auto"


@pytest.mark.parametrize(("code", "words"), [(0, "晴"), (63, "中雨"), (95, "雷暴"), (48, "雾凇")])
async def test_weather_code_is_rendered_in_chinese(
    meteo: FakeOpenMeteo, code: int, words: str
) -> None:
    meteo.set_current(weather_code=code)

    report = await weather("上海")

    assert f"：{words}，气温" in report


def test_every_wmo_code_family_in_the_design_has_a_description() -> None:
    families = [0, 1, 2, 3, 45, 48, 51, 53, 55, 56, 57, 61, 63, 65, 66, 67, 71, 73, 75, 77]
    families += [80, 81, 82, 85, 86, 95, 96, 99]

    assert set(families) <= set(WMO_CODES)
    assert describe_code(42) == "未知天气（代码 42）"


async def test_unknown_city_comes_back_as_readable_text(meteo: FakeOpenMeteo) -> None:
    report = await weather("不存在的地方")

    assert report.startswith("查询「不存在的地方」天气失败：找不到这个地点")
    assert meteo.forecast_requests == []


async def test_geocoding_400_reason_is_passed_on(meteo: FakeOpenMeteo) -> None:
    report = await weather(ERROR_CITY)

    assert report == f"查询「{ERROR_CITY}」天气失败：天气服务返回 HTTP 400（{ERROR_CITY_REASON}）"


async def test_forecast_rate_limit_reason_is_passed_on(meteo: FakeOpenMeteo) -> None:
    meteo.fail_forecast(429, "Minutely API request limit exceeded.")

    report = await weather("北京")

    assert report == (
        "查询「北京」天气失败：天气服务返回 HTTP 429（Minutely API request limit exceeded.）"
    )


async def test_slow_service_times_out_as_readable_text(
    meteo: FakeOpenMeteo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPEN_METEO_TIMEOUT", "0.2")
    started = time.monotonic()

    report = await weather(HANG_CITY)

    assert report == f"查询「{HANG_CITY}」天气失败：天气服务在 0.2 秒内没有响应"
    assert time.monotonic() - started < 5


async def test_not_json_answer_is_readable_text(meteo: FakeOpenMeteo) -> None:
    assert (
        await weather(GARBLED_CITY)
        == f"查询「{GARBLED_CITY}」天气失败：天气服务返回了无法解析的数据"
    )

    meteo.garble_forecast()
    assert await weather("北京") == "查询「北京」天气失败：天气服务返回了无法解析的数据"


async def test_unreachable_service_is_readable_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPEN_METEO_GEOCODING_URL", "http://127.0.0.1:9/v1/search")

    assert await weather("北京") == "查询「北京」天气失败：无法连接天气服务"


async def test_blank_location_asks_for_a_city_in_text() -> None:
    assert await weather("  ") == "查询「  」天气失败：没有提供城市名称"


def test_tool_tells_the_model_it_takes_a_city_name() -> None:
    function = convert_to_openai_tool(weather_tool(OpenMeteoSettings()))["function"]

    assert function["name"] == "get_weather"
    assert "城市名称" in function["description"]
    assert list(function["parameters"]["properties"]) == ["location"]
    assert "城市名称" in function["parameters"]["properties"]["location"]["description"]


async def test_a_failed_lookup_is_a_failed_call_not_a_normal_result() -> None:
    call = {"name": "get_weather", "args": {"location": "  "}, "id": "c1", "type": "tool_call"}

    message = await weather_tool(OpenMeteoSettings()).ainvoke(call)

    assert message.status == "error"
    assert message.content == "查询「  」天气失败：没有提供城市名称"


async def test_the_tool_keeps_the_settings_it_was_built_with_when_the_environment_changes(
    meteo: FakeOpenMeteo, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = OpenMeteoSettings()
    monkeypatch.setenv("OPEN_METEO_GEOCODING_URL", "http://127.0.0.1:9/v1/search")

    report = await weather_tool(settings).ainvoke({"location": "北京"})

    assert report.startswith("北京")
