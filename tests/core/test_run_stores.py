"""The run store's contract (`app.core.storage.runs.RunStore`) on both backends, through its public
interface: each test runs on a fresh SQLite file (`[sqlite]`) and on a fresh PostgreSQL
database (`[postgres]`), opened the way the service opens them (`open_storage`)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.core.storage.backends import open_storage
from app.core.storage.runs import (
    Admission,
    KeptMessage,
    MultitaskStrategy,
    RunEnd,
    RunError,
    RunRecord,
    RunStatus,
    RunStore,
    StoredRun,
)
from app.settings import Settings

T0 = 1_800_000_000.0  # a fixed start time, so orders and cut-offs are exact
HOUR = 3600.0
DEADLINE_S = 10.0
POLL_S = 0.01
Opener = Callable[[], AbstractAsyncContextManager[RunStore]]


def execute(agent_db: str, statement: str) -> None:
    """Run one SQL statement on the database behind `agent_db`, as another client would."""
    if agent_db.startswith("postgresql://"):
        with psycopg.connect(agent_db, autocommit=True) as conn:
            conn.execute(statement.encode())
    else:
        with sqlite3.connect(agent_db) as conn:
            conn.execute(statement)


@pytest.fixture(params=["sqlite", "postgres"])
def agent_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "agent.sqlite")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def opener(agent_db: str) -> Opener:
    """Opens the run store on the test's database (again, for a restart)."""

    @asynccontextmanager
    async def runs() -> AsyncIterator[RunStore]:
        async with open_storage(Settings(agent_db=agent_db)) as storage:
            yield storage.runs

    return runs


@pytest.fixture
async def store(opener: Opener) -> AsyncIterator[RunStore]:
    async with opener() as runs:
        yield runs


def stored(
    thread_id: str,
    run_id: str,
    *,
    at: float = T0,
    graph: str = "weather",
    status: RunStatus = "running",
    text: str = "北京天气怎么样",
    owner: str = "host:1",
    checkpoint: str | None = None,
) -> StoredRun:
    record = RunRecord(
        run_id=run_id, thread_id=thread_id, graph=graph, status=status, created_at=at
    )
    request: dict[str, Any] = {
        "messages": [{"id": f"m-{run_id}", "role": "user", "content": text}],
        "resume": [],
        "streamTokens": True,
    }
    return StoredRun(record=record, owner=owner, request=request, checkpoint_before=checkpoint)


def run_end(
    thread_id: str,
    run_id: str,
    at: float,
    status: RunStatus = "success",
    error: RunError | None = None,
) -> RunEnd:
    return RunEnd(thread_id, run_id, status, at, error)


async def test_a_created_run_reads_back_with_its_record_owner_request_and_checkpoint(
    store: RunStore,
) -> None:
    run = stored("t1", "r1", checkpoint="cp-0", text="你好")

    assert await store.create(run) is True
    assert await store.get("t1", "r1") == run
    assert await store.get("t1", "nope") is None


async def test_a_run_id_the_thread_has_used_is_refused_and_leaves_its_thread_as_it_was(
    store: RunStore,
) -> None:
    await store.create(stored("t1", "r1", text="第一句"))

    again = await store.create(stored("t1", "r1", at=T0 + 10, graph="tushare", text="第二句"))

    assert again is False
    [summary] = await store.threads(None, 10)
    assert (summary.graph_id, summary.title, summary.updated_at) == ("weather", "第一句", T0)
    assert [r.graph for r in await store.of_thread("t1")] == ["weather"]


async def test_runs_are_newest_first_and_those_created_in_one_instant_by_insertion(
    store: RunStore,
) -> None:
    for run_id, at in [("a", T0), ("b", T0 + 1), ("c", T0 + 1), ("d", T0 + 1)]:
        await store.create(stored("t1", run_id, at=at))

    assert [r.run_id for r in await store.of_thread("t1")] == ["d", "c", "b", "a"]
    assert await store.of_thread("t2") == []


