"""`GET /metrics` of a real `react-agent serve`: exact counts after scripted runs, promtool."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.doubles.llm import ScriptedLLM, error, hang, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Api, Backend, Stream, answer, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Counts = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def counts(api: Api) -> Counts:
    """Every counter and histogram count of the service (`agent_*`), by name and labels."""
    scraped = api.http.get("/metrics")
    assert scraped.status_code == 200, scraped.text
    assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
    found: Counts = {}
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            if sample.name.startswith("agent_") and sample.name.endswith(("_total", "_count")):
                found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def increments(before: Counts, after: Counts) -> dict[str, float]:
    """What changed, as `name{label=value,...}` -> increment."""
    changed: dict[str, float] = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if delta:
            name, labels = key
            changed[name + "{" + ",".join(f"{k}={v}" for k, v in labels) + "}"] = delta
    return changed


def test_a_question_an_answer_and_a_tool_error_add_exactly_the_expected_counts(
    api: Api, server: ServerProcess, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    before = counts(api)
    llm.script(tool_call("ask_input", {"message": "请问要查哪个城市？", "placeholder": "北京"}))
    asked = api.run("weather", run_body(thread_id, ("u1", "查天气")))
    [question] = asked.last["outcome"]["interrupts"]
    meteo.fail_forecast(500)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("抱歉，天气服务暂时出错了。"))

    answered = api.run("weather", run_body(thread_id, resume=[answer(question["id"], "北京")]))

    assert answered.last["outcome"] == {"type": "success"}
    results = {e["toolCallId"]: e["metadata"]["outcome"] for e in answered.of("TOOL_CALL_RESULT")}
    assert sorted(results.values()) == ["error", "ok"]
    assert increments(before, counts(api)) == {
        "agent_runs_started_total{graph=weather}": 2,
        "agent_runs_finished_total{graph=weather,outcome=interrupted}": 1,
        "agent_runs_finished_total{graph=weather,outcome=success}": 1,
        "agent_run_duration_seconds_count{graph=weather,outcome=interrupted}": 1,
        "agent_run_duration_seconds_count{graph=weather,outcome=success}": 1,
        "agent_run_first_token_seconds_count{graph=weather}": 1,
        "agent_model_calls_total{graph=weather,outcome=ok}": 3,
        "agent_model_call_duration_seconds_count{graph=weather,outcome=ok}": 3,
        # Streamed calls ask for usage too; the double reports 10 prompt tokens a call.
        "agent_model_tokens_total{direction=input,graph=weather}": 30,
        "agent_model_tokens_total{direction=output,graph=weather}": 37,
        "agent_tool_calls_total{graph=weather,outcome=ok,tool=ask_input}": 1,
        "agent_tool_calls_total{graph=weather,outcome=error,tool=get_weather}": 1,
        "agent_tool_call_duration_seconds_count{graph=weather,outcome=ok,tool=ask_input}": 1,
        "agent_tool_call_duration_seconds_count{graph=weather,outcome=error,tool=get_weather}": 1,
        "agent_interrupts_raised_total{graph=weather,kind=input}": 1,
        "agent_interrupts_resolved_total{graph=weather,outcome=answered}": 1,
        "agent_interrupt_answer_seconds_count{graph=weather,outcome=answered}": 1,
        "agent_http_requests_total{method=POST,route=/api/agents/{graph_id},status=200}": 2,
        "agent_http_requests_total{method=GET,route=/metrics,status=200}": 1,
    }
    assert "Error in CallWatcher" not in server.log_text


def test_tokens_are_counted_when_the_endpoint_reports_them(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    before = counts(api)
    llm.script(text("你好，今天想查哪里的天气？"))

    chatted = api.chat(graph="weather", threadId=thread_id, message="你好")

    assert chatted.status_code == 200
    # The double reports 10 prompt tokens and a completion token per two characters.
    changed = increments(before, counts(api))
    assert changed["agent_model_tokens_total{direction=input,graph=weather}"] == 10
    assert changed["agent_model_tokens_total{direction=output,graph=weather}"] == 6
    assert changed["agent_http_requests_total{method=POST,route=/api/chat,status=200}"] == 1


def test_a_refused_call_a_failed_model_and_the_labels_stay_bounded(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    before = counts(api)
    llm.script(
        tool_call("no_such_tool", {"x": "用户写的任何文字"}),
        text("没有这个工具。"),
    )

    done = api.run("weather", run_body(thread_id, ("u1", "随便问问")))

    assert done.last["outcome"] == {"type": "success"}
    changed = increments(before, counts(api))
    assert changed["agent_tool_calls_total{graph=weather,outcome=unknown_tool,tool=_unknown}"] == 1
    assert not any("no_such_tool" in key or thread_id in key for key in changed)
    assert not any(key.startswith("agent_tool_call_duration") for key in changed)


def test_the_runs_in_progress_and_the_sse_clients_are_gauges_that_return_to_zero(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好。"))
    api.run("weather", run_body(thread_id, ("u1", "你好")))

    scraped = api.http.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(scraped)}
    assert [s.value for s in families["agent_sse_clients"].samples] == [0]
    assert [s.value for s in families["agent_runs_active"].samples] == []


Gauges = dict[str, dict[tuple[tuple[str, str], ...], float]]


def gauges(api: Api) -> Gauges:
    """`agent_runs_active` and `agent_sse_clients` as scraped now."""
    found: Gauges = {"agent_runs_active": {}, "agent_sse_clients": {}}
    for family in text_string_to_metric_families(api.http.get("/metrics").text):
        if family.name in found:
            for sample in family.samples:
                found[family.name][tuple(sorted(sample.labels.items()))] = sample.value
    return found


def poll(read: Callable[[], Any], done: Callable[[Any], bool], within_s: float = 10.0) -> Any:
    """Read until `done(value)`; the server changes the state, this only looks at it."""
    deadline = time.monotonic() + within_s
    while not done(value := read()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never reached: {value}")
        time.sleep(0.02)  # polling interval, not a wait for a result
    return value


RUNNING = (("graph", "weather"), ("status", "running"))
QUEUED = (("graph", "weather"), ("status", "queued"))


def test_a_running_and_a_queued_run_and_their_streams_show_in_the_gauges_until_they_end(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(hang(30, partial="我想"), text("好的。"))
    first = run_body(thread_id, ("u1", "第一"))
    api.run("weather", first, until=lambda e: e["type"] == "TEXT_MESSAGE_CONTENT")
    second = run_body(thread_id, ("u1", "第一"), ("u2", "第二"), multitaskStrategy="enqueue")
    followed: list[Stream] = []
    follower = Api(api.server)
    reader = threading.Thread(target=lambda: followed.append(follower.run("weather", second)))
    reader.start()
    try:
        # The queued run shows once admitted, its stream a moment later: wait for both.
        both = poll(
            lambda: gauges(api),
            lambda g: (
                g["agent_runs_active"].get(QUEUED) == 1 and g["agent_sse_clients"].get(()) == 1
            ),
        )
        cancelled = api.http.post(f"/api/threads/{thread_id}/runs/{first['runId']}/cancel")
        reader.join(timeout=30)
    finally:
        follower.close()

    assert both["agent_runs_active"] == {RUNNING: 1, QUEUED: 1}
    assert both["agent_sse_clients"] == {(): 1}
    assert cancelled.status_code == 202
    assert followed[0].last["outcome"] == {"type": "success"}
    after = gauges(api)
    assert after["agent_runs_active"] == {}
    assert after["agent_sse_clients"] == {(): 0}


def test_metrics_are_behind_the_api_key(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/metrics").status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert httpx.get(f"{server.url}/metrics", headers=wrong).status_code == 401
    right = {"Authorization": f"Bearer {API_KEY}"}
    assert httpx.get(f"{server.url}/metrics", headers=right).status_code == 200


def test_promtool_accepts_what_the_server_exposes(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make test` installs Debian's prometheus package"
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京晴。"))
    api.run("weather", run_body(thread_id, ("u1", "北京天气")))
    exposed = api.http.get("/metrics").text

    checked = subprocess.run(
        [promtool, "check", "metrics"], input=exposed, capture_output=True, text=True, timeout=30
    )

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "agent_tool_calls_total" in exposed


@pytest.fixture(scope="module")
def unmeasured(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("nometrics")
    env = server_env(_llm_server, _meteo_server, data_dir, backend=backend, AGENT_METRICS="false")
    process = ServerProcess(env)
    yield process
    process.stop()


def test_with_metrics_off_there_is_no_metrics_endpoint_and_runs_work(
    unmeasured: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    api = Api(unmeasured)
    try:
        llm.script(text("你好。"))
        done = api.run("weather", run_body(thread_id, ("u1", "你好")))
        missing = api.http.get("/metrics")
    finally:
        api.close()

    assert done.last["outcome"] == {"type": "success"}
    assert (missing.status_code, missing.json()["code"]) == (404, "metrics_off")


@pytest.fixture(scope="module")
def retrying(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    data_dir = tmp_path_factory.mktemp("retrying")
    env = server_env(_llm_server, _meteo_server, data_dir, backend=backend, OPENAI_MAX_RETRIES="1")
    process = ServerProcess(env)
    yield process
    process.stop()


def test_a_model_call_ok_after_a_retry_counts_as_retried_and_a_failed_one_by_its_status(
    retrying: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    api = Api(retrying)
    try:
        before = counts(api)
        llm.script(error(503), text("好的。"))
        recovered = api.run("weather", run_body(thread_id, ("u1", "你好")))
        llm.script(error(500), error(500))
        failed = api.run("weather", run_body(thread_id, ("u1", "你好"), ("u2", "再来")))
        changed = increments(before, counts(api))
    finally:
        api.close()

    assert recovered.last["outcome"] == {"type": "success"}
    assert failed.last["code"] == "model_error"
    model = {k: v for k, v in changed.items() if k.startswith("agent_model_calls_total")}
    assert model == {
        "agent_model_calls_total{graph=weather,outcome=retried}": 1,
        "agent_model_calls_total{graph=weather,outcome=http_500}": 1,
    }
    assert changed["agent_run_errors_total{code=model_error,graph=weather}"] == 1
    assert changed["agent_runs_finished_total{graph=weather,outcome=error}"] == 1
