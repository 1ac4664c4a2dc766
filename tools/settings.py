"""The tools' configuration: Open-Meteo, Tushare MCP, configured MCP servers, reports.

Each tool takes its settings as a parameter; nothing here is read at import. The
graphs extend `ToolSettings` with their own fields, and the service extends those.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from tools.mcp.config import McpConfig, load_mcp_config

PROJECT_ENV_FILE = Path(__file__).resolve().parents[1] / ".env"


def env_files() -> tuple[Path, ...]:
    """The `.env` files read, later ones winning: `AGENT_ENV_FILE` alone when it is set,
    else the project's `.env` and then the current directory's."""
    chosen = os.environ.get("AGENT_ENV_FILE")
    if chosen:
        return (Path(chosen),)
    return (PROJECT_ENV_FILE, Path(".env"))


class EnvSettings(BaseSettings):
    """Settings read from the environment and `.env` files: typed, frozen, unknown keys ignored.

    The environment wins over the files (see `env_files`).
    """

    model_config = SettingsConfigDict(
        env_file=env_files(), env_file_encoding="utf-8", extra="ignore", frozen=True
    )


class OpenMeteoSettings(EnvSettings):
    """Where `get_weather` finds Open-Meteo, and how long it waits."""

    open_meteo_geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    open_meteo_forecast_url: str = "https://api.open-meteo.com/v1/forecast"
    open_meteo_timeout_s: float = Field(10.0, gt=0, validation_alias="OPEN_METEO_TIMEOUT")


class TushareSettings(EnvSettings):
    """The Tushare MCP server, its token and timeouts."""

    tushare_token: SecretStr | None = None
    tushare_mcp_url: str = "https://api.tushare.pro/mcp/"
    tushare_connect_timeout_s: float = Field(15.0, gt=0, validation_alias="TUSHARE_CONNECT_TIMEOUT")
    tushare_call_timeout_s: float = Field(30.0, gt=0, validation_alias="TUSHARE_CALL_TIMEOUT")
    # After a failed connect, requests are answered at once for this long, then retried.
    tushare_retry_after_s: float = Field(30.0, ge=0, validation_alias="TUSHARE_RETRY_AFTER")


class ReportSettings(EnvSettings):
    """Where `save_report` writes."""

    agent_reports_dir: Path = Path("data/reports")


class McpSettings(EnvSettings):
    """The MCP servers AGENT_MCP_CONFIG declares (`tools.mcp.config`), read once with the
    settings: a problem in the file is kept as a line to log, never raised."""

    agent_mcp_config: Annotated[McpConfig, NoDecode] = Field(
        default_factory=McpConfig, description="a JSON file of MCP servers (README: MCP servers)"
    )
    # After a server failed to start, its tools are left out for this long, then retried.
    agent_mcp_retry_after_s: float = Field(30.0, ge=0, validation_alias="AGENT_MCP_RETRY_AFTER")

    @field_validator("agent_mcp_config", mode="before")
    @classmethod
    def _read_file(cls, value: object) -> object:
        if isinstance(value, str | Path):
            return load_mcp_config(value) if str(value).strip() else McpConfig()
        return value


class ToolSettings(OpenMeteoSettings, TushareSettings, McpSettings, ReportSettings):
    """Every tool's settings in one object (what a graph passes down)."""