async def test_started_records_the_status_owner_and_start_checkpoint(store: RunStore) -> None:
    await store.create(stored("t1", "r1", status="queued", owner="host:1"))

    await store.started("t1", "r1", owner="host:2", checkpoint_before="cp-7")
    started = await store.get("t1", "r1")

    assert started is not None
    assert (started.record.status, started.owner, started.checkpoint_before) == (
        "running",
        "host:2",
        "cp-7",
    )


async def test_active_runs_are_the_queued_and_running_ones_oldest_first(store: RunStore) -> None:
    await store.create(stored("t1", "done", at=T0))
    await store.create(stored("t1", "running", at=T0 + 1))
    await store.create(stored("t2", "queued", at=T0 + 2, status="queued"))
    await store.create(stored("t3", "first", at=T0 - 1))
    await store.write((), [run_end("t1", "done", T0 + 5)])

    active = await store.active()

    assert [(s.record.thread_id, s.record.run_id) for s in active] == [
        ("t3", "first"),
        ("t1", "running"),
        ("t2", "queued"),
    ]


async def test_events_are_read_after_a_number_in_order_and_one_logged_twice_is_kept_once(
    store: RunStore,
) -> None:
    await store.create(stored("t1", "r1"))
    await store.write([("t1", "r1", 2, '{"n":2}'), ("t1", "r1", 1, '{"n":1}')])
    await store.write([("t1", "r1", 2, '{"again":2}'), ("t1", "r1", 3, '{"n":"三"}')])

    assert await store.events("t1", "r1") == [(1, '{"n":1}'), (2, '{"n":2}'), (3, '{"n":"三"}')]
    assert await store.events("t1", "r1", after=2) == [(3, '{"n":"三"}')]
    assert await store.events("t1", "other") == []


async def test_a_run_end_records_status_time_and_error_and_moves_its_thread_to_the_top(
    store: RunStore,
) -> None:
    await store.create(stored("t1", "r1", at=T0))
    await store.create(stored("t2", "r1", at=T0 + 1))
    failed = RunError(code="model_error", message="模型服务出错")

    await store.write([("t1", "r1", 1, "{}")], [run_end("t1", "r1", T0 + 9, "error", failed)])

    record = await store.get("t1", "r1")
    assert record is not None
    assert record.record.model_dump(by_alias=True, mode="json") == {
        "runId": "r1",
        "threadId": "t1",
        "graph": "weather",
        "status": "error",
        "createdAt": "2027-01-15T08:00:00+00:00",
        "finishedAt": "2027-01-15T08:00:09+00:00",
        "error": {"code": "model_error", "message": "模型服务出错"},
    }
    assert [(s.thread_id, s.status, s.updated_at) for s in await store.threads(None, 10)] == [
        ("t1", "error", T0 + 9),
        ("t2", "running", T0 + 1),
    ]


async def test_one_write_records_several_run_ends_and_their_events_at_once(
    store: RunStore,
) -> None:
    for run_id in ("r1", "r2"):
        await store.create(stored("t1", run_id, at=T0))
    await store.create(stored("t2", "r1", at=T0 + 1))
    await store.write([("t1", "r1", 1, "{}")])

    await store.write(
        [("t1", "r1", 2, '{"n":2}'), ("t1", "r2", 1, '{"n":1}'), ("t2", "r1", 1, "{}")],
        [
            run_end("t1", "r2", T0 + 7),
            run_end("t1", "r1", T0 + 5, "cancelled", RunError(code="cancelled", message="停")),
            run_end("t2", "r1", T0 + 6),
        ],
    )

    statuses = [(r.run_id, r.status, r.finished_at) for r in await store.of_thread("t1")]
    assert sorted(statuses) == [
        ("r1", "cancelled", T0 + 5),
        ("r2", "success", T0 + 7),
    ]
    assert await store.events("t1", "r1") == [(1, "{}"), (2, '{"n":2}')]
    assert await store.events("t1", "r2") == [(1, '{"n":1}')]
    # The thread's activity is its latest end, whichever came first in the batch.
    assert [(s.thread_id, s.updated_at) for s in await store.threads(None, 10)] == [
        ("t1", T0 + 7),
        ("t2", T0 + 6),
    ]


