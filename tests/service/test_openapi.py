"""The OpenAPI schema tells the truth, held to it by schemathesis against a real server.

`test_schemathesis_finds_nothing` runs `schemathesis run` against `react-agent serve` on
the LLM and Open-Meteo doubles, all four phases, with all its checks: no server error,
responses as documented (schema, status, content type, headers), every request the
schema allows accepted and every one it forbids refused, and the stateful ones. The model
always answers and the hooks (`openapi_hooks.py`) make half the runs requested valid
ones, so runs succeed and the stateful phase follows the schema's links from real thread
and run ids. Two bounded invocations: examples, coverage and fuzzing by
their test-case counts (25-60 s, by the machine's load), then the stateful phase by
`STATEFUL_BUDGET_S` of its own, after which schemathesis is interrupted and reports what
it found so far. The stateful phase has its own clock because with one shared budget a
loaded machine once left it under two seconds.
`SCHEMATHESIS_SEED=<n>` replays (or explores) another seed than the fixed one.

The other tests pin what the schema says on its own: one error body everywhere, the 401
only where a key is required, no FastAPI array-form 422, and `/docs` served from this
process under a CSP.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app.http.server import create_app
from app.settings import Settings
from tests.doubles.llm import ScriptedLLM, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Backend, server_env
from tests.support.processes import ServerProcess, refused_port

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
HOOKS = str(Path(__file__).with_name("openapi_hooks.py"))
# Every check schemathesis has: besides no 5xx and responses as documented, schema-valid
# requests accepted and schema-breaking ones refused (the schema says what the server
# checks), the methods a path lacks answered 405, and the stateful checks.
CHECKS = "all"
SEED = os.environ.get("SCHEMATHESIS_SEED", "20261201")
# Test cases per operation and phase, and steps per stateful scenario.
MAX_EXAMPLES = 40
CONFIG = """
[phases.stateful]
max-steps = 8
"""
# The stateful phase alone also takes a 422 for a schema-valid request: its requests carry
# ids and bodies from earlier answers, so they meet rules the schema cannot state (a resume
# of a thread no longer paused, a state update with nothing in it). The other phases still
# hold every schema-valid request accepted (the hooks shape them to those rules).
STATEFUL_CONFIG = (
    CONFIG
    + """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "422"]
