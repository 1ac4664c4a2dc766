"""The service's configuration: the graphs' and tools' settings plus its own, read once."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from graphs.settings import GraphSettings

EMPTY_API_KEY = (
    "AGENT_API_KEY is set but empty: set it to a key, or remove the variable to serve without one"
)
BAD_DB = "use a file path, sqlite:///path or postgresql://user:password@host:port/database"
POSTGRES_SCHEMES = ("postgresql", "postgres")
# Where local files (the terminal's log) go when the database is not a local file.
LOCAL_DATA = Path("data")
# The names of this machine a request's Host may always give (AGENT_ALLOWED_HOSTS unset),
# and the bind addresses that name no host of their own (every interface).
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
EVERY_INTERFACE = frozenset({"0.0.0.0", "::", "[::]", ""})
ANY_HOST = "*"


def host_name(value: str) -> str:
    """A `Host` header's (or an allow-list entry's) name: lowercase, without its port or a
    trailing dot, an IPv6 address in brackets (`[::1]`, as a Host header writes it)."""
    text = value.strip().lower()
    if text.startswith("["):
        name = text.partition("]")[0] + "]"
    elif text.count(":") > 1:  # a bare IPv6 address (HOST=::1): no port to take off
        name = f"[{text}]"
    else:
        name = text.partition(":")[0]
    return name.rstrip(".")


class SqliteDb(BaseModel):
    """AGENT_DB as a path (or `sqlite:///path`): an SQLite file, checkpoints and runs in it."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["sqlite"] = "sqlite"
    path: Path

    @property
    def data_dir(self) -> Path:
        """The directory for local files beside the database (the terminal's log)."""
        return self.path.parent

    def __str__(self) -> str:
        return str(self.path)


class PostgresDb(BaseModel):
    """AGENT_DB as `postgresql://...`: a PostgreSQL database, checkpoints and runs in it.

    The password is kept apart from the URL, as a secret: `str()` and every message show
    the URL without it, and the secret redactor masks it wherever it is echoed.
    """

    model_config = ConfigDict(frozen=True)

    kind: Literal["postgres"] = "postgres"
    url: str = Field(description="the connection URL without its password")
    password: SecretStr | None = None

    @property
    def data_dir(self) -> Path:
        return LOCAL_DATA

    @property
    def where(self) -> str:
        """The URL without password or parameters: the user, host, port and database."""
        return self.url.partition("?")[0]

    def __str__(self) -> str:
        return self.where


Database = Annotated[SqliteDb | PostgresDb, Field(discriminator="kind")]


def parse_database(value: str | Path) -> SqliteDb | PostgresDb:
    """AGENT_DB's value as the database it names (ValueError: neither a path nor a known URL).

    `sqlite:///data/x.sqlite` is the relative path `data/x.sqlite`, `sqlite:////abs/x`
    the absolute one (SQLAlchemy's rule). A password in a PostgreSQL URL's user part or
    in its `password` parameter is taken out of the URL.
    """
    if isinstance(value, Path):
        return SqliteDb(path=value)
    text = value.strip()
    scheme, found, rest = text.partition("://")
    if not found:
        return SqliteDb(path=Path(text))
    if scheme == "sqlite" and rest.startswith("/") and len(rest) > 1:
        return SqliteDb(path=Path(rest[1:]))
    if scheme not in POSTGRES_SCHEMES:
        raise ValueError(BAD_DB)  # never echo the value: it may hold a password
    parts = urlsplit(text)
    user_info, at, hosts = parts.netloc.rpartition("@")
    user, colon, password = user_info.partition(":")
    # The query is split, never decoded and re-encoded: libpq reads only %XX, so a "+"
    # is a plus (not a space, as form decoding would make it) in a password or options.
    pairs = [pair.partition("=") for pair in parts.query.split("&") if pair]
    passwords = [unquote(password)] if colon else []
    passwords += [unquote(v) for k, _, v in pairs if unquote(k) == "password"]
    kept = ["".join(pair) for pair in pairs if unquote(pair[0]) != "password"]
    netloc = f"{user}@{hosts}" if at else hosts
    query = f"?{'&'.join(kept)}" if kept else ""
    url = f"postgresql://{netloc}{parts.path}{query}"
    secret = SecretStr(passwords[-1]) if passwords and passwords[-1] else None
    return PostgresDb(url=url, password=secret)


