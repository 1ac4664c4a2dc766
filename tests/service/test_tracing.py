"""OpenTelemetry traces of a real `react-agent serve`, exported to an OTLP/HTTP receiver double."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.doubles.llm import ScriptedLLM, react, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.otlp import OtlpReceiver, ReceivedSpan
from tests.service.conftest import API_KEY, OPENAI_SECRET, Api, Backend, run_body, server_env
from tests.support.processes import ROOT, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

SERVER_KIND, CLIENT_KIND = 2, 3  # OTLP span kinds
STATUS_ERROR = 2
EXPORT_DELAY_MS = "50"  # the batch processor's delay: spans arrive soon after a run


@pytest.fixture(scope="module")
def traced(
    otlp: OtlpReceiver,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    env = server_env(
        _llm_server,
        _meteo_server,
        tmp_path_factory.mktemp("traced"),
        backend=backend,
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_BSP_SCHEDULE_DELAY=EXPORT_DELAY_MS,
        OTEL_SERVICE_NAME="agent-under-test",
    )
    process = ServerProcess(env)
    yield process
    process.stop()


@pytest.fixture
def api(traced: ServerProcess) -> Iterator[Api]:
    client = Api(traced)
    yield client
    client.close()


def of_run(spans: list[ReceivedSpan], run_id: str) -> list[ReceivedSpan]:
    """The spans of the trace whose run span is `run_id`'s."""
    runs = [s for s in spans if s.attributes.get("agent.run.id") == run_id]
    return [s for s in spans if runs and s.trace_id == runs[0].trace_id]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_id == parent.span_id]


def method(span: ReceivedSpan) -> str | None:
    """An HTTP client span's method (old or new semantic conventions)."""
    found = span.attributes.get("http.request.method", span.attributes.get("http.method"))
    return None if found is None else str(found)


def test_one_run_is_a_span_tree_from_the_request_to_the_model_tool_and_http_calls(
    api: Api, otlp: OtlpReceiver, traced: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天多云。"))
    body = run_body(thread_id, ("u1", "北京今天天气怎么样"))

    stream = api.run("weather", body)

    assert stream.last["outcome"] == {"type": "success"}
    spans = otlp.wait_for(
        lambda got: (
            any(s.kind == SERVER_KIND for s in of_run(got, body["runId"]))
            and sum(s.name.startswith("chat ") for s in of_run(got, body["runId"])) == 2
        )
    )
    trace = of_run(spans, body["runId"])
    [request] = [s for s in trace if s.kind == SERVER_KIND]
    [run] = [s for s in trace if s.name == "invoke_agent weather"]
    assert request.name == "POST /api/agents/{graph_id}"
    assert request.attributes["enduser.id"] == "admin"  # AGENT_API_KEY's user, never a key
    assert run.parent_id == request.span_id
    assert run.attributes == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather",
        "gen_ai.conversation.id": thread_id,
        "agent.thread.id": thread_id,
        "agent.run.id": body["runId"],
        "agent.graph": "weather",
        "agent.run.outcome": "success",
    }
    assert run.resource["service.name"] == "agent-under-test"

    under_run = children(trace, run)
    models = [s for s in under_run if s.name == "chat test-model"]
    [tool] = [s for s in under_run if s.name == "execute_tool get_weather"]
    assert len(models) == 2 and len(under_run) == 3
    for model, reason in zip(models, ["tool_calls", "stop"], strict=True):
        assert model.kind == CLIENT_KIND
        assert model.attributes["gen_ai.operation.name"] == "chat"
        assert model.attributes["gen_ai.provider.name"] == "openai"
        assert model.attributes["gen_ai.request.model"] == "test-model"
        assert model.attributes["gen_ai.response.model"] == "test-model"
        assert model.attributes["gen_ai.response.finish_reasons"] == [reason]
        assert model.attributes["agent.model.retries"] == 0
        # The model's HTTP request is the model call's child.
        [post] = children(trace, model)
        assert post.kind == CLIENT_KIND and method(post) == "POST"
    [call] = stream.of("TOOL_CALL_START")
    assert tool.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": call["toolCallId"],
        "agent.tool.outcome": "ok",
    }
    # Open-Meteo's geocoding and forecast requests are the tool call's children.
    fetched = children(trace, tool)
    assert [method(s) for s in fetched] == ["GET", "GET"]
    assert all(s.kind == CLIENT_KIND for s in fetched)
    # No prompt, answer or secret in any attribute.
    values = repr([(s.attributes, s.resource) for s in trace])
    for secret in (OPENAI_SECRET, API_KEY, "北京今天天气怎么样", "北京今天多云"):
        assert secret not in values
    # The trace id is in the run's log line.
    run_line = traced.logged(f"run thread={thread_id} ")
    assert run_line.rstrip().endswith(f"trace={run.trace_id}")
    assert "Failed to detach context" not in traced.log_text
    assert "Error in CallWatcher" not in traced.log_text