async def test_expire_drops_only_the_logs_of_runs_finished_before_the_cut_off(
    store: RunStore,
) -> None:
    for thread_id in ("old", "recent", "running"):
        await store.create(stored(thread_id, "r1"))
        await store.write([(thread_id, "r1", 1, "{}")])
    await store.write((), [run_end("old", "r1", T0 + 1), run_end("recent", "r1", T0 + HOUR)])

    await store.expire(T0 + 60)

    assert await store.events("old", "r1") == []
    assert await store.events("recent", "r1") == [(1, "{}")]
    assert await store.events("running", "r1") == [(1, "{}")]
    assert await store.get("old", "r1") is not None  # the record stays


async def test_threads_are_listed_newest_activity_first_per_graph_and_up_to_the_limit(
    store: RunStore,
) -> None:
    await store.create(stored("w-old", "r1", at=T0))
    await store.create(stored("s-mid", "r1", at=T0 + 1, graph="tushare", text="平安银行"))
    await store.create(stored("w-new", "r1", at=T0 + 2, text="  上海\n 明天\t下雨吗  "))
    await store.create(stored("w-old", "r2", at=T0 + 3, text="第二句"))

    everything = await store.threads(None, 10)
    weather = await store.threads("weather", 10)
    first = await store.threads(None, 1)

    assert [(s.thread_id, s.title) for s in everything] == [
        ("w-old", "北京天气怎么样"),
        ("w-new", "上海 明天 下雨吗"),
        ("s-mid", "平安银行"),
    ]
    assert [s.thread_id for s in weather] == ["w-old", "w-new"]
    assert [s.thread_id for s in first] == ["w-old"]


async def test_a_renamed_thread_keeps_its_title_through_later_runs(store: RunStore) -> None:
    await store.create(stored("t1", "r1", at=T0))

    renamed = await store.rename_thread("t1", "我的会话")
    await store.create(stored("t1", "r2", at=T0 + 1, text="又一句"))

    assert renamed is not None and (renamed.title, renamed.status) == ("我的会话", "running")
    assert [s.title for s in await store.threads(None, 10)] == ["我的会话"]
    assert await store.rename_thread("unknown", "名字") is None


async def test_a_nul_in_a_title_or_an_error_reads_back_as_u_fffd_on_both_backends(
    store: RunStore,
) -> None:
    await store.create(stored("t1", "r1", text="北\x00京"))
    titled = [s.title for s in await store.threads(None, 10)]
    renamed = await store.rename_thread("t1", "名\x00字")
    failed = RunError(code="model_error", message="坏\x00了")
    await store.write((), [run_end("t1", "r1", T0 + 1, "error", failed)])
    run = await store.get("t1", "r1")

    assert titled == ["北\ufffd京"]
    assert renamed is not None and renamed.title == "名\ufffd字"
    assert run is not None and run.record.error == RunError(
        code="model_error", message="坏\ufffd了"
    )


async def test_forgetting_a_thread_drops_its_runs_logs_list_entry_and_lease(
    store: RunStore,
) -> None:
    for thread_id in ("gone", "kept"):
        await store.admit(stored(thread_id, "r1"), strategy="reject", ttl_s=30, max_queued=10)
        await store.write([(thread_id, "r1", 1, "{}")])

    await store.forget_thread("gone")

    assert await store.of_thread("gone") == []
    assert await store.events("gone", "r1") == []
    assert [s.thread_id for s in await store.threads(None, 10)] == ["kept"]
    assert await store.renew("host:1", 30) == ["kept"]
    assert await store.events("kept", "r1") == [(1, "{}")]


async def test_kept_messages_read_back_in_the_order_kept_and_one_kept_twice_stays_where_it_was(
    store: RunStore,
) -> None:
    first = [KeptMessage("m1", "msgpack", b"\x00one"), KeptMessage("m2", "json", b"two")]
    await store.keep_messages("t1", first)
    # A step re-run after a crash hands m2 over again, with the next message.
    await store.keep_messages(
        "t1", [KeptMessage("m2", "json", b"again"), *[KeptMessage("m3", "json", b"three")]]
    )
    await store.keep_messages("t2", [KeptMessage("m1", "json", b"other thread")])

    assert await store.kept_messages("t1") == [*first, KeptMessage("m3", "json", b"three")]
    assert await store.kept_ids("t1", ["m3", "m9", "m1"]) == {"m1", "m3"}
    assert await store.kept_ids("t1", []) == set()
    assert await store.kept_messages("t3") == []