class Settings(GraphSettings):
    """Every variable the service reads (see the README's table).

    It extends the graphs' settings (which extend the tools'), so the one object the
    service reads is passed down to every graph and tool it builds.
    """

    agent_db: Annotated[Database, NoDecode] = Field(
        default_factory=lambda: SqliteDb(path=Path("data/agent.sqlite")),
        description="a path or sqlite:///path (SQLite), or postgresql://... (PostgreSQL)",
    )
    agent_db_pool_size: int = Field(10, ge=1, description="PostgreSQL: connections at most")
    agent_db_prepare: bool = Field(
        True, description="PostgreSQL: prepared statements (false for pgbouncer transaction mode)"
    )
    agent_db_timeout_s: float = Field(
        5.0,
        gt=0,
        description="how long a request waits for the database (a pooled PostgreSQL "
        "connection, SQLite's write lock) before it is refused with 503 storage_unavailable",
    )
    agent_api_key: SecretStr | None = None
    agent_token: SecretStr | None = Field(
        None,
        description="the terminal client's key or token for --server (default of --token; "
        "AGENT_API_KEY when unset)",
    )
    # Users (README "Users and access"; app.core.users).
    agent_jwt_jwks_url: str | None = Field(
        None, description="an identity provider's JWKS URL: its bearer JWTs sign users in"
    )
    agent_jwt_issuer: str | None = Field(None, description="the `iss` a token must carry")
    agent_jwt_audience: str | None = Field(None, description="the `aud` a token must carry")
    agent_jwt_admin_claim: str | None = Field(
        None, description="`claim` (true) or `claim=value` (or a list holding it): an admin"
    )
    agent_trusted_user_header: str | None = Field(
        None, description="a header naming the user, believed from AGENT_TRUSTED_PROXIES only"
    )
    agent_trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="addresses or networks (CIDR) of trusted proxies"
    )
    agent_user_max_runs: int = Field(4, ge=1, description="a user's runs queued or running at once")
    agent_user_rpm: int | None = Field(
        300, ge=1, description="a user's requests a minute (unset or empty: no limit)"
    )
    agent_user_tokens_per_day: int | None = Field(
        None, ge=1, description="a user's model tokens a UTC day (unset: no quota)"
    )
    agent_cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    agent_allowed_hosts: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="the names a request's Host header may give (its port aside); `*`: any; "
        "unset: HOST (unless 0.0.0.0 or ::), localhost, 127.0.0.1 and [::1]",
    )
    agent_max_body_bytes: int = Field(256 * 1024, ge=1024)
    agent_max_message_bytes: int = Field(32 * 1024, ge=256)
    agent_max_messages_per_request: int = Field(
        500, ge=1, description="messages one run request may carry, history resent included"
    )
    # Slow clients (app.http.deadlines): only a request's arrival is bounded, never the
    # answer, so an event stream stays open for as long as its run lasts.
    agent_header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a request's head arrives within this of the connection opening "
        "(or of the answer before): else the connection is closed",
    )
    agent_body_timeout_s: float = Field(
        30.0, gt=0, description="a request's whole body arrives within this of its head: else 408"
    )
    agent_max_connections: int = Field(
        1000, ge=1, description="open connections per process; a request on one beyond is 503"
    )
    agent_max_queued_per_thread: int = Field(
        10, ge=1, description="runs waiting behind a thread's active one, across processes"
    )
    agent_max_queued: int = Field(
        100, ge=1, description="runs waiting in this process, over all its threads"
    )
    agent_sse_keepalive_s: float = Field(15.0, gt=0)
    agent_run_events_ttl_s: float = Field(3600.0, gt=0)
    agent_shutdown_grace_s: float = Field(10.0, ge=0)
    agent_run_lease_s: float = Field(
        30.0,
        ge=0.3,
        description="a running run's thread lease; renewed every third of it, taken over "
        "by another process once it expires",
    )
    agent_thread_titles: bool = Field(
        True,
        description="after a thread's first exchange, ask the model for a short title in the "
        "background (one extra model call per thread); false: the first message stays the title",
    )
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

    @field_validator("agent_db", mode="before")
    @classmethod
    def _parse_db(cls, value: object) -> object:
        # Parsed once here: everything after sees SqliteDb or PostgresDb.
        return parse_database(value) if isinstance(value, str | Path) else value

    @field_validator("agent_cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        # A comma-separated list reads better in an env var than JSON.
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("agent_trusted_proxies", mode="before")
    @classmethod
    def _split_proxies(cls, value: object) -> object:
        if isinstance(value, str):
            return [entry.strip() for entry in value.split(",") if entry.strip()]
        return value

    @field_validator("agent_trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an address or a network (CIDR)") from None
        return value

    @field_validator("agent_user_rpm", "agent_user_tokens_per_day", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("agent_allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        # Comma-separated too; empty (`AGENT_ALLOWED_HOSTS=`) is unset: the default list.
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()] or None
        return value

    @property
    def allowed_hosts(self) -> frozenset[str] | None:
        """The host names (`host_name`) a request may be addressed to; None: any.

        Unset, the bind address (HOST) and this machine's loopback names: a page on
        another site that rebinds its own name to this address is refused. Bound to every
        interface (0.0.0.0, ::), the server cannot know the names it is reached by: only
        the loopback names, until AGENT_ALLOWED_HOSTS names the others.
        """
        names = self.agent_allowed_hosts
        if names is None:
            bind = [] if self.host.strip() in EVERY_INTERFACE else [self.host]
            names = [*LOCAL_HOSTS, *bind]
        if ANY_HOST in names:
            return None
        return frozenset(host_name(name) for name in names)

    # Checkpoint retention (`react-agent prune`, app.core.storage.retention).
    agent_prune_keep: int = Field(20, ge=1, description="checkpoints kept per thread")
    agent_prune_idle_days: float | None = Field(
        None, gt=0, description="remove threads idle this long; unset: never"
    )
    agent_prune_every_s: float | None = Field(
        None, gt=0, description="the server prunes this often; unset: only `react-agent prune`"
    )

    @field_validator("agent_prune_idle_days", "agent_prune_every_s", mode="before")
    @classmethod
    def _empty_is_off(cls, value: object) -> object:
        # `AGENT_PRUNE_IDLE_DAYS=` (as .env.example shows it) means off, not a bad number.
        return None if isinstance(value, str) and not value.strip() else value

    # LangGraph Studio against this server (app.http.langgraph.studio).
    agent_studio: bool = Field(
        False,
        description="allow LangGraph Studio's origin (CORS) and its JSON bodies sent as "
        "text/plain on LangGraph's API",
    )


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()
