"""Runs waiting for their thread's turn wait on its ending, not on the database.

Only the head of each thread's queue in a process re-checks the database, woken when a
run of the thread ends: by this process's own ends, by LISTEN/NOTIFY from any process on
PostgreSQL, by a slow poll across processes on SQLite. So many waiting runs cost the
database next to nothing, the next run starts as soon as the one ahead ends (in this
process or another), and a head whose process is killed still lets the queue go once
its run is taken over (its lease expired).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from app.core.storage.sqlite.runs import RECHECK_S as SQLITE_RECHECK_S
from tests.doubles.llm import ScriptedLLM, hang, held, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, Stream, run_body, server_env, wait_until
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

WAITING = 30
# Each waiting run polled every 0.1 s made ten transactions a second; waiting on the
# ending, a process's background work (cancel watch, heartbeat) and one slow re-check
# per thread remain, whatever the number of waiting runs.
MAX_XACTS_PER_S = 10.0
MEASURE_S = 6.0
# A backend that goes idle keeps its transaction counts from pg_stat_database for up to
# 10 s (PostgreSQL 15+'s PGSTAT_IDLE_INTERVAL): the admissions' burst must be counted
# before the window opens, or its late counts land in the window.
STATS_FLUSH_S = 11.0
# From the end of the run ahead (its RUN_FINISHED at the client) to the next run's first
# event: a wake-up, a claim, a prepared run, one log write. Well under the slow poll.
PROMPT_S = 0.5
LEASE_S = 4.0
# A killed head is taken over within a lease and a heartbeat, and then runs to its end.
TAKEOVER_S = LEASE_S + LEASE_S / 3 + 10.0
DEADLINE_S = 120.0


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=WAITING + 2) as pool:
        yield pool


def _env(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path, backend: Backend
) -> dict[str, str]:
    return server_env(
        llm,
        meteo,
        data_dir,
        backend=backend,
        AGENT_RUN_LEASE_S=str(LEASE_S),
        AGENT_MAX_QUEUED_PER_THREAD=str(WAITING + 2),
    )


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wakeup")


@pytest.fixture(scope="module")
def pair(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, shared_dir: Path, backend: Backend
) -> Iterator[list[ServerProcess]]:
    """Two servers on one database (the module's backend), each past its first run (which
    does once-only work: the time measured is the hand-over's)."""
    env = _env(_llm_server, _meteo_server, shared_dir, backend)
    with ExitStack() as stack:
        servers = []
        for _ in range(2):
            server = ServerProcess(env)
            stack.callback(server.stop)
            servers.append(server)
            _llm_server.script(text("在。"))
            api = Api(server)
            warm = api.run("weather", run_body(_thread(), ("u0", "在吗")))
            api.close()
            assert warm.last["type"] == "RUN_FINISHED", warm.events
        _llm_server.reset()
        yield servers


@pytest.fixture
def apis(pair: list[ServerProcess]) -> Iterator[list[Api]]:
    clients = [Api(server) for server in pair]
    yield clients
    for client in clients:
        client.close()


def _thread() -> str:
    return f"t-{time.monotonic_ns()}"


def status_of(api: Api, thread_id: str, run_id: str) -> str | None:
    response = api.http.get(f"/api/threads/{thread_id}/runs/{run_id}")
    return None if response.status_code == 404 else str(response.json()["status"])


def recorded(backend: Backend, data_dir: Path) -> Callable[[str], str | None]:
    """A run's status as the database has it: the order runs queue in is the database's
    (the process holding a run may show it queued before the database has admitted it)."""

    def status(run_id: str) -> str | None:
        rows = backend.query(data_dir, f"SELECT status FROM agent_runs WHERE run_id='{run_id}'")
        return str(rows[0][0]) if rows else None

    return status


Arrivals = list[tuple[str, float]]


@dataclass
class Started:
    """A run started in the background: its id, its stream, when each event arrived."""

    run_id: str
    stream: Future[Stream]
    arrivals: Arrivals


def start(
    api: Api,
    pool: ThreadPoolExecutor,
    thread_id: str,
    n: int,
    status: str,
    stored: Callable[[str], str | None],
) -> Started:
    """Run `n` on the thread in the background (enqueued), once `stored` says `status`."""
    body = run_body(thread_id, (f"u{n}", f"问题{n}"), multitaskStrategy="enqueue")
    arrivals: Arrivals = []

    def note(event: dict[str, Any]) -> bool:
        arrivals.append((event["type"], time.monotonic()))
        return False  # read on to the end

    future = pool.submit(api.run, "weather", body, until=note)
    wait_until(f"run {n} {status}", lambda: stored(body["runId"]) == status)
    return Started(body["runId"], future, arrivals)


def gap(ahead: Arrivals, after: Arrivals) -> float:
    """From the end of the run ahead to the first event of the one after it."""
    [ended] = [at for kind, at in ahead if kind == "RUN_FINISHED"]
    return after[0][1] - ended


def transactions(admin_url: str, dbname: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (dbname,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_thirty_runs_waiting_on_one_thread_cost_postgres_a_few_transactions_a_second(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    postgres_admin_url: str,
    tmp_path: Path,
    background: ThreadPoolExecutor,
) -> None:
    with ExitStack() as stack:
        backend = Backend("postgres", postgres_admin_url, stack)
        env = _env(llm, meteo, tmp_path, backend)
        dbname = conninfo_to_dict(backend.agent_db(tmp_path))["dbname"]
        server = ServerProcess(env)
        stack.callback(server.stop)
        api = Api(server)
        stack.callback(api.close)
        thread_id, stored = _thread(), recorded(backend, tmp_path)
        llm.script(held(text("先答这个。"), seconds=DEADLINE_S))
        llm.fallback = lambda body: text("好。")
        runs = [start(api, background, thread_id, 0, "running", stored)]
        runs += [
            start(api, background, thread_id, n, "queued", stored) for n in range(1, WAITING + 1)
        ]
        llm.wait_for_requests(1)
        time.sleep(STATS_FLUSH_S)  # the admissions' counts in, before the window opens

        before, began = transactions(postgres_admin_url, dbname), time.monotonic()
        time.sleep(MEASURE_S)
        after, ended = transactions(postgres_admin_url, dbname), time.monotonic()
        rate = (after - before) / (ended - began)

        llm.release()
        ends = [run.stream.result(DEADLINE_S).last["type"] for run in runs]
        assert rate < MAX_XACTS_PER_S, f"{rate:.1f} transactions/s while {WAITING} runs waited"
        assert ends == ["RUN_FINISHED"] * (WAITING + 1)


def test_a_queued_run_starts_promptly_after_the_run_ahead_ends_in_its_process_or_another(
    apis: list[Api],
    llm: ScriptedLLM,
    backend: Backend,
    shared_dir: Path,
    background: ThreadPoolExecutor,
) -> None:
    a, b = apis
    thread_id, stored = _thread(), recorded(backend, shared_dir)
    llm.script(held(text("头。")), text("一。"), text("二。"), text("三。"), text("四。"))
    head = start(a, background, thread_id, 0, "running", stored)
    first = start(a, background, thread_id, 1, "queued", stored)
    second = start(a, background, thread_id, 2, "queued", stored)
    elsewhere = start(b, background, thread_id, 3, "queued", stored)
    back = start(a, background, thread_id, 4, "queued", stored)
    runs = [head, first, second, elsewhere, back]
    llm.wait_for_requests(1)

    llm.release()
    ends = [run.stream.result(DEADLINE_S).last for run in runs]

    assert [end["type"] for end in ends] == ["RUN_FINISHED"] * 5, ends
    arrivals = [run.arrivals for run in runs]
    same = [gap(arrivals[0], arrivals[1]), gap(arrivals[1], arrivals[2])]
    across = [gap(arrivals[2], arrivals[3]), gap(arrivals[3], arrivals[4])]
    assert max(same) < PROMPT_S, same
    # Across processes on one SQLite file nothing signals: the head re-checks slowly.
    limit = PROMPT_S if backend.name == "postgres" else SQLITE_RECHECK_S + PROMPT_S
    assert max(across) < limit, across


def test_queued_runs_still_start_after_the_process_of_the_run_ahead_is_killed(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    backend: Backend,
    tmp_path: Path,
    background: ThreadPoolExecutor,
) -> None:
    env = _env(llm, meteo, tmp_path, backend)
    with ExitStack() as stack:
        servers = []
        for _ in range(3):
            server = ServerProcess(env)
            stack.callback(server.stop)
            servers.append(server)
        a, b, c = apis = [Api(server) for server in servers]
        for api in apis:
            stack.callback(api.close)
        thread_id, stored = _thread(), recorded(backend, tmp_path)
        llm.script(hang(DEADLINE_S, partial="我先"))
        head = start(a, background, thread_id, 0, "running", stored)
        llm.wait_for_requests(1)
        # Whichever replica takes the head over, one queued run waits in the other.
        queued = [start(b, background, thread_id, 1, "queued", stored)]
        queued += [start(c, background, thread_id, 2, "queued", stored)]

        servers[0].kill()
        killed_at = time.monotonic()
        llm.reset()  # the hang ends; the taken-over head asks again
        llm.fallback = lambda body: text("好。")
        ends = [run.stream.result(DEADLINE_S).last for run in queued]
        took = time.monotonic() - killed_at

        assert [end["type"] for end in ends] == ["RUN_FINISHED"] * 2, ends
        assert took < TAKEOVER_S + SQLITE_RECHECK_S, took
        assert status_of(b, thread_id, head.run_id) == "success"