async def test_forgetting_a_thread_drops_its_kept_messages_and_no_other_thread_s(
    store: RunStore,
) -> None:
    for thread_id in ("gone", "kept"):
        await store.keep_messages(thread_id, [KeptMessage("m1", "json", b"{}")])

    await store.forget_thread("gone")

    assert await store.kept_messages("gone") == []
    assert await store.kept_messages("kept") == [KeptMessage("m1", "json", b"{}")]


async def test_reopening_the_database_finds_everything_and_sets_up_nothing_twice(
    opener: Opener,
) -> None:
    async with opener() as store:
        await store.create(stored("t1", "r1"))
        await store.write([("t1", "r1", 1, "{}")], [run_end("t1", "r1", T0 + 1)])
        before = (await store.get("t1", "r1"), await store.threads(None, 10))

    async with opener() as store:
        after = (await store.get("t1", "r1"), await store.threads(None, 10))

    assert after == before


async def test_a_database_from_before_the_thread_list_gets_it_rebuilt_from_its_runs(
    opener: Opener, agent_db: str
) -> None:
    async with opener() as store:
        await store.create(stored("older", "r1", at=T0, text="更早的会话"))
        await store.create(stored("old", "r1", at=T0 + 1, text="早先的会话"))
        await store.create(stored("older", "r2", at=T0 + 2, graph="tushare", text="第二句"))
        await store.write((), [run_end("older", "r2", T0 + 5), run_end("old", "r1", T0 + 3)])
    execute(agent_db, "DROP TABLE agent_threads")

    async with opener() as store:
        rebuilt = await store.threads(None, 10)
        await store.create(stored("old", "r2", at=T0 + 9, text="升级之后"))
        later = await store.threads(None, 10)

    assert [(s.thread_id, s.graph_id, s.title, s.updated_at, s.status) for s in rebuilt] == [
        ("older", "tushare", "更早的会话", T0 + 5, "success"),
        ("old", "weather", "早先的会话", T0 + 3, "success"),
    ]
    assert [(s.thread_id, s.title) for s in later] == [
        ("old", "早先的会话"),
        ("older", "更早的会话"),
    ]


async def test_a_write_whose_caller_is_cancelled_is_completed_all_the_same(
    store: RunStore,
) -> None:
    await store.create(stored("t1", "r1"))
    events = [("t1", "r1", seq, f'{{"n":{seq}}}') for seq in range(1, 201)]
    writing = asyncio.create_task(store.write(events, [run_end("t1", "r1", T0 + 1)]))
    await asyncio.sleep(0)  # a yield, not a wait: the write starts, then its caller is cancelled
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing

    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        run = await store.get("t1", "r1")
        if run is not None and run.record.status == "success":
            break
        assert asyncio.get_running_loop().time() < deadline, "the cancelled write never landed"
        await asyncio.sleep(POLL_S)  # polling interval, not a wait for a result
    assert len(await store.events("t1", "r1")) == 200


async def test_a_database_that_answers_passes_the_probe(store: RunStore) -> None:
    await store.probe(1.0)


# --- admission, turns and takeovers across processes ------------------------------


async def admit(
    store: RunStore,
    run: StoredRun,
    strategy: MultitaskStrategy = "enqueue",
    ttl_s: float = 30,
    max_queued: int = 10,
) -> Admission:
    return await store.admit(run, strategy=strategy, ttl_s=ttl_s, max_queued=max_queued)


async def test_a_run_on_an_idle_thread_is_admitted_running_with_the_threads_lease(
    store: RunStore,
) -> None:
    admitted = await admit(store, stored("t1", "r1", checkpoint="cp-1"))

    assert admitted == Admission("created", "running", ())
    run = await store.get("t1", "r1")
    assert run is not None and run.record.status == "running" and run.checkpoint_before == "cp-1"
    assert await store.renew("host:1", 30) == ["t1"]