def test_a_json_run_reports_token_usage_and_a_failed_tool_its_outcome(
    api: Api, otlp: OtlpReceiver, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    meteo.fail_forecast(500)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("天气服务出错了。"))

    chatted = api.chat(graph="weather", threadId=thread_id, runId="r-usage", message="北京天气")

    assert chatted.status_code == 200
    spans = otlp.wait_for(
        lambda got: (
            sum(s.name.startswith("chat ") for s in of_run(got, "r-usage")) == 2
            and any(s.name == "invoke_agent weather" for s in of_run(got, "r-usage"))
        )
    )
    trace = of_run(spans, "r-usage")
    models = [s for s in trace if s.name == "chat test-model"]
    # The double reports 10 prompt tokens and a completion token per two characters.
    assert [m.attributes["gen_ai.usage.input_tokens"] for m in models] == [10, 10]
    assert [m.attributes["gen_ai.usage.output_tokens"] for m in models] == [9, 4]
    [tool] = [s for s in trace if s.name == "execute_tool get_weather"]
    assert tool.attributes["agent.tool.outcome"] == "error"
    assert tool.attributes["error.type"] == "error"
    assert tool.status_code == STATUS_ERROR


@pytest.fixture(scope="module")
def traced_text_mode(
    otlp: OtlpReceiver,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    env = server_env(
        _llm_server,
        _meteo_server,
        tmp_path_factory.mktemp("traced-text"),
        backend=backend,
        AGENT_TOOL_CALLING="text",
        OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        OTEL_BSP_SCHEDULE_DELAY=EXPORT_DELAY_MS,
    )
    process = ServerProcess(env)
    yield process
    process.stop()


@pytest.mark.parametrize("kind", ["agui", "json"])
def test_a_text_mode_model_call_is_one_chat_span_though_it_wraps_the_configured_model(
    traced_text_mode: ServerProcess,
    otlp: OtlpReceiver,
    llm: ScriptedLLM,
    thread_id: str,
    kind: str,
) -> None:
    # The text-mode model calls the configured model as its child run; what the endpoint
    # served is still one call: one span, its usage, its HTTP request below it.
    llm.script(
        react("需要查询北京的天气。", action="get_weather", args={"location": "北京"}),
        react("已经拿到结果。", answer="北京今天多云。"),
    )
    run_id = f"r-text-{kind}"
    api = Api(traced_text_mode)
    try:
        if kind == "agui":
            body = run_body(thread_id, ("u1", "北京今天天气怎么样"))
            body["runId"] = run_id
            assert api.run("weather", body).last["outcome"] == {"type": "success"}
        else:
            chat = {"graph": "weather", "threadId": thread_id, "runId": run_id}
            assert api.chat(**chat, message="北京今天天气怎么样").status_code == 200
    finally:
        api.close()

    spans = otlp.wait_for(
        lambda got: (
            any(s.kind == SERVER_KIND for s in of_run(got, run_id))
            and any(s.name == "invoke_agent weather" for s in of_run(got, run_id))
        )
    )
    trace = of_run(spans, run_id)
    [run] = [s for s in trace if s.name == "invoke_agent weather"]
    models = [s for s in trace if s.name.startswith("chat ")]
    assert len(llm.requests) == 2
    assert [m.name for m in models] == ["chat test-model", "chat test-model"]
    for model in models:
        assert model.parent_id == run.span_id
        [post] = children(trace, model)
        assert post.kind == CLIENT_KIND and method(post) == "POST"
    if kind == "json":  # a call that did not stream reports the endpoint's usage
        assert [m.attributes["gen_ai.usage.input_tokens"] for m in models] == [10, 10]


def test_without_an_otlp_endpoint_no_exporter_is_made_nor_its_code_loaded(
    server: ServerProcess, thread_id: str, llm: ScriptedLLM
) -> None:
    probe = (
        "import sys\n"
        "from app.http.server import create_app\n"
        "from app.settings import Settings\n"
        "app = create_app(Settings())\n"
        "loaded = sorted(m for m in sys.modules if m.startswith("
        "('opentelemetry.exporter', 'opentelemetry.instrumentation')))\n"
        "print('loaded:', loaded)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT)

    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded: []"
    # The suite's plain server (no OTEL_* variables): no exporter, no trace id in its lines.
    api = Api(server)
    try:
        llm.script(text("你好。"))
        api.run("weather", run_body(thread_id, ("u1", "你好")))
    finally:
        api.close()
    run_line = server.logged(f"run thread={thread_id} ")
    assert "trace=" not in run_line
    assert "tracing:" not in server.log_text
