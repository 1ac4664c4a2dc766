"""Queued runs are bounded: `AGENT_MAX_QUEUED_PER_THREAD` behind a thread's active run,
`AGENT_MAX_QUEUED` in one process; beyond either, 429 `queue_full` with `Retry-After`,
and nothing of the refused run is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, held, text
from tests.service.conftest import Api, Stream, run_body, wait_until

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

PER_THREAD = 2
PER_PROCESS = 3
DEADLINE_S = 60


SERVER_ENV = {
    "AGENT_MAX_QUEUED_PER_THREAD": str(PER_THREAD),
    "AGENT_MAX_QUEUED": str(PER_PROCESS),
}


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=8) as pool:
        yield pool


def status_of(api: Api, thread_id: str, run_id: str) -> str | None:
    """The run's status once the database has admitted it: the thread's run list is read
    from the store (a run's own record is shown from memory while it is being admitted,
    and a run admitted meanwhile would queue ahead of it)."""
    listed = api.http.get(f"/api/threads/{thread_id}/runs")
    if listed.status_code == 404:  # the thread's first run is not admitted yet
        return None
    return next((str(run["status"]) for run in listed.json() if run["runId"] == run_id), None)


def start(
    api: Api, background: ThreadPoolExecutor, thread_id: str, n: int, status: str
) -> tuple[dict[str, Any], Future[Stream]]:
    """Run `n` on the thread in the background (enqueued), once it is `status`."""
    body = run_body(thread_id, (f"u{n}", f"问题{n}"), multitaskStrategy="enqueue")
    future = background.submit(api.run, "weather", body)
    wait_until(f"run {n} {status}", lambda: status_of(api, thread_id, body["runId"]) == status)
    return body, future


def refused(api: Api, thread_id: str) -> tuple[httpx.Response, str]:
    body = run_body(thread_id, ("u-over", "再来一个"), multitaskStrategy="enqueue")
    response = api.http.post("/api/agents/weather", json=body)
    return response, body["runId"]


def test_a_thread_takes_per_thread_queued_runs_and_refuses_the_next_with_retry_after(
    api: Api, llm: ScriptedLLM, thread_id: str, background: ThreadPoolExecutor
) -> None:
    llm.script(held(text("第0个回答。")), *[text(f"第{n}个回答。") for n in (1, 2)])
    runs = [start(api, background, thread_id, 0, "running")]
    runs += [start(api, background, thread_id, n, "queued") for n in (1, 2)]

    response, run_id = refused(api, thread_id)

    assert response.status_code == 429, response.text
    assert response.json()["code"] == "queue_full"
    assert "AGENT_MAX_QUEUED_PER_THREAD" in response.json()["detail"]
    assert int(response.headers["retry-after"]) > 0
    assert status_of(api, thread_id, run_id) is None  # nothing recorded
    llm.wait_for_requests(1)  # the held reply is being waited for: release reaches it
    llm.release()
    streams = [future.result(DEADLINE_S) for _, future in runs]
    assert [s.last["type"] for s in streams] == ["RUN_FINISHED"] * 3
    # The queue has room again once its runs have ended.
    llm.script(text("好了。"))
    again = api.chat(
        graph="weather", threadId=thread_id, message="还在吗", multitaskStrategy="enqueue"
    )
    assert again.status_code == 200, again.text


def test_the_process_refuses_a_run_to_queue_once_per_process_runs_wait_over_its_threads(
    api: Api, llm: ScriptedLLM, background: ThreadPoolExecutor
) -> None:
    first, second = (f"t-queue-{n}-{id(api)}" for n in (1, 2))
    llm.script(held(text("甲。")), held(text("乙。")), *[text("好。")] * 3)
    runs = [start(api, background, first, 0, "running")]
    runs += [start(api, background, first, n, "queued") for n in (1, 2)]
    runs += [start(api, background, second, 0, "running")]
    runs += [start(api, background, second, 1, "queued")]  # three waiting in all

    response, run_id = refused(api, second)  # its thread has room: the process has none

    assert response.status_code == 429, response.text
    assert response.json()["code"] == "queue_full"
    assert "AGENT_MAX_QUEUED" in response.json()["detail"]
    assert "PER_THREAD" not in response.json()["detail"]
    assert status_of(api, second, run_id) is None
    llm.wait_for_requests(2)
    llm.release()
    ends = [future.result(DEADLINE_S).last for _, future in runs]
    assert [end["type"] for end in ends] == ["RUN_FINISHED"] * 5, ends