async def test_a_run_behind_an_active_one_is_refused_by_reject_and_queued_otherwise(
    store: RunStore,
) -> None:
    await admit(store, stored("t1", "r1"))

    refused = await admit(store, stored("t1", "r2"), "reject")
    queued = await admit(store, stored("t1", "r2", checkpoint="cp-stale"), "enqueue")
    again = await admit(store, stored("t1", "r1"), "enqueue")

    assert refused == Admission("busy", None, ("r1",))
    assert queued == Admission("created", "queued", ("r1",))
    assert again.outcome == "exists"
    run = await store.get("t1", "r2")
    # A queued run finds its start checkpoint at its turn, not at its admission.
    assert run is not None and (run.record.status, run.checkpoint_before) == ("queued", None)


async def test_interrupt_and_rollback_ask_the_active_runs_to_stop(store: RunStore) -> None:
    await admit(store, stored("t1", "r1", owner="host:1"))
    await admit(store, stored("t1", "r2", owner="host:2"))

    rollback = await admit(store, stored("t1", "r3", owner="host:3"), "rollback")

    assert rollback == Admission("created", "queued", ("r1", "r2"), rollback_from="r1")
    assert await store.cancel_requests("host:1") == [("t1", "r1")]
    assert await store.cancel_requests("host:2") == [("t1", "r2")]
    assert await store.cancel_requests("host:3") == []
    run = await store.get("t1", "r3")
    assert run is not None and run.rollback_from == "r1" and not run.cancel_requested


async def test_a_queued_run_gets_its_turn_once_it_is_the_oldest_and_nothing_runs(
    store: RunStore,
) -> None:
    await admit(store, stored("t1", "r1", owner="host:1"))
    await admit(store, stored("t1", "r2", owner="host:2"))
    await admit(store, stored("t1", "r3", owner="host:3"))

    while_running = await store.claim_turn("t1", "r2", "host:2", 30)
    await store.write([], [RunEnd("t1", "r1", "success", T0 + 1, None, "host:1")])
    out_of_order = await store.claim_turn("t1", "r3", "host:3", 30)
    turn = await store.claim_turn("t1", "r2", "host:2", 30)

    assert (while_running, out_of_order, turn) == (False, False, True)
    assert await store.renew("host:1", 30) == []  # the run's end released the lease
    assert await store.renew("host:2", 30) == ["t1"]
    run = await store.get("t1", "r2")
    assert run is not None and (run.record.status, run.owner) == ("running", "host:2")


async def test_claim_head_gives_the_thread_to_whichever_of_the_runs_is_its_head(
    store: RunStore,
) -> None:
    for run_id in ("r1", "r2", "r3", "r4"):
        await admit(store, stored("t1", run_id, owner="host:2"))

    while_running = await store.claim_head("t1", ["r3", "r2"], "host:2", 30)
    await store.write([], [RunEnd("t1", "r1", "success", T0 + 1, None, "host:2")])
    not_among_them = await store.claim_head("t1", ["r3", "r4"], "host:2", 30)
    head = await store.claim_head("t1", ["r4", "r3", "r2"], "host:2", 30)
    behind_it = await store.claim_head("t1", ["r4", "r3"], "host:2", 30)

    assert (while_running, not_among_them, head, behind_it) == (None, None, "r2", None)
    run = await store.get("t1", "r2")
    assert run is not None and (run.record.status, run.owner) == ("running", "host:2")
    assert await store.renew("host:2", 30) == ["t1"]


async def test_a_run_created_before_another_of_its_thread_ended_is_admitted_stale(
    store: RunStore,
) -> None:
    await admit(store, stored("t1", "r1", owner="host:1"))
    await store.write([], [RunEnd("t1", "r1", "interrupted", T0 + 1, None, "host:1")])

    # r2's state was read before r1 ended (in another process): it must be read again.
    overlapping = await admit(store, stored("t1", "r2", at=T0 + 0.5))
    queued = await admit(store, stored("t1", "r3", at=T0 + 0.5))  # reads it at its turn
    await store.write([], [RunEnd("t1", "r2", "success", T0 + 2, None, "host:1")])
    await store.write([], [RunEnd("t1", "r3", "success", T0 + 3, None, "host:1")])
    later = await admit(store, stored("t1", "r4", at=T0 + HOUR))

    assert overlapping == Admission("created", "running", (), stale=True)
    assert queued == Admission("created", "queued", ("r2",))
    assert later == Admission("created", "running", ())


