"""deploy/: two replicas on PostgreSQL behind Caddy, checked as the tools read the files.

Compose's own model of `compose.yaml` (`docker-compose config`: merged, interpolated from
the environment given here) and Caddy's own config of the `Caddyfile` (`caddy adapt
--validate`), read the way the service reads its environment (`Settings`). Neither
needs a Docker daemon or the network; `make test` installs both tools.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.http.hosts import PROBES
from app.http.server import create_app
from app.settings import PostgresDb, Settings, parse_database

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
CADDYFILE = DEPLOY / "Caddyfile"
CADDY_CONFIG_PATH = "/etc/caddy/Caddyfile"  # where the caddy image reads its config
POSTGRES_DATA = "/var/lib/postgresql/data"  # the postgres image's PGDATA
PASSED_THROUGH = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "TUSHARE_TOKEN",
    "AGENT_ALLOWED_HOSTS",
)
DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
NS = 1_000_000_000  # Caddy's JSON durations are nanoseconds


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make test` (it installs it)", pytrace=False)
    return found


def compose_config(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` of compose.yaml with exactly `env` as the shell's variables
    (and no deploy/.env: an empty env file instead)."""
    env_file = tmp_path / "empty.env"
    env_file.write_text("")
    return subprocess.run(
        [tool("docker-compose"), "--env-file", str(env_file), "-f", str(COMPOSE), "config"],
        env={"PATH": os.environ["PATH"], **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def host_env() -> dict[str, str]:
    """What the operator's shell holds: the database password and the model's settings."""
    return {"POSTGRES_PASSWORD": secrets.token_hex(12)} | {
        name: f"host-{name.lower()}" for name in PASSED_THROUGH
    }


@pytest.fixture(scope="module")
def spec(host_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Compose's resolved model of the deployment under `host_env`."""
    done = compose_config(host_env, tmp_path_factory.mktemp("compose"))
    assert done.returncode == 0, done.stderr
    resolved: dict[str, Any] = yaml.safe_load(done.stdout)
    return resolved


@pytest.fixture(scope="module")
def caddy() -> dict[str, Any]:
    """Caddy's JSON config of the Caddyfile: its one server."""
    done = subprocess.run(
        [
            tool("caddy"),
            "adapt",
            "--config",
            str(CADDYFILE),
            "--adapter",
            "caddyfile",
            "--validate",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [server] = json.loads(done.stdout)["apps"]["http"]["servers"].values()
    server_config: dict[str, Any] = server
    return server_config


def agents(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services built from the repository's Dockerfile."""
    return {
        name: service
        for name, service in spec["services"].items()
        if "build" in service and Path(service["build"]["context"]).resolve() == ROOT
    }


def settings_of(service: dict[str, Any]) -> Settings:
    """The Settings a replica's process reads from its container's environment (and
    nothing else: none of this process's variables, no env file)."""
    with pytest.MonkeyPatch.context() as env:
        for name in settings_variables() & set(os.environ):
            env.delenv(name)
        for name, value in service["environment"].items():
            if value is not None:
                env.setenv(name, str(value))
        return Settings(_env_file=None)


def proxy_handler(caddy: dict[str, Any]) -> dict[str, Any]:
    [route] = caddy["routes"]
    [handler] = route["handle"]
    assert handler["handler"] == "reverse_proxy", handler
    return dict(handler)


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


def seconds(duration: str) -> float:
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = DURATION.findall(duration)
    assert "".join(n + unit for n, unit in parts) == duration, duration
    return sum(float(n) * scale[unit] for n, unit in parts)


def test_compose_runs_two_replicas_of_the_repository_image(spec: dict[str, Any]) -> None:
    found = agents(spec)

    assert sum(int(s.get("deploy", {}).get("replicas", 1)) for s in found.values()) == 2
    for service in found.values():
        assert (ROOT / service["build"].get("dockerfile", "Dockerfile")).is_file()


def test_every_replica_logs_in_to_the_database_the_compose_postgres_service_creates(
    spec: dict[str, Any], host_env: dict[str, str]
) -> None:
    services = spec["services"]

    for name, service in agents(spec).items():
        db = settings_of(service).agent_db
        assert isinstance(db, PostgresDb), name
        host = db.where.split("@", 1)[1].split(":")[0].split("/")[0]
        assert host in services, f"{name}: AGENT_DB names {host}, not a service"
        postgres = services[host]
        assert postgres["image"].startswith("postgres:")
        created = postgres["environment"]
        assert (
            db.where
            == f"postgresql://{created['POSTGRES_USER']}@{host}:5432/{created['POSTGRES_DB']}"
        )
        assert db.password is not None
        assert db.password.get_secret_value() == created["POSTGRES_PASSWORD"]
        assert service["depends_on"][host]["condition"] == "service_healthy"


def test_postgres_is_checked_with_pg_isready_and_keeps_its_data_in_a_named_volume(
    spec: dict[str, Any],
) -> None:
    postgres = spec["services"]["postgres"]

    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    [mount] = [v for v in postgres["volumes"] if v.split(":")[1] == POSTGRES_DATA]
    assert mount.split(":")[0] in spec["volumes"]


def test_the_database_password_comes_from_the_environment_and_compose_refuses_to_run_without_it(
    spec: dict[str, Any], host_env: dict[str, str], tmp_path: Path
) -> None:
    password = host_env["POSTGRES_PASSWORD"]
    without = compose_config(
        {k: v for k, v in host_env.items() if k != "POSTGRES_PASSWORD"}, tmp_path
    )

    assert without.returncode != 0
    assert "set POSTGRES_PASSWORD" in without.stderr
    assert spec["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] == password
    for name, service in agents(spec).items():
        db = parse_database(service["environment"]["AGENT_DB"])
        assert isinstance(db, PostgresDb) and db.password is not None, name
        assert db.password.get_secret_value() == password, name
    assert password not in COMPOSE.read_text()


def test_model_and_tushare_variables_are_passed_through_from_the_host(
    spec: dict[str, Any], host_env: dict[str, str], tmp_path: Path
) -> None:
    unset = compose_config({"POSTGRES_PASSWORD": host_env["POSTGRES_PASSWORD"]}, tmp_path)
    assert unset.returncode == 0, unset.stderr
    left_unset = agents(yaml.safe_load(unset.stdout))

    for name, service in agents(spec).items():
        for variable in PASSED_THROUGH:
            assert service["environment"][variable] == host_env[variable], (name, variable)
            assert left_unset[name]["environment"][variable] is None, (name, variable)


def test_every_variable_set_on_the_replicas_is_one_the_service_reads(
    spec: dict[str, Any],
) -> None:
    known = settings_variables()

    for name, service in agents(spec).items():
        unknown = set(service["environment"]) - known
        assert not unknown, f"{name} sets variables the service never reads: {sorted(unknown)}"


def test_replicas_listen_on_every_interface_of_their_container(spec: dict[str, Any]) -> None:
    for name, service in agents(spec).items():
        assert settings_of(service).host == "0.0.0.0", name


def test_docker_waits_longer_than_the_shutdown_grace_before_it_kills_a_replica(
    spec: dict[str, Any],
) -> None:
    for name, service in agents(spec).items():
        grace = settings_of(service).agent_shutdown_grace_s
        # Docker's default is 10 s, the service's default grace: no time left to drain.
        # The server waits the grace + 2 s for its streams; leave room above that.
        assert seconds(service.get("stop_grace_period", "10s")) >= grace + 5, name


def test_the_proxy_is_published_on_port_8000_and_routes_to_every_replica(
    spec: dict[str, Any], caddy: dict[str, Any]
) -> None:
    proxy = spec["services"]["proxy"]
    listening = {int(address.rpartition(":")[2]) for address in caddy["listen"]}
    replicas = {f"{name}:{settings_of(s).port}" for name, s in agents(spec).items()}

    published = {(port["published"], port["target"]) for port in proxy["ports"]}
    assert {(8000, target) for target in listening} <= published
    assert f"{CADDYFILE}:{CADDY_CONFIG_PATH}:ro" in proxy["volumes"]
    assert {u["dial"] for u in proxy_handler(caddy)["upstreams"]} == replicas


def test_the_proxy_passes_events_on_at_once_and_never_times_a_stream_out(
    caddy: dict[str, Any],
) -> None:
    handler = proxy_handler(caddy)
    [route] = caddy["routes"]

    assert handler["flush_interval"] == -1
    assert [h["handler"] for h in route["handle"]] == ["reverse_proxy"]  # no encode: it buffers
    transport = handler["transport"]
    for timeout in ("read_timeout", "response_header_timeout"):
        assert transport.get(timeout, 0) == 0, transport


def test_the_proxy_balances_without_stickiness(caddy: dict[str, Any]) -> None:
    policy = proxy_handler(caddy)["load_balancing"]["selection_policy"]["policy"]

    assert policy in {"least_conn", "round_robin"}


def test_the_proxy_checks_the_readiness_probe_the_service_serves(caddy: dict[str, Any]) -> None:
    active = proxy_handler(caddy)["health_checks"]["active"]
    paths = {getattr(route, "path", None) for route in create_app().routes}

    assert (active["uri"], active["expect_status"]) == ("/readyz", 200)
    assert active["timeout"] < active["interval"] <= 10 * NS
    assert {"/readyz", "/healthz"} <= paths


def test_replicas_answer_the_address_the_readme_opens_and_the_names_the_operator_passes(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    password = {"POSTGRES_PASSWORD": secrets.token_hex(12)}
    unset = agents(yaml.safe_load(compose_config(password, tmp_path).stdout))
    named = compose_config({**password, "AGENT_ALLOWED_HOSTS": "agent.example.com"}, tmp_path)
    assert named.returncode == 0, named.stderr

    for name, service in unset.items():
        # Bound to 0.0.0.0, a replica cannot know its public names: the loopback ones only.
        allowed = settings_of(service).allowed_hosts
        assert allowed is not None and {"127.0.0.1", "localhost"} <= allowed, name
        assert "0.0.0.0" not in allowed, name
    for name, service in agents(yaml.safe_load(named.stdout)).items():
        assert settings_of(service).allowed_hosts == {"agent.example.com"}, name
    # Caddy's health checks call /readyz by the replica's address: answered whatever Host.
    assert "/readyz" in PROBES
