"""The service's configuration: the graphs' and tools' settings plus its own, read once."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from graphs.settings import GraphSettings

EMPTY_API_KEY = (
    "AGENT_API_KEY is set but empty: set it to a key, or remove the variable to serve without one"
)


class Settings(GraphSettings):
    """Every variable the service reads (see the README's table).

    It extends the graphs' settings (which extend the tools'), so the one object the
    service reads is passed down to every graph and tool it builds.
    """

    agent_db: Path = Path("data/agent.sqlite")
    agent_api_key: SecretStr | None = None
    agent_cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    agent_max_body_bytes: int = Field(256 * 1024, ge=1024)
    agent_max_message_bytes: int = Field(32 * 1024, ge=256)
    agent_sse_keepalive_s: float = Field(15.0, gt=0)
    agent_run_events_ttl_s: float = Field(3600.0, gt=0)
    agent_shutdown_grace_s: float = Field(10.0, ge=0)
    agent_extra_graphs: str = ""  # "id=module,...": graphs served besides GRAPH_MODULES (bench/)
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)

    # Operating it (README "Operating it"): metrics, logs, traces.
    agent_metrics: bool = Field(True, description="serve GET /metrics and measure runs")
    agent_log_format: Literal["text", "json"] = Field(
        "text", description="text: human-readable lines; json: one JSON object a line"
    )
    # OpenTelemetry's own variables: traces go out only when an endpoint is set.
    otel_exporter_otlp_endpoint: str | None = Field(
        None, description="OTLP/HTTP base URL; traces go to <it>/v1/traces"
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        None, description="OTLP/HTTP traces URL, used as it is (wins over the base URL)"
    )
    otel_service_name: str = "react-agent"

    @field_validator("agent_api_key")
    @classmethod
    def _no_empty_key(cls, value: SecretStr | None) -> SecretStr | None:
        # An empty key would turn the guard on and accept `Authorization: Bearer `.
        if value is not None and not value.get_secret_value().strip():
            raise ValueError(EMPTY_API_KEY)
        return value

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
