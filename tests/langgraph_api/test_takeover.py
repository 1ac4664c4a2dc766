"""A run started through LangGraph's API is a run like any other: when its replica is
killed (-9), another one on the database takes it over and a client that rejoins there
with `Last-Event-ID` gets the rest, each part once (both backends)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.langgraph_api.conftest import collect
from tests.service.conftest import API_KEY, Backend, server_env, wait_until
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers

LEASE_S = 4.0
TAKEOVER_S = LEASE_S + LEASE_S / 3 + 8.0


def sdk(server: ServerProcess) -> LangGraphClient:
    return get_client(url=server.url, headers={"Authorization": f"Bearer {API_KEY}"})


@pytest.fixture
async def replicas(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path: Path,
    backend: Backend,
) -> AsyncIterator[list[ServerProcess]]:
    env = server_env(
        _llm_server, _meteo_server, tmp_path, backend=backend, AGENT_RUN_LEASE_S=str(LEASE_S)
    )
    with ExitStack() as stack:
        servers = []
        for _ in range(2):
            server = ServerProcess(env)
            stack.callback(server.stop)
            servers.append(server)
        yield servers


async def test_a_killed_replicas_langgraph_run_is_finished_by_another_and_rejoined_there(
    replicas: list[ServerProcess], llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    first, second = (sdk(server) for server in replicas)
    meteo.hang_forecast(60)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    thread_id = (await first.threads.create())["thread_id"]
    seen = []
    async for part in first.runs.stream(
        thread_id,
        "weather",
        input={"messages": [{"role": "user", "content": "北京天气"}]},
        stream_mode=["values", "updates"],
    ):
        seen.append(part)
        if part.event == "updates" and "agent" in part.data:  # the tool call is decided
            break
    run_id = seen[0].data["run_id"]
    wait_until("the tool to ask for the forecast", lambda: meteo.forecast_requests)

    replicas[0].kill()
    killed_at = time.monotonic()
    meteo.reset()
    rest = await collect(second.runs.join_stream(thread_id, run_id, last_event_id=seen[-1].id))
    took = time.monotonic() - killed_at

    assert took < TAKEOVER_S
    ids = [part.id for part in seen] + [part_id for _, _, part_id in rest]
    assert len(ids) == len(set(ids))
    assert rest[-1][0] == "end"
    final = [data for event, data, _ in rest if event == "values"][-1]
    assert final["messages"][-1]["content"] == "北京今天晴。"
    assert len(llm.requests) == 2  # the call made before the kill is not made again
    assert (await second.runs.get(thread_id, run_id))["status"] == "success"
    await second.aclose()
