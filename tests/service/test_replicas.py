"""Several `react-agent serve` processes on one database act as one service.

Three replicas share the module's database (one SQLite file, or one PostgreSQL
database): any replica answers any request, a thread runs one run at a time across all
of them, a cancel reaches the run wherever it executes, and a killed replica's run is
finished by another once its lease (AGENT_RUN_LEASE_S, short here) has expired.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, hang, held, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, answer, run_body, server_env, wait_until
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# Renewed every third of it: a replica starved of the CPU that long (the suite on every
# core of a busy machine) loses its run to another, which then runs a step again.
LEASE_S = 4.0
# A takeover comes within a lease and one heartbeat (a third of it) of the kill.
TAKEOVER_S = LEASE_S + LEASE_S / 3 + 8.0
CONCURRENT = 20
TAKING_OVER = "taking over run"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replicas")


@pytest.fixture(scope="module")
def env(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, data_dir: Path, backend: Backend
) -> dict[str, str]:
    return server_env(
        _llm_server,
        _meteo_server,
        data_dir,
        backend=backend,
        AGENT_RUN_LEASE_S=str(LEASE_S),
        AGENT_MAX_QUEUED_PER_THREAD=str(CONCURRENT),  # all twenty may wait on one thread
    )


@pytest.fixture
def replicas(env: dict[str, str]) -> Iterator[list[ServerProcess]]:
    """Three replicas on the module's database, fresh for each test (one may be killed)."""
    with ExitStack() as stack:
        servers = []
        for _ in range(3):
            server = ServerProcess(env)
            stack.callback(server.stop)
            servers.append(server)
        yield servers


@pytest.fixture
def apis(replicas: list[ServerProcess]) -> Iterator[list[Api]]:
    clients = [Api(server) for server in replicas]
    yield clients
    for client in clients:
        client.close()


def _thread() -> str:
    return f"t-{time.monotonic_ns()}"


def test_a_question_asked_on_one_replica_is_answered_on_another_and_read_on_a_third(
    apis: list[Api], llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    a, b, c = apis
    thread_id = _thread()
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    asked = a.run("weather", run_body(thread_id, ("u1", "查天气")))
    [pending] = asked.last["outcome"]["interrupts"]

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    resumed = b.run("weather", run_body(thread_id, resume=[answer(pending["id"], "上海")]))
    view = c.http.get(f"/api/threads/{thread_id}").json()

    assert resumed.last["outcome"] == {"type": "success"}
    assert view["interrupts"] == []
    assert view["messages"][-1]["content"] == "上海今天晴。"
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("31.22222", "121.45806")
    ]


def _send_all(
    pool: ThreadPoolExecutor, apis: list[Api], thread_id: str, strategy: str
) -> list[Future[tuple[int, Any]]]:
    """CONCURRENT chat requests at once, spread over the replicas: (status, body) each."""

    def send(index: int) -> tuple[int, Any]:
        api = apis[index % len(apis)]
        response = api.http.post(
            "/api/chat",
            json={
                "graph": "weather",
                "threadId": thread_id,
                "runId": f"r{index:02d}",
                "message": f"消息{index:02d}",
                "multitaskStrategy": strategy,
            },
            timeout=120,
        )
        return response.status_code, response.json()

    return [pool.submit(send, index) for index in range(CONCURRENT)]


def test_twenty_runs_at_one_thread_through_three_replicas_run_one_and_refuse_the_rest(
    apis: list[Api], llm: ScriptedLLM
) -> None:
    thread_id = _thread()
    # The admitted run's model answer waits until every other request has its answer,
    # so each of them reaches admission while that run is active.
    llm.script(held(text("好的，马上查。")))

    with ThreadPoolExecutor(CONCURRENT) as pool:
        sent = _send_all(pool, apis, thread_id, "reject")
        llm.wait_for_requests(1, within_s=60)
        refused = [future.result() for future in islice(as_completed(sent, 60), CONCURRENT - 1)]
        llm.release()
        answers = [future.result(60) for future in sent]

    assert [status for status, _ in refused] == [409] * (CONCURRENT - 1)
    assert {body["code"] for _, body in refused} == {"thread_busy"}
    [(status, done)] = [reply for reply in answers if reply not in refused]
    assert status == 200
    assert done["messages"][-1]["content"] == "好的，马上查。"
    assert len(llm.requests) == 1


