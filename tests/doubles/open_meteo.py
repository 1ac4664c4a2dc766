"""FakeOpenMeteo: Open-Meteo's geocoding and forecast APIs with their real JSON shapes.

Geocoding matches a name in the requested `language` only (Open-Meteo localises names;
here 北京 is found with language=zh, Beijing with language=en), exactly for names shorter
than three characters and by prefix otherwise. Special names: `错误城市` answers HTTP 400,
`超时城市` hangs (until the client gives up, `reset()` or `stop()`), `乱码城市` answers a
body that is not JSON. Forecast numbers are derived from the coordinates
(`forecast_values`), so they are deterministic.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.doubles._server import ServedDouble, ServerThread

ERROR_CITY = "错误城市"
HANG_CITY = "超时城市"
GARBLED_CITY = "乱码城市"
ERROR_CITY_REASON = "Geocoding backend rejected the name '错误城市'"
HANG_S = 30.0


@dataclass(frozen=True)
class Place:
    """One geocoding entry; `names`/`admin1`/`country` are per language."""

    id: int
    names: dict[str, str]
    latitude: float
    longitude: float
    elevation: float
    feature_code: str
    country_code: str
    country: dict[str, str]
    admin1: dict[str, str]
    timezone: str
    utc_offset_s: int
    population: int | None

    def result(self, language: str) -> dict[str, Any]:
        """The entry as the geocoding API returns it in `language`."""
        out: dict[str, Any] = {
            "id": self.id,
            "name": self.names.get(language, self.names["en"]),
            "latitude": self.latitude,
            "longitude": self.longitude,
            "elevation": self.elevation,
            "feature_code": self.feature_code,
            "country_code": self.country_code,
            "admin1_id": self.id + 1_000_000,
            "timezone": self.timezone,
            "country_id": sum(map(ord, self.country_code)),
            "country": self.country.get(language, self.country["en"]),
            "admin1": self.admin1.get(language, self.admin1["en"]),
        }
        if self.population is not None:
            out["population"] = self.population
        return out


_CN = {"zh": "中国", "en": "China"}
BEIJING_VILLAGE = Place(
    2038349,
    {"zh": "北京", "en": "Beijing"},
    23.6081,
    109.2453,
    96.0,
    "PPL",
    "CN",
    _CN,
    {"zh": "广西壮族自治区", "en": "Guangxi"},
    "Asia/Shanghai",
    28800,
    312,
)
BEIJING = Place(
    1816670,
    {"zh": "北京", "en": "Beijing"},
    39.9075,
    116.39723,
    63.0,
    "PPLC",
    "CN",
    _CN,
    {"zh": "北京市", "en": "Beijing"},
    "Asia/Shanghai",
    28800,
    18960744,
)
SHANGHAI = Place(
    1796236,
    {"zh": "上海", "en": "Shanghai"},
    31.22222,
    121.45806,
    12.0,
    "PPLA",
    "CN",
    _CN,
    {"zh": "上海市", "en": "Shanghai"},
    "Asia/Shanghai",
    28800,
    24874500,
)
GUANGZHOU = Place(
    1809858,
    {"zh": "广州", "en": "Guangzhou"},
    23.11667,
    113.25,
    11.0,
    "PPLA",
    "CN",
    _CN,
    {"zh": "广东省", "en": "Guangdong"},
    "Asia/Shanghai",
    28800,
    16096724,
)
TOKYO = Place(
    1850147,
    {"zh": "东京", "en": "Tokyo"},
    35.6895,
    139.69171,
    44.0,
    "PPLC",
    "JP",
    {"zh": "日本", "en": "Japan"},
    {"zh": "东京都", "en": "Tokyo"},
    "Asia/Tokyo",
    32400,
    9733276,
)
LONDON = Place(
    2643743,
    {"zh": "伦敦", "en": "London"},
    51.50853,
    -0.12574,
    25.0,
    "PPLC",
    "GB",
    {"zh": "英国", "en": "United Kingdom"},
    {"zh": "英格兰", "en": "England"},
    "Europe/London",
    0,
    8961989,
)
LONDON_ONTARIO = Place(
    6058560,
    {"zh": "伦敦", "en": "London"},
    42.98339,
    -81.23304,
    251.0,
    "PPL",
    "CA",
    {"zh": "加拿大", "en": "Canada"},
    {"zh": "安大略", "en": "Ontario"},
    "America/Toronto",
    -18000,
    422324,
)
NEW_YORK = Place(
    5128581,
    {"zh": "纽约", "en": "New York"},
    40.71427,
    -74.00597,
    10.0,
    "PPL",
    "US",
    {"zh": "美国", "en": "United States"},
    {"zh": "纽约州", "en": "New York"},
    "America/New_York",
    -18000,
    8804190,
)
# The village comes first on purpose: a tool taking results[0] picks the wrong 北京.
PLACES: tuple[Place, ...] = (
    BEIJING_VILLAGE,
    BEIJING,
    SHANGHAI,
    GUANGZHOU,
    TOKYO,
    LONDON,
    LONDON_ONTARIO,
    NEW_YORK,
)

CURRENT_UNITS = {
    "temperature_2m": "°C",
    "relative_humidity_2m": "%",
    "apparent_temperature": "°C",
    "weather_code": "wmo code",
    "wind_speed_10m": "km/h",
    "wind_direction_10m": "°",
    "precipitation": "mm",
    "cloud_cover": "%",
    "is_day": "",
}
DAILY_UNITS = {
    "weather_code": "wmo code",
    "temperature_2m_max": "°C",
    "temperature_2m_min": "°C",
    "precipitation_probability_max": "%",
    "precipitation_sum": "mm",
    "wind_speed_10m_max": "km/h",
}
_CODES = (0, 1, 2, 3, 45, 51, 61, 63, 71, 80, 95)


def forecast_values(latitude: float, longitude: float, days: int = 7) -> dict[str, Any]:
    """The deterministic weather the fake reports for a coordinate.

    Returns `{"current": {var: value}, "daily": {var: [value per day]}}` for every supported
    variable (the `time` fields excluded).
    """
    seed = int(abs(latitude) * 1000) * 31 + int(abs(longitude) * 1000) * 17
    temp = round(30.0 - abs(latitude) * 0.5 + (seed % 50) / 10, 1)
    humidity = 30 + seed % 60
    wind = round(2 + (seed % 200) / 10, 1)
    current = {
        "temperature_2m": temp,
        "relative_humidity_2m": humidity,
        "apparent_temperature": round(temp - wind / 10 + humidity / 50, 1),
        "weather_code": _CODES[seed % len(_CODES)],
        "wind_speed_10m": wind,
        "wind_direction_10m": seed % 360,
        "precipitation": round((seed % 7) / 5, 1),
        "cloud_cover": seed % 101,
        "is_day": 1,
    }
    daily: dict[str, list[Any]] = {name: [] for name in DAILY_UNITS}
    for day in range(days):
        daily["weather_code"].append(_CODES[(seed + day * 3) % len(_CODES)])
        daily["temperature_2m_max"].append(round(temp + 3 + day % 3, 1))
        daily["temperature_2m_min"].append(round(temp - 6 + day % 2, 1))
        daily["precipitation_probability_max"].append((seed + day * 13) % 101)
        daily["precipitation_sum"].append(round(((seed + day) % 9) / 3, 1))
        daily["wind_speed_10m_max"].append(round(wind + day, 1))
    return {"current": current, "daily": daily}


@dataclass(frozen=True)
class _Fault:
    status: int = 0
    reason: str = ""
    hang_s: float = 0.0
    garbled: bool = False


class FakeOpenMeteo(ServedDouble):
    """Both Open-Meteo APIs on one local server; see the module docstring for the data."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[dict[str, Any]] = []
        self._forecast_fault: _Fault | None = None
        self._current_override: dict[str, Any] = {}
        app = Starlette(
            routes=[
                Route("/v1/search", self._search, methods=["GET"]),
                Route("/v1/forecast", self._forecast, methods=["GET"]),
            ]
        )
        self._server = ServerThread(app)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return self._server.url

    @property
    def geocoding_url(self) -> str:
        """For OPEN_METEO_GEOCODING_URL."""
        return f"{self._server.url}/v1/search"

    @property
    def forecast_url(self) -> str:
        """For OPEN_METEO_FORECAST_URL."""
        return f"{self._server.url}/v1/forecast"

    # --- test controls ---------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request so far: `{"path": "/v1/search"|"/v1/forecast", "params": {...}}`."""
        with self._lock:
            return list(self._requests)

    @property
    def geocoding_requests(self) -> list[dict[str, str]]:
        """Query params of every geocoding request."""
        return [r["params"] for r in self.requests if r["path"] == "/v1/search"]

    @property
    def forecast_requests(self) -> list[dict[str, str]]:
        """Query params of every forecast request."""
        return [r["params"] for r in self.requests if r["path"] == "/v1/forecast"]

    def fail_forecast(self, status: int = 429, reason: str | None = None) -> None:
        """Make every forecast answer `status` with `{"error":true,"reason":...}`."""
        default = (
            "Minutely API request limit exceeded. Please try again in one minute."
            if status == 429
            else "Cannot initialize WeatherVariable from invalid String value"
        )
        with self._lock:
            self._forecast_fault = _Fault(status=status, reason=reason or default)

    def hang_forecast(self, seconds: float = HANG_S) -> None:
        """Make every forecast wait `seconds` before answering."""
        with self._lock:
            self._forecast_fault = _Fault(hang_s=seconds)

    def garble_forecast(self) -> None:
        """Make every forecast answer 200 with a body that is not JSON."""
        with self._lock:
            self._forecast_fault = _Fault(garbled=True)

    def set_current(self, **values: Any) -> None:
        """Override `current` variables (e.g. `weather_code=95`) in every forecast."""
        with self._lock:
            self._current_override.update(values)

    def reset(self) -> None:
        """Forget requests, faults and overrides; release hanging replies."""
        with self._lock:
            self._requests = []
            self._forecast_fault = None
            self._current_override = {}
        self._server.release_hangs()

    def _record(self, request: Request) -> dict[str, str]:
        params = dict(request.query_params)
        with self._lock:
            self._requests.append({"path": request.url.path, "params": params})
        return params

    # --- geocoding -------------------------------------------------------------------

    async def _search(self, request: Request) -> Response:
        params = self._record(request)
        name = params.get("name", "").strip()
        language = params.get("language", "en").lower()
        if "name" not in params:
            return _error(400, "Parameter 'name' is required")
        if params.get("format", "json") != "json":
            return _error(400, "Only format=json is served by this fake")
        try:
            count = int(params.get("count", "10"))
        except ValueError:
            return _error(400, "Parameter 'count' must be an integer")
        if not 1 <= count <= 100:
            return _error(400, "Parameter 'count' must be between 1 and 100")
        if name == ERROR_CITY:
            return _error(400, ERROR_CITY_REASON)
        if name == GARBLED_CITY:
            return Response("<html>502 Bad Gateway</html>", media_type="application/json")
        if name == HANG_CITY:
            await self._server.hang(HANG_S, request)
            return _error(504, "hang released")
        found = [p.result(language) for p in PLACES if _matches(p, name, language)][:count]
        body: dict[str, Any] = {"generationtime_ms": 0.42}
        if found:
            body = {"results": found, **body}
        return JSONResponse(body)

    # --- forecast --------------------------------------------------------------------

    async def _forecast(self, request: Request) -> Response:
        params = self._record(request)
        with self._lock:
            fault = self._forecast_fault
            override = dict(self._current_override)
        if fault is not None:
            if fault.hang_s:
                await self._server.hang(fault.hang_s, request)
            elif fault.garbled:
                return Response("{'latitude': 39.9,", media_type="application/json")
            else:
                return _error(fault.status, fault.reason)
        try:
            latitude = float(params["latitude"])
            longitude = float(params["longitude"])
        except KeyError:
            return _error(400, "Parameter 'latitude' and 'longitude' must be set")
        except ValueError:
            return _error(400, "Parameter 'latitude' and 'longitude' must be numbers")
        if not -90 <= latitude <= 90:
            return _error(400, f"Latitude must be in range of -90 to 90°. Given: {latitude}.")
        if not -180 <= longitude <= 180:
            return _error(400, f"Longitude must be in range of -180 to 180°. Given: {longitude}.")
        current_vars = _split(params.get("current", ""))
        daily_vars = _split(params.get("daily", ""))
        for var in current_vars:
            if var not in CURRENT_UNITS:
                return _error(400, _invalid_variable(var, "current"))
        for var in daily_vars:
            if var not in DAILY_UNITS:
                return _error(400, _invalid_variable(var, "daily"))
        try:
            days = int(params.get("forecast_days", "7"))
        except ValueError:
            return _error(400, "Parameter 'forecast_days' must be an integer")
        if not 1 <= days <= 16:
            return _error(400, "Forecast days is invalid. Allowed range 0 to 16.")
        timezone, offset = _timezone(latitude, longitude, params.get("timezone", "GMT"))
        values = forecast_values(latitude, longitude, days)
        values["current"].update(override)
        now = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset)
        body: dict[str, Any] = {
            "latitude": round(latitude, 4),
            "longitude": round(longitude, 4),
            "generationtime_ms": 0.08,
            "utc_offset_seconds": offset,
            "timezone": timezone,
            "timezone_abbreviation": _abbreviation(offset),
            "elevation": 44.0,
        }
        if current_vars:
            body["current_units"] = {
                "time": "iso8601",
                "interval": "seconds",
                **{v: CURRENT_UNITS[v] for v in current_vars},
            }
            quarter = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
            body["current"] = {
                "time": quarter.strftime("%Y-%m-%dT%H:%M"),
                "interval": 900,
                **{v: values["current"][v] for v in current_vars},
            }
        if daily_vars:
            body["daily_units"] = {"time": "iso8601", **{v: DAILY_UNITS[v] for v in daily_vars}}
            body["daily"] = {
                "time": [(now.date() + dt.timedelta(days=d)).isoformat() for d in range(days)],
                **{v: values["daily"][v] for v in daily_vars},
            }
        return JSONResponse(body)


def _matches(place: Place, query: str, language: str) -> bool:
    name = place.names.get(language)
    if not name or not query:
        return False
    if len(query) < 3:
        return name.casefold() == query.casefold()
    return name.casefold().startswith(query.casefold())


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _invalid_variable(var: str, key: str) -> str:
    return (
        f"Data corrupted at path ''. Cannot initialize ForecastVariable from invalid "
        f"String value {var} for key {key}."
    )


def _timezone(latitude: float, longitude: float, requested: str) -> tuple[str, int]:
    if requested != "auto":
        return requested, 0
    for place in PLACES:
        if abs(place.latitude - latitude) < 0.5 and abs(place.longitude - longitude) < 0.5:
            return place.timezone, place.utc_offset_s
    hours = round(longitude / 15)
    return ("GMT" if hours == 0 else f"Etc/GMT{-hours:+d}"), hours * 3600


def _abbreviation(offset: int) -> str:
    hours = offset // 3600
    return "GMT" if hours == 0 else f"GMT{hours:+d}"


def _error(status: int, reason: str) -> Response:
    return JSONResponse({"error": True, "reason": reason}, status_code=status)
