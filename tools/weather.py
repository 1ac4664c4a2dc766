"""get_weather: current weather and a 3-day outline for a city name, from Open-Meteo."""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from tools.settings import OpenMeteoSettings

logger = logging.getLogger(__name__)

WEATHER_FAILED = "查询「{location}」天气失败：{reason}"
EMPTY_LOCATION = "没有提供城市名称"
NOT_FOUND = "找不到这个地点，请换一种写法（城市的中文或英文名）"
TIMEOUT = "天气服务在 {seconds:g} 秒内没有响应"
UNREACHABLE = "无法连接天气服务"
HTTP_ERROR = "天气服务返回 HTTP {status}"
HTTP_ERROR_REASON = "天气服务返回 HTTP {status}（{reason}）"
MALFORMED = "天气服务返回了无法解析的数据"
UNKNOWN_CODE = "未知天气（代码 {code}）"
UNKNOWN_WEATHER = "未知天气"

# Open-Meteo localises names: Chinese names are found with zh, others often only with en.
GEOCODING_LANGUAGES = ("zh", "en")
GEOCODING_COUNT = 10
FORECAST_DAYS = 3
# Open-Meteo's `current.time`: the place's local time, to the minute (seconds optional).
LOCAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?")
CURRENT_VARS = (
    "temperature_2m",
    "relative_humidity_2m",
    "apparent_temperature",
    "weather_code",
    "wind_speed_10m",
)
DAILY_VARS = (
    "weather_code",
    "temperature_2m_max",
    "temperature_2m_min",
    "precipitation_probability_max",
    "precipitation_sum",
)

# WMO weather interpretation codes, as Open-Meteo documents them.
WMO_CODES: dict[int, str] = {
    0: "晴",
    1: "大致晴朗",
    2: "局部多云",
    3: "阴",
    45: "雾",
    48: "雾凇",
    51: "小毛毛雨",
    53: "毛毛雨",
    55: "大毛毛雨",
    56: "小冻毛毛雨",
    57: "冻毛毛雨",
    61: "小雨",
    63: "中雨",
    65: "大雨",
    66: "小冻雨",
    67: "冻雨",
    71: "小雪",
    73: "中雪",
    75: "大雪",
    77: "米雪",
    80: "小阵雨",
    81: "阵雨",
    82: "强阵雨",
    85: "小阵雪",
    86: "大阵雪",
    95: "雷暴",
    96: "雷暴伴小冰雹",
    99: "雷暴伴大冰雹",
}


DESCRIPTION = (
    "根据城市名称查询当前真实天气和未来三天预报（数据来自 Open-Meteo）。"
    "输入是城市名称（中文、英文等任何语言均可），不是经纬度；"
    "返回地点、当前气温、体感温度、湿度、风速、天气状况和三天概况。"
)


class WeatherLookupFailed(Exception):
    """A lookup step failed; the message is the user-facing reason."""


class WeatherInput(BaseModel):
    location: str = Field(description="城市名称，如：北京、上海、Tokyo")


def weather_tool(settings: OpenMeteoSettings) -> BaseTool:
    """The `get_weather` tool the model calls, asking Open-Meteo as `settings` say.

    Its result is the report for the model, and the same forecast as data
    (`forecast_data`) in the ToolMessage's artifact, for clients only.
    """

    async def get_weather(location: str) -> tuple[str, dict[str, Any]]:
        return await lookup_forecast(location, settings)

    # A failed lookup is a failed call (status "error"), its reason the model's to read.
    return StructuredTool.from_function(
        coroutine=get_weather,
        name="get_weather",
        description=DESCRIPTION,
        args_schema=WeatherInput,
        handle_tool_error=True,
        response_format="content_and_artifact",
    )


async def lookup_forecast(location: str, settings: OpenMeteoSettings) -> tuple[str, dict[str, Any]]:
    """The report for `location` and its forecast as data (`forecast_data`).

    Raises ToolException with the readable reason.
    """
    name = location.strip()
    try:
        if not name:
            raise WeatherLookupFailed(EMPTY_LOCATION)
        client = _client(settings.open_meteo_timeout_s)
        place = await _geocode(client, settings.open_meteo_geocoding_url, name)
        forecast = await _get_json(
            client,
            settings.open_meteo_forecast_url,
            {
                "latitude": place["latitude"],
                "longitude": place["longitude"],
                "current": ",".join(CURRENT_VARS),
                "daily": ",".join(DAILY_VARS),
                "timezone": "auto",
                "forecast_days": FORECAST_DAYS,
            },
        )
        return render_report(place, forecast), forecast_data(place, forecast)
    except httpx.TimeoutException:
        reason = TIMEOUT.format(seconds=settings.open_meteo_timeout_s)
    except httpx.TransportError:
        reason = UNREACHABLE
    except WeatherLookupFailed as exc:
        reason = str(exc)
    except (KeyError, TypeError, ValueError):
        reason = MALFORMED
    logger.warning("get_weather failed for %r: %s", location, reason)
    raise ToolException(WEATHER_FAILED.format(location=location, reason=reason))


def describe_code(code: object) -> str:
    """The Chinese description of a WMO weather code."""
    if isinstance(code, int | float) and int(code) in WMO_CODES:
        return WMO_CODES[int(code)]
    return UNKNOWN_CODE.format(code=code)


