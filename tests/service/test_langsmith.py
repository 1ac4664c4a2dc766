"""LangSmith tracing through LangChain's own integration: it uploads runs, changes nothing else."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.doubles.langsmith import LangSmithSink
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, run_body, server_env
from tests.support.processes import ServerProcess, refused_port

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

LANGSMITH_KEY = "lsv2-test-SECRET-2718281828"
ID_FIELDS = ("messageId", "toolCallId", "parentMessageId")
# What differs between two runs of the same script: ids the double and LangChain draw.
DRAWN = re.compile(r"call_scripted\d+_\d+|chatcmpl-scripted\d+|[0-9a-f]{8}-[0-9a-f-]{27}")


@pytest.fixture(scope="module")
def sink() -> Iterator[LangSmithSink]:
    with LangSmithSink() as served:
        yield served


def _serve(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    factory: pytest.TempPathFactory,
    backend: Backend,
    **extra: str,
) -> ServerProcess:
    data_dir = factory.mktemp("langsmith")
    return ServerProcess(server_env(llm, meteo, data_dir, backend=backend, **extra))


@pytest.fixture(scope="module")
def servers(
    sink: LangSmithSink,
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[dict[str, ServerProcess]]:
    traced = {"LANGSMITH_TRACING": "true", "LANGSMITH_API_KEY": LANGSMITH_KEY}
    started: dict[str, ServerProcess] = {}
    with refused_port() as port:
        unreachable = f"http://127.0.0.1:{port}"
        try:
            serve = (_llm_server, _meteo_server, tmp_path_factory, backend)
            started["off"] = _serve(*serve)
            started["to a sink"] = _serve(*serve, LANGSMITH_ENDPOINT=sink.url, **traced)
            started["to nowhere"] = _serve(*serve, LANGSMITH_ENDPOINT=unreachable, **traced)
            yield started
        finally:
            for process in started.values():
                process.stop()


def scripted_run(server: ServerProcess, llm: ScriptedLLM, thread_id: str) -> dict[str, Any]:
    """The same weather run; what the client and the model saw, drawn ids made neutral."""
    llm.reset()
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天多云。"))
    api = Api(server)
    try:
        body = run_body(thread_id, ("u1", "北京今天天气怎么样"))
        body["runId"] = "run-same"
        stream = api.run("weather", body)
        view = api.http.get(f"/api/threads/{thread_id}").json()
    finally:
        api.close()
    return {
        "events": neutral(joined_deltas(stream.events)),
        "thread": neutral(view),
        "model saw": neutral(llm.requests),
    }


# Streamed pieces and the field naming what they belong to: where one piece ends and the
# next begins follows the run log's write timing (docs/api.md), not what was streamed.
DELTAS = {
    "TEXT_MESSAGE_CONTENT": "messageId",
    "REASONING_MESSAGE_CONTENT": "messageId",
    "TOOL_CALL_ARGS": "toolCallId",
}


def joined_deltas(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`events` with each run of consecutive pieces of one stream joined into one."""
    out: list[dict[str, Any]] = []
    for event in events:
        key = DELTAS.get(event["type"])
        last = out[-1] if out else None
        if key and last and last["type"] == event["type"] and last[key] == event[key]:
            out[-1] = {**last, "delta": last["delta"] + event["delta"]}
        else:
            out.append(event)
    return out


def neutral(data: Any) -> Any:
    """`data` with each drawn id replaced by its order of appearance."""
    seen: dict[str, str] = {}

    def name(value: str) -> str:
        return seen.setdefault(value, f"<id{len(seen)}>")

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: name(v) if k in ID_FIELDS and v else walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, str):
            return DRAWN.sub(lambda match: name(match.group()), node)
        return node

    return walk(data)


def test_langsmith_tracing_uploads_runs_and_changes_nothing_a_client_or_the_model_sees(
    servers: dict[str, ServerProcess], sink: LangSmithSink, llm: ScriptedLLM, thread_id: str
) -> None:
    seen = {name: scripted_run(server, llm, thread_id) for name, server in servers.items()}

    assert seen["off"]["events"][-1]["outcome"] == {"type": "success"}
    assert seen["to a sink"] == seen["off"]
    assert seen["to nowhere"] == seen["off"]
    assert sink.wait_for_runs()
    assert not [p for _, p in sink.requests if not p.startswith(("/runs", "/info"))]
    for server in servers.values():
        assert LANGSMITH_KEY not in server.log_text