def test_twenty_enqueued_runs_through_three_replicas_all_run_one_after_another_in_order(
    apis: list[Api], llm: ScriptedLLM, backend: Backend, data_dir: Path
) -> None:
    thread_id = _thread()
    llm.fallback = lambda body: text("收到。")

    with ThreadPoolExecutor(CONCURRENT) as pool:
        answers = [future.result() for future in _send_all(pool, apis, thread_id, "enqueue")]

    assert [status for status, _ in answers] == [200] * CONCURRENT
    requests = llm.requests
    assert len(requests) == CONCURRENT
    # One after another: each run saw every earlier run's message and answer.
    seen = [[m["content"] for m in r["messages"] if m["role"] == "user"] for r in requests]
    assert [len(users) for users in seen] == list(range(1, CONCURRENT + 1))
    assert all(seen[k][:-1] == seen[k - 1] for k in range(1, CONCURRENT))
    # In the order the database admitted them.
    admitted = backend.query(
        data_dir, f"SELECT run_id FROM agent_runs WHERE thread_id='{thread_id}' ORDER BY rowid"
    )
    assert [f"消息{run_id[1:]}" for (run_id,) in admitted] == seen[-1]
    runs = apis[0].http.get(f"/api/threads/{thread_id}/runs").json()
    assert {run["status"] for run in runs} == {"success"}


def test_a_run_is_cancelled_through_a_replica_other_than_the_one_running_it(
    apis: list[Api], llm: ScriptedLLM
) -> None:
    a, b, c = apis
    thread_id = _thread()
    llm.script(hang(60, partial="我先"))
    body = run_body(thread_id, ("u1", "查天气"))
    started = a.run("weather", body, until=lambda event: event["type"] == "TEXT_MESSAGE_CONTENT")

    cancelled = b.http.post(f"/api/threads/{thread_id}/runs/{body['runId']}/cancel")
    rest = c.join(thread_id, body["runId"], last_event_id=started.ids[-1])

    assert cancelled.status_code == 202
    assert rest.last["type"] == "RUN_ERROR"
    assert rest.last["code"] == "cancelled"
    record = c.http.get(f"/api/threads/{thread_id}/runs/{body['runId']}").json()
    assert record["status"] == "cancelled"
    llm.reset()
    llm.script(text("好的。"))
    again = a.run("weather", run_body(thread_id, ("u2", "算了")))
    assert again.last["outcome"] == {"type": "success"}


def test_a_run_slower_than_three_leases_stays_with_its_replica(
    apis: list[Api], replicas: list[ServerProcess], llm: ScriptedLLM
) -> None:
    a, _, c = apis
    thread_id = _thread()
    llm.script(text("慢慢地回答这个问题。", chunk_size=1, delay_s=3 * LEASE_S / 10))

    done = a.run("weather", run_body(thread_id, ("u1", "慢一点")))

    assert done.last["outcome"] == {"type": "success"}
    assert len(llm.requests) == 1
    assert not any(TAKING_OVER in line for server in replicas for line in server.log)
    record = c.http.get(f"/api/threads/{thread_id}/runs").json()[0]
    assert record["status"] == "success"


def test_a_killed_replicas_run_is_finished_by_another_and_followed_through_a_third(
    apis: list[Api], replicas: list[ServerProcess], llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    a, _, c = apis
    thread_id = _thread()
    meteo.hang_forecast(60)
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    body = run_body(thread_id, ("u1", "北京天气"))
    started = a.run("weather", body, until=lambda event: event["type"] == "TOOL_CALL_END")
    wait_until("the tool to ask for the forecast", lambda: meteo.forecast_requests)

    replicas[0].kill()
    killed_at = time.monotonic()
    meteo.reset()  # the forecast answers from now on
    rest = c.join(thread_id, body["runId"], last_event_id=started.ids[-1])
    took = time.monotonic() - killed_at

    assert rest.last["type"] == "RUN_FINISHED"
    assert rest.last["outcome"] == {"type": "success"}
    assert took < TAKEOVER_S
    text_ = "".join(e["delta"] for e in rest.of("TEXT_MESSAGE_CONTENT"))
    assert text_ == "北京今天晴。"
    # The model call made before the kill is not made again: one to plan, one to answer.
    assert len(llm.requests) == 2
    takers = [s for s in replicas[1:] if any(TAKING_OVER in line for line in s.log)]
    assert len(takers) == 1
    record = c.http.get(f"/api/threads/{thread_id}/runs/{body['runId']}").json()
    assert record["status"] == "success"