async def test_concurrent_admissions_with_reject_admit_exactly_one_run(store: RunStore) -> None:
    admissions = [
        admit(store, stored("t1", f"r{n}", owner=f"host:{n}"), "reject") for n in range(8)
    ]

    outcomes = [a.outcome for a in await asyncio.gather(*admissions)]

    assert sorted(outcomes) == ["busy"] * 7 + ["created"]


async def test_runs_no_live_process_holds_are_orphans_and_each_is_adopted_once(
    store: RunStore,
) -> None:
    await store.renew("host:2", 30)  # alive; host:1 and host:3 never renew
    await admit(store, stored("t1", "lapsed", owner="host:1"), ttl_s=0)  # expires at once
    await admit(store, stored("t2", "held", owner="host:2"))
    await admit(store, stored("t2", "waiting", owner="host:3", at=T0 + 1))
    await admit(store, stored("t3", "alive", owner="host:2", status="queued"))

    orphans = await store.orphans()
    [lapsed, waiting] = orphans
    adopted = await asyncio.gather(
        *(store.adopt(lapsed, f"host:{n}", 30, force=False) for n in (4, 5, 6))
    )
    held = await store.get("t2", "held")
    assert held is not None

    assert [(o.record.run_id, o.record.status) for o in orphans] == [
        ("lapsed", "running"),
        ("waiting", "queued"),
    ]
    assert sorted(adopted) == [False, False, True]
    assert await store.adopt(waiting, "host:4", 30, force=False) is True
    assert await store.adopt(held, "host:4", 30, force=False) is False  # its lease is live
    await store.renew("host:4", 30)  # the adopter is alive: its queued run is held
    assert await store.orphans() == []


async def test_a_run_end_from_a_process_that_lost_its_run_is_not_recorded(
    store: RunStore,
) -> None:
    run = stored("t1", "r1", owner="host:1")
    await admit(store, run)
    assert await store.adopt(run, "host:2", 30, force=True) is True  # host:1 died

    await store.write([], [RunEnd("t1", "r1", "success", T0 + 1, None, "host:1")])
    after_loser = await store.get("t1", "r1")
    await store.write([], [RunEnd("t1", "r1", "success", T0 + 2, None, "host:2")])
    after_holder = await store.get("t1", "r1")

    assert after_loser is not None and after_loser.record.status == "running"
    assert after_holder is not None and after_holder.record.status == "success"
    assert await store.renew("host:2", 30) == []


async def test_a_cancel_request_marks_only_an_active_run(store: RunStore) -> None:
    await admit(store, stored("t1", "r1"))
    await store.write([], [run_end("t1", "r1", T0 + 1)])
    await admit(store, stored("t1", "r2"))

    assert await store.request_cancel("t1", "r1") is False
    assert await store.request_cancel("t1", "r2") is True
    assert await store.request_cancel("t1", "nope") is False
    assert await store.cancel_requests("host:1") == [("t1", "r2")]


async def test_a_thread_with_max_queued_runs_waiting_refuses_another_whoever_queued_them(
    store: RunStore,
) -> None:
    await admit(store, stored("t1", "running", owner="host:1"))
    waiting = [
        await admit(store, stored("t1", f"q{n}", owner=f"host:{n}"), max_queued=2) for n in (2, 3)
    ]
    full = await admit(store, stored("t1", "q4", owner="host:4"), max_queued=2)
    other = await admit(store, stored("t2", "free", owner="host:4"), max_queued=2)

    assert [a.status for a in waiting] == ["queued", "queued"]
    assert (full.outcome, full.status, full.ahead) == ("full", None, ("running", "q2", "q3"))
    assert await store.get("t1", "q4") is None  # refused: nothing recorded
    assert (other.outcome, other.status) == ("created", "running")