"""
)
REQUEST_TIMEOUT_S = 10
CASES_LIMIT_S = 600  # examples, coverage, fuzzing: bounded by counts; this only stops a hang
STATEFUL_BUDGET_S = 45  # then schemathesis is interrupted (SIGINT) and reports
GRACE_S = 120  # for it to stop and report (loaded, it once took over 60 s); then the test fails
# Links the stateful phase must have followed: fewer means it no longer reaches real runs.
MIN_LINKS_COVERED = 8

ERROR_REF = "#/components/schemas/ErrorBody"
# An in-process client addressed as the browser on this machine would (not "testserver":
# the Host allow-list refuses that).
LOCAL = "http://localhost"
TWO = b"\xb2"  # "²" in Latin-1 (how headers are read): `isdigit()` says yes, `int()` says no


@pytest.fixture(scope="module")
def fuzzed_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    """A server of its own: schemathesis leaves many threads behind."""
    data_dir = tmp_path_factory.mktemp("openapi")
    # No Tushare token (so no MCP connect), and a dead address should one be tried.
    with refused_port() as port:
        unreachable = f"http://127.0.0.1:{port}/mcp/"
        process = ServerProcess(
            server_env(
                _llm_server, _meteo_server, data_dir, backend=backend, TUSHARE_MCP_URL=unreachable
            )
        )
        yield process
        process.stop()


@pytest.mark.timeout(CASES_LIMIT_S + STATEFUL_BUDGET_S + 2 * GRACE_S + 60)
def test_schemathesis_finds_nothing(
    fuzzed_server: ServerProcess, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.fallback = lambda body: text("好的。")
    config = tmp_path / "schemathesis.toml"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": HOOKS,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "COLUMNS": "120",
    }

    def schemathesis(phases: str, settings: str, budget_s: float) -> tuple[str, int]:
        config.write_text(settings, encoding="utf-8")
        command = [
            SCHEMATHESIS,
            "--config-file",
            str(config),
            "run",
            f"{fuzzed_server.url}/openapi.json",
            "--header",
            f"Authorization: Bearer {API_KEY}",
            "--checks",
            CHECKS,
            "--phases",
            phases,
            "--max-examples",
            str(MAX_EXAMPLES),
            "--request-timeout",
            str(REQUEST_TIMEOUT_S),
            "--seed",
            SEED,
            "--generation-database",
            "none",
            "--no-color",
            "--output-truncate",
            "false",
        ]
        return _run_bounded(command, budget_s=budget_s, cwd=tmp_path, env=env)

    report, status = schemathesis("examples,coverage,fuzzing", CONFIG, CASES_LIMIT_S)
    print(report)  # shown with -s or -rP
    assert status == 0, f"schemathesis found problems (seed {SEED}):\n{report}"
    assert re.search(r"Fuzzing \(in ", report), f"the fuzzing phase did not finish:\n{report}"

    report, status = schemathesis("stateful", STATEFUL_CONFIG, STATEFUL_BUDGET_S)
    print(report)
    covered = re.search(r"API Links:\s+(\d+) covered", report)
    assert status == 0, f"schemathesis found problems (seed {SEED}):\n{report}"
    assert re.search(r"Stateful \((in|interrupted after) ", report), f"no stateful phase:\n{report}"
    assert covered and int(covered.group(1)) >= MIN_LINKS_COVERED, report


def _run_bounded(
    command: list[str], *, budget_s: float, cwd: Path, env: dict[str, str]
) -> tuple[str, int]:
    """Run `command` for at most `budget_s`, then interrupt it as Ctrl-C would; its output."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    try:
        output, _ = process.communicate(timeout=budget_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
            pytest.fail(f"schemathesis did not stop {GRACE_S} s after SIGINT:\n{output}")
    return output, process.returncode


# --- what the schema says ------------------------------------------------------------


def _schema(**settings: Any) -> dict[str, Any]:
    app = create_app(Settings(**settings))
    return app.openapi()


def _operations(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def test_every_refusal_is_documented_as_the_error_body() -> None:
    schema = _schema(agent_api_key="k" * 16)

    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert set(schema["components"]["schemas"]["ErrorBody"]["required"]) == {"detail", "code"}
    for name, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")) and name != "GET /readyz":
                body = response["content"]["application/json"]["schema"]
                assert body == {"$ref": ERROR_REF}, (name, status)
        if name.startswith(("GET /api", "POST /api", "PATCH /api", "DELETE /api", "GET /metrics")):
            assert "401" in operation["responses"], name
            assert operation["security"] == [{"AgentApiKey": []}], name


def test_each_route_documents_what_it_answers() -> None:
    responses = {name: set(op["responses"]) for name, op in _operations(_schema())}
    signed_in = {"401", "429"}  # every API route: no valid credential, a user's rate

    assert responses["POST /api/agents/{graph_id}"] == signed_in | {
        "200", "400", "404", "408", "409", "413", "415", "422", "429", "431", "503"
    }  # fmt: skip
    assert responses["POST /api/chat"] == signed_in | {
        "200", "400", "404", "408", "409", "413", "415", "422", "429", "431", "502", "503"
    }  # fmt: skip
    assert responses["GET /api/threads/{thread_id}/runs/{run_id}/stream"] == signed_in | {
        "200", "404", "410", "422", "431", "503"
    }  # fmt: skip
    assert responses["POST /api/threads/{thread_id}/runs/{run_id}/cancel"] == signed_in | {
        "202", "404", "409", "415", "422", "431", "503"
    }  # fmt: skip
    assert responses["DELETE /api/threads/{thread_id}"] == signed_in | {
        "204", "404", "409", "422", "431", "503"
    }  # fmt: skip
    assert responses["GET /api/threads"] == signed_in | {"200", "404", "422", "431", "503"}
    assert responses["PATCH /api/threads/{thread_id}"] == signed_in | {
        "200", "400", "404", "408", "413", "415", "422", "431", "503"
    }  # fmt: skip
    assert responses["GET /api/me"] == signed_in | {"200", "431", "503"}
    assert responses["GET /readyz"] == {"200", "503"}
    assert "403" in responses["GET /metrics"]  # another user's key
    assert "404" not in responses["GET /metrics"]  # metrics on: never a 404
    assert "404" in {s for s in _metrics_responses(agent_metrics=False)}


def _metrics_responses(**settings: Any) -> set[str]:
    return set(_schema(**settings)["paths"]["/metrics"]["get"]["responses"])


def test_without_a_key_at_start_every_api_route_still_documents_401() -> None:
    # Keys can be added while the service runs (`react-agent users add`).
    schema = _schema()

    assert "AgentApiKey" in schema["components"]["securitySchemes"]
    for name, operation in _operations(schema):
        if name.startswith(("GET /api", "POST /api", "PATCH /api", "DELETE /api")):
            assert "401" in operation["responses"], name
            assert operation["security"] == [{"AgentApiKey": []}], name


def test_the_event_streams_are_documented_as_such() -> None:
    paths = _schema()["paths"]
    for path, method in (
        ("/api/agents/{graph_id}", "post"),
        ("/api/threads/{thread_id}/runs/{run_id}/stream", "get"),
    ):
        assert set(paths[path][method]["responses"]["200"]["content"]) == {"text/event-stream"}


def test_hand_parsed_bodies_keep_their_schemas() -> None:
    paths = _schema()["paths"]

    agents = paths["/api/agents/{graph_id}"]["post"]["requestBody"]["content"]
    chat = paths["/api/chat"]["post"]["requestBody"]["content"]
    assert agents["application/json"]["schema"] == {"$ref": "#/components/schemas/RunAgentInput"}
    assert chat["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatRequest"}
    rename = paths["/api/threads/{thread_id}"]["patch"]["requestBody"]["content"]
    assert rename["application/json"]["schema"]["required"] == ["title"]


def test_odd_parameters_and_unknown_paths_answer_the_error_body() -> None:
    stream = "/api/threads/t1/runs/r1/stream"
    with TestClient(create_app(), base_url=LOCAL) as client:
        bad_after = client.get(stream, params={"after": "-1"})
        strange_id = client.get(stream, headers={"Last-Event-ID": TWO})
        huge_id = client.get(stream, headers={"Last-Event-ID": "9" * 30})
        strange_length = client.post(
            "/api/chat",
            content=b"{}",
            headers={"Content-Length": TWO, "Content-Type": "application/json"},
        )
        nowhere = client.get("/api/nowhere")
        wrong_method = client.put("/api/chat")

    assert bad_after.status_code == 422 and bad_after.json()["code"] == "invalid_request"
    assert "after" in bad_after.json()["detail"]
    assert strange_id.status_code == 422 and strange_id.json()["code"] == "bad_last_event_id"
    assert huge_id.status_code == 422 and huge_id.json()["code"] == "bad_last_event_id"
    assert strange_length.status_code == 400
    assert strange_length.json()["code"] == "bad_content_length"
    assert nowhere.status_code == 404 and nowhere.json()["code"] == "not_found"
    assert wrong_method.status_code == 405 and wrong_method.json()["code"] == "method_not_allowed"
    assert "allow" in wrong_method.headers


def test_docs_are_served_from_this_process_under_a_csp(fuzzed_server: ServerProcess) -> None:
    server = fuzzed_server
    page = httpx.get(f"{server.url}/docs")
    csp = page.headers["content-security-policy"]
    scripts = [
        httpx.get(f"{server.url}{src}")
        for src in ("/docs/assets/swagger-ui-bundle.js", "/docs/init.js")
    ]
    css = httpx.get(f"{server.url}/docs/assets/swagger-ui.css")

    assert page.status_code == 200
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp
    assert "://" not in page.text, "no asset from another origin"
    assert "<script>" not in page.text, "no inline script (the CSP would block it)"
    assert all(s.status_code == 200 and "javascript" in s.headers["content-type"] for s in scripts)
    assert css.status_code == 200
    assert httpx.get(f"{server.url}/redoc").status_code == 404
