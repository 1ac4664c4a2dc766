"""deploy/: two replicas on PostgreSQL behind Caddy, checked as files (no Docker, no network)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from app.http.server import create_app
from app.settings import PostgresDb, Settings, parse_database

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
CADDYFILE = DEPLOY / "Caddyfile"
# `${NAME}`, `${NAME:-default}`, `${NAME:?message}`: what Compose interpolates.
INTERPOLATION = re.compile(r"\$\{(\w+)(?:[:?-][^}]*)?\}")
PASSWORD = "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
PASSED_THROUGH = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "TUSHARE_TOKEN")
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def environment(service: dict[str, Any]) -> dict[str, str | None]:
    """A service's `environment`, map or list form, as a dict (None: passed through)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = [item.partition("=") for item in env]
        return {name: value if sep else None for name, sep, value in pairs}
    return {name: None if value is None else str(value) for name, value in env.items()}


def agents() -> dict[str, dict[str, Any]]:
    """The services built from the repository's Dockerfile."""
    services = compose()["services"]
    return {
        name: service
        for name, service in services.items()
        if "build" in service and (DEPLOY / build_context(service)).resolve() == ROOT
    }


def build_context(service: dict[str, Any]) -> str:
    build = service["build"]
    return build if isinstance(build, str) else build.get("context", ".")


def replicas(service: dict[str, Any]) -> int:
    return int((service.get("deploy") or {}).get("replicas", 1))


def settings_variables() -> set[str]:
    """Every environment variable Settings reads: field names, or their aliases."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, str):
            names.add(alias.upper())
        elif alias is not None:
            names |= {str(choice).upper() for choice in getattr(alias, "choices", ())}
        else:
            names.add(name.upper())
    return names


def caddy_lines() -> list[list[str]]:
    """The Caddyfile's lines as tokens, comments and blank lines left out."""
    lines = []
    for raw in CADDYFILE.read_text().splitlines():
        tokens = re.sub(r"(^|\s)#.*", "", raw).split()
        if tokens:
            lines.append(tokens)
    return lines


def seconds(duration: str) -> float:
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = DURATION.findall(duration)
    assert "".join(n + unit for n, unit in parts) == duration, duration
    return sum(float(n) * scale[unit] for n, unit in parts)


def test_compose_runs_two_replicas_of_the_repository_image() -> None:
    found = agents()

    assert sum(replicas(service) for service in found.values()) == 2
    assert (ROOT / "Dockerfile").is_file()


def test_every_replica_keeps_its_state_in_the_compose_postgres_service() -> None:
    services = compose()["services"]

    for name, service in agents().items():
        url = INTERPOLATION.sub("secret", environment(service)["AGENT_DB"] or "")
        db = parse_database(url)
        assert isinstance(db, PostgresDb), name
        host = db.where.split("@", 1)[1].split(":")[0].split("/")[0]
        assert host in services, f"{name}: AGENT_DB names {host}, not a service"
        assert services[host]["image"].startswith("postgres:")
        assert service["depends_on"][host]["condition"] == "service_healthy"


def test_postgres_is_checked_with_pg_isready_and_keeps_its_data_in_a_named_volume() -> None:
    spec = compose()
    postgres = spec["services"]["postgres"]

    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in spec["volumes"]


def test_the_database_password_comes_from_the_environment_never_from_the_file() -> None:
    postgres = environment(compose()["services"]["postgres"])

    assert postgres["POSTGRES_PASSWORD"] == PASSWORD
    for name, service in agents().items():
        url = environment(service)["AGENT_DB"] or ""
        password = url.split("://", 1)[1].rsplit("@", 1)[0].split(":", 1)[1]
        assert password == PASSWORD, name
    for line in COMPOSE.read_text().splitlines():
        if "PASSWORD" in line.upper() and not line.lstrip().startswith("#"):
            assert PASSWORD in line, line


def test_model_and_tushare_variables_are_passed_through_from_the_host() -> None:
    for name, service in agents().items():
        env = environment(service)
        for variable in PASSED_THROUGH:
            assert variable in env, f"{name} lacks {variable}"
            assert env[variable] is None or INTERPOLATION.fullmatch(env[variable] or ""), variable


def test_every_variable_set_on_the_replicas_is_one_the_service_reads() -> None:
    known = settings_variables()

    for name, service in agents().items():
        unknown = set(environment(service)) - known
        assert not unknown, f"{name} sets variables the service never reads: {sorted(unknown)}"


def test_replicas_listen_on_every_interface_of_their_container() -> None:
    for name, service in agents().items():
        assert environment(service)["HOST"] == "0.0.0.0", name


def test_docker_waits_longer_than_the_shutdown_grace_before_it_kills_a_replica() -> None:
    for name, service in agents().items():
        grace = float(environment(service).get("AGENT_SHUTDOWN_GRACE_S") or 10)
        # Docker's default is 10 s, the service's default grace: no time left to drain.
        # The server waits the grace + 2 s for its streams; leave room above that.
        assert seconds(service.get("stop_grace_period", "10s")) >= grace + 5, name


def test_the_proxy_is_published_on_port_8000_and_routes_to_every_replica() -> None:
    proxy = compose()["services"]["proxy"]
    upstreams = next(line[1:] for line in caddy_lines() if line[0] == "reverse_proxy")

    assert "8000:8000" in [str(port) for port in proxy["ports"]]
    assert "./Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    assert sorted(u for u in upstreams if u != "{") == sorted(f"{a}:8000" for a in agents())


def test_the_proxy_passes_events_on_at_once_and_never_times_a_stream_out() -> None:
    lines = caddy_lines()

    assert ["flush_interval", "-1"] in lines
    assert not any(line[0] == "encode" for line in lines)  # compressing buffers
    for line in lines:
        if line[0] in ("read_timeout", "response_header_timeout", "stream_timeout"):
            assert line[1] == "0", line


def test_the_proxy_balances_without_stickiness() -> None:
    policies = [line[1] for line in caddy_lines() if line[0] == "lb_policy"]

    assert policies
    assert set(policies) <= {"least_conn", "round_robin"}


def test_the_proxy_checks_the_readiness_probe_the_service_serves() -> None:
    lines = caddy_lines()
    paths = {getattr(route, "path", None) for route in create_app().routes}

    assert ["health_uri", "/readyz"] in lines
    assert {"/readyz", "/healthz"} <= paths
