"""Log lines of a real `react-agent serve`: JSON, a run's ids on each of its records, no secret."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, error, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.otlp import OtlpReceiver
from tests.service.conftest import API_KEY, OPENAI_SECRET, Api, Backend, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

TUSHARE_SECRET = "ts-token-SECRET-31415926"
TRACE_ID = re.compile(r"[0-9a-f]{32}")


def leaky_error() -> Any:
    """A 401 whose message echoes the key, as some endpoints do."""
    body = {"error": {"message": f"Incorrect API key provided: {OPENAI_SECRET}", "code": None}}
    return error(401, body)


@pytest.fixture(scope="module")
def json_server(
    otlp: OtlpReceiver,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    env = server_env(
        _llm_server,
        _meteo_server,
        tmp_path_factory.mktemp("json-logs"),
        backend=backend,
        AGENT_LOG_FORMAT="json",
        TUSHARE_TOKEN=TUSHARE_SECRET,
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_BSP_SCHEDULE_DELAY="50",
    )
    process = ServerProcess(env)
    yield process
    process.stop()


def wait_for_lines(server: ServerProcess, needle: str, count: int, within_s: float = 10.0) -> None:
    """Until the child has written `count` lines containing `needle`."""
    deadline = time.monotonic() + within_s
    while sum(needle in line for line in list(server.log)) < count:
        assert time.monotonic() < deadline, server.log_text[-3000:]
        time.sleep(0.05)  # polling the child's output, not a wait for a result


def records(server: ServerProcess) -> list[dict[str, Any]]:
    """Every line the server wrote, each parsed as JSON (a line that is not fails the test)."""
    return [json.loads(line) for line in server.log if line.strip()]


def test_json_lines_parse_and_carry_the_run_ids_and_trace_id_on_every_record_of_a_run(
    json_server: ServerProcess, otlp: OtlpReceiver, llm: ScriptedLLM, thread_id: str
) -> None:
    api = Api(json_server)
    try:
        llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天多云。"))
        ok = api.run("weather", run_body(thread_id, ("u1", "北京天气")))
        llm.script(leaky_error())
        failed = api.run("weather", run_body(thread_id, ("u1", "北京天气"), ("u2", "再查一次")))
    finally:
        api.close()

    assert ok.last["outcome"] == {"type": "success"}
    assert failed.last["code"] == "model_error"
    runs = {ok.events[0]["runId"]: "ok", failed.events[0]["runId"]: "failed"}
    otlp.wait_for(lambda spans: {s.attributes.get("agent.run.id") for s in spans} >= set(runs))
    for run in runs:
        json_server.logged(f" run={run} graph=")
    lines = records(json_server)
    assert any("Uvicorn running on" in line["message"] for line in lines)
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    of_runs = [line for line in lines if line.get("run_id") in runs]
    # Every record that speaks of the thread was made in one of its runs, and says so.
    assert [line for line in lines if thread_id in line["message"]] == [
        line for line in of_runs if thread_id in line["message"]
    ]
    assert {line["run_id"] for line in of_runs} == set(runs)
    for line in of_runs:
        assert line["thread_id"] == thread_id
        assert TRACE_ID.fullmatch(line["trace_id"])
    exported = {
        s.attributes["agent.run.id"]: s.trace_id
        for s in otlp.spans
        if "agent.run.id" in s.attributes
    }
    assert {line["run_id"]: line["trace_id"] for line in of_runs} == {r: exported[r] for r in runs}
    summaries = [line for line in of_runs if line["message"].startswith(f"run thread={thread_id} ")]
    assert sorted(runs[line["run_id"]] for line in summaries) == ["failed", "ok"]
    [crash] = [line for line in of_runs if line.get("exc_info")]
    assert crash["level"] == "ERROR" and "Traceback" in crash["exc_info"]
    assert "Incorrect API key provided: ***" in crash["exc_info"]
    for secret in (OPENAI_SECRET, API_KEY, TUSHARE_SECRET):
        assert secret not in json_server.log_text


def test_text_lines_stay_readable_and_mask_a_secret_an_endpoint_echoes(
    server: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    api = Api(server)
    try:
        llm.script(leaky_error())
        failed = api.run("weather", run_body(thread_id, ("u1", "北京天气")))
    finally:
        api.close()

    assert failed.last["code"] == "model_error"
    run_line = server.logged(f"run thread={thread_id} ")
    assert re.match(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO app\.core\.runs\.events: run ", run_line
    )
    assert "Incorrect API key provided: ***" in server.log_text
    assert OPENAI_SECRET not in server.log_text
    assert API_KEY not in server.log_text


@pytest.fixture(scope="module")
def keyless_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    env = server_env(
        _llm_server, _meteo_server, tmp_path_factory.mktemp("keyless"), backend=backend
    )
    del env["OPENAI_API_KEY"]
    process = ServerProcess(env)
    yield process
    process.stop()


def test_a_missing_model_setting_is_logged_as_one_line_once_however_many_runs_it_fails(
    keyless_server: ServerProcess, llm: ScriptedLLM
) -> None:
    api = Api(keyless_server)
    try:
        answers = [api.chat(graph="weather", message=f"第 {n} 条") for n in range(3)]
    finally:
        api.close()

    assert [a.json()["code"] for a in answers] == ["model_not_configured"] * 3
    wait_for_lines(keyless_server, "outcome=error", 3)
    mentions = [line for line in keyless_server.log if "OPENAI_API_KEY" in line]
    assert len(mentions) == 1, keyless_server.log_text
    assert "configuration error: 模型未配置：需要设置环境变量 OPENAI_API_KEY" in mentions[0]
    assert "Traceback" not in keyless_server.log_text
    assert llm.requests == []