def best_place(results: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The place a person most likely means: capital, then regional capital, then biggest."""

    def rank(place: Mapping[str, Any]) -> tuple[int, int]:
        code = str(place.get("feature_code") or "")
        tier = 0 if code == "PPLC" else 1 if code.startswith("PPLA") else 2
        return tier, -int(place.get("population") or 0)

    return min(results, key=rank)


def place_title(place: Mapping[str, Any]) -> str:
    """The place as the report names it: `北京（北京市，中国）`."""
    where = [str(place[k]) for k in ("admin1", "country") if place.get(k)]
    where = [part for part in where if part != place["name"]]
    return f"{place['name']}（{'，'.join(where)}）" if where else str(place["name"])


def render_report(place: Mapping[str, Any], forecast: Mapping[str, Any]) -> str:
    """The compact Chinese report for a geocoded place and its forecast JSON."""
    now = forecast["current"]
    units = {**_DEFAULT_UNITS, **(forecast.get("current_units") or {})}
    lines = [
        place_title(place),
        (
            f"当前（{now['time'].replace('T', ' ')}）：{describe_code(now['weather_code'])}，"
            f"气温 {now['temperature_2m']}{units['temperature_2m']}"
            f"（体感 {now['apparent_temperature']}{units['apparent_temperature']}），"
            f"湿度 {now['relative_humidity_2m']}{units['relative_humidity_2m']}，"
            f"风速 {now['wind_speed_10m']} {units['wind_speed_10m']}"
        ),
        f"未来{FORECAST_DAYS}天：",
    ]
    daily = forecast["daily"]
    amounts = daily.get("precipitation_sum") or []
    for i, day in enumerate(daily["time"][:FORECAST_DAYS]):
        rain = daily["precipitation_probability_max"][i]
        amount = amounts[i] if i < len(amounts) else None
        lines.append(
            f"- {day}：{describe_code(daily['weather_code'][i])}，"
            f"{daily['temperature_2m_min'][i]}~{daily['temperature_2m_max'][i]}°C"
            + (f"，降水概率 {rain}%" if rain is not None else "")
            + (f"，降水量 {amount} mm" if amount is not None else "")
        )
    return "\n".join(lines)


def forecast_data(place: Mapping[str, Any], forecast: Mapping[str, Any]) -> dict[str, Any]:
    """The forecast the report was rendered from, as data for clients (charts, cards).

    `{"kind": "forecast", "location", "current": {...}, "days": [...], "units": {...}}`;
    a value the answer lacks is None, never a guess.
    """
    now = forecast.get("current") or {}
    daily = forecast.get("daily") or {}
    current_units = forecast.get("current_units") or {}
    daily_units = forecast.get("daily_units") or {}

    def day_value(var: str, index: int) -> Any:
        values = daily.get(var) or []
        return values[index] if index < len(values) else None

    days = []
    for index, date in enumerate((daily.get("time") or [])[:FORECAST_DAYS]):
        code = _code(day_value("weather_code", index))
        days.append(
            {
                "date": str(date),
                "min": _number(day_value("temperature_2m_min", index)),
                "max": _number(day_value("temperature_2m_max", index)),
                "precipitation": _number(day_value("precipitation_sum", index)),
                "weatherCode": code,
                "description": _description(code),
            }
        )
    code = _code(now.get("weather_code"))
    return {
        "kind": "forecast",
        "location": place_title(place),
        "current": {
            # The place's local time (Open-Meteo's `timezone=auto`): its "today".
            "time": _local_time(now.get("time")),
            "temperature": _number(now.get("temperature_2m")),
            "apparentTemperature": _number(now.get("apparent_temperature")),
            "humidity": _number(now.get("relative_humidity_2m")),
            "windSpeed": _number(now.get("wind_speed_10m")),
            "weatherCode": code,
            "description": _description(code),
        },
        "days": days,
        "units": {
            "temperature": str(current_units.get("temperature_2m") or "°C"),
            "precipitation": str(daily_units.get("precipitation_sum") or "mm"),
            "windSpeed": str(current_units.get("wind_speed_10m") or "km/h"),
        },
    }


def _local_time(value: Any) -> str | None:
    if not isinstance(value, str) or LOCAL_TIME.fullmatch(value) is None:
        return None
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _description(code: int | None) -> str:
    return UNKNOWN_WEATHER if code is None else describe_code(code)


def _code(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None else None


_DEFAULT_UNITS = {
    "temperature_2m": "°C",
    "apparent_temperature": "°C",
    "relative_humidity_2m": "%",
    "wind_speed_10m": "km/h",
}


_shared: tuple[asyncio.AbstractEventLoop, float, httpx.AsyncClient] | None = None


def _client(timeout_s: float) -> httpx.AsyncClient:
    """The running event loop's Open-Meteo client."""
    # A client per call would rebuild its TLS context and reconnect every time; its
    # connections belong to one loop, so another loop (a test, the CLI) gets its own.
    global _shared
    loop = asyncio.get_running_loop()
    if _shared is None or _shared[0] is not loop or _shared[1] != timeout_s:
        _shared = (loop, timeout_s, httpx.AsyncClient(timeout=timeout_s))
    return _shared[2]


async def _geocode(client: httpx.AsyncClient, url: str, name: str) -> Mapping[str, Any]:
    for language in GEOCODING_LANGUAGES:
        found = await _get_json(
            client,
            url,
            {"name": name, "count": GEOCODING_COUNT, "language": language, "format": "json"},
        )
        results = found.get("results") or []
        if results:
            return best_place(results)
    raise WeatherLookupFailed(NOT_FOUND)


async def _get_json(
    client: httpx.AsyncClient, url: str, params: Mapping[str, str | int | float]
) -> Mapping[str, Any]:
    response = await client.get(url, params=params)
    if response.is_error:
        raise WeatherLookupFailed(_http_error(response))
    body = response.json()
    if not isinstance(body, Mapping):
        raise WeatherLookupFailed(MALFORMED)
    return body


def _http_error(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    reason = body.get("reason") if isinstance(body, Mapping) else None
    if reason:
        return HTTP_ERROR_REASON.format(status=response.status_code, reason=reason)
    return HTTP_ERROR.format(status=response.status_code)
