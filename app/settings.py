"""Every environment variable the project reads, typed and read once."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """Configuration from the environment (and `.env`); see the README's table."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", frozen=True
    )

    # Model: any OpenAI-compatible chat endpoint.
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_timeout_s: float = Field(60.0, gt=0, validation_alias="OPENAI_TIMEOUT")
    openai_max_retries: int = Field(2, ge=0, validation_alias="OPENAI_MAX_RETRIES")

    # External services.
    open_meteo_geocoding_url: str = "https://geocoding-api.open-meteo.com/v1/search"
    open_meteo_forecast_url: str = "https://api.open-meteo.com/v1/forecast"
    tushare_token: SecretStr | None = None
    tushare_mcp_url: str = "https://api.tushare.pro/mcp/"
    open_meteo_timeout_s: float = Field(10.0, gt=0, validation_alias="OPEN_METEO_TIMEOUT")
    tushare_connect_timeout_s: float = Field(15.0, gt=0, validation_alias="TUSHARE_CONNECT_TIMEOUT")
    tushare_call_timeout_s: float = Field(30.0, gt=0, validation_alias="TUSHARE_CALL_TIMEOUT")

    # Service.
    agent_db: Path = Path("data/agent.sqlite")
    agent_api_key: SecretStr | None = None
    agent_cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    agent_reports_dir: Path = Path("data/reports")
    agent_max_body_bytes: int = Field(256 * 1024, ge=1024)
    agent_max_message_bytes: int = Field(32 * 1024, ge=256)
    agent_sse_keepalive_s: float = Field(15.0, gt=0)
    agent_extra_graphs: str = ""  # "id=module,...": graphs served besides GRAPH_MODULES (bench/)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)

    # The four guards of the tools loop.
    agent_max_steps: int = Field(12, ge=1, description="model turns per run")
    agent_max_calls_per_tool: int = Field(6, ge=1, description="calls of one tool per run")
    agent_tool_timeout_s: float = Field(
        30.0, gt=0, validation_alias=AliasChoices("AGENT_TOOL_TIMEOUT", "AGENT_TOOL_TIMEOUT_S")
    )

    @field_validator("agent_cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        # A comma-separated list reads better in an env var than JSON.
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
