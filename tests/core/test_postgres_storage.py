"""PostgreSQL storage as replicas meet it: several starting on a new database at once, the
set-up lock (taken only for a database not yet set up), the pool's size, prepared
statements off (for pgbouncer in transaction mode), a task's writes committed with
the checkpoint that follows them, and a run's end heard by every replica (NOTIFY), its
listening connection restored when lost."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import psycopg
import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from app.core.storage.backends import open_storage
from app.core.storage.postgres.connection import APPLICATION_NAME, SETUP_LOCK
from app.core.storage.runs import RunEnd, RunRecord, StoredRun
from app.settings import Settings

REPLICAS = 4
SETUP_DEADLINE_S = 60.0
POLL_S = 0.02
HEAR_DEADLINE_S = 10.0  # the listener reconnects after half a second
WAITING = "waiting for another process to finish setting up the database"
TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "agent_runs",
    "agent_run_events",
    "agent_threads",
    "agent_thread_leases",
)


def connections_of(url: str) -> int:
    """How many connections this service holds to the database of `url` now."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (APPLICATION_NAME,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_replicas_starting_together_on_a_new_database_all_set_it_up(
    postgres_url: str,
) -> None:
    started: list[int] = []

    async def replica(number: int) -> None:
        async with open_storage(Settings(agent_db=postgres_url)) as storage:
            await storage.runs.probe(1.0)
            started.append(number)

    async with asyncio.timeout(SETUP_DEADLINE_S):
        await asyncio.gather(*(replica(n) for n in range(REPLICAS)))

    with psycopg.connect(postgres_url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = ANY(%s)",
            (list(TABLES),),
        ).fetchone()
        migrations = conn.execute("SELECT count(*) FROM checkpoint_migrations").fetchone()
    assert sorted(started) == list(range(REPLICAS))
    assert found == (len(TABLES),)
    assert migrations == (len(AsyncPostgresSaver.MIGRATIONS),)


async def test_a_start_on_an_up_to_date_database_takes_no_set_up_lock(postgres_url: str) -> None:
    settings = Settings(agent_db=postgres_url)
    async with open_storage(settings):
        pass  # the first start sets the database up
    holder = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    try:
        await holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))  # a replica setting up

        async with asyncio.timeout(SETUP_DEADLINE_S), open_storage(settings) as storage:
            await storage.runs.probe(1.0)
    finally:
        await holder.close()


async def test_a_new_database_waits_for_the_set_up_lock_and_is_set_up_once_it_is_free(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.core.storage.postgres.connection")
    holder = await psycopg.AsyncConnection.connect(postgres_url, autocommit=True)
    await holder.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))  # a replica setting up
    opened = asyncio.Event()

    async def start() -> None:
        async with open_storage(Settings(agent_db=postgres_url)) as storage:
            opened.set()
            await storage.runs.probe(1.0)

    starting = asyncio.create_task(start())
    try:
        async with asyncio.timeout(SETUP_DEADLINE_S):
            while WAITING not in caplog.text:
                assert not starting.done(), starting
                await asyncio.sleep(POLL_S)  # polling interval, not a wait for a result
        assert not opened.is_set()
    finally:
        await holder.close()  # that replica is done (or gone): its lock is free
    async with asyncio.timeout(SETUP_DEADLINE_S):
        await starting
    assert opened.is_set()


async def test_a_burst_of_work_holds_no_more_connections_than_the_pool_size(
    postgres_url: str,
) -> None:
    settings = Settings(agent_db=postgres_url, agent_db_pool_size=2)
    async with open_storage(settings) as (_, runs, _):
        await asyncio.gather(*(runs.threads(None, 10) for _ in range(20)))
        held = await asyncio.to_thread(connections_of, postgres_url)

    assert 1 <= held <= 2
    # All closed at the end: a closed connection's server process leaves pg_stat_activity
    # a moment after the client hangs up, later on a loaded machine.
    async with asyncio.timeout(HEAR_DEADLINE_S):
        while (held := await asyncio.to_thread(connections_of, postgres_url)) != 0:
            assert held <= 2
            await asyncio.sleep(POLL_S)  # polling interval, not a wait for a result


async def test_without_prepared_statements_every_pool_connection_prepares_nothing(
    postgres_url: str,
) -> None:
    settings = Settings(agent_db=postgres_url, agent_db_prepare=False)
    async with open_storage(settings) as (saver, runs, _):
        assert isinstance(saver, AsyncPostgresSaver)
        await runs.threads(None, 10)
        async with saver.conn.connection() as conn:  # the pool the saver and the store share
            prepared = await (
                await conn.execute("SELECT count(*) FROM pg_prepared_statements")
            ).fetchone()
            threshold = conn.prepare_threshold

    assert threshold is None
    assert prepared is not None and next(iter(prepared.values())) == 0


async def test_a_task_s_writes_are_committed_when_aput_writes_returns_and_read_back_by_langgraph(
    postgres_url: str,
) -> None:
    answer = AIMessage("晴", id="a1")
    config: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    async with (
        open_storage(Settings(agent_db=postgres_url)) as (saver, *_),
        AsyncPostgresSaver.from_conn_string(postgres_url) as plain,
    ):
        first = await saver.aput(config, empty_checkpoint(), {"step": -1}, {})
        await saver.aput_writes(first, [("messages", [answer])], "task-1")
        before_next = await plain.aget_tuple(first)  # no checkpoint put after them yet
        second = await saver.aput(first, empty_checkpoint(), {"step": 0}, {})
        await saver.aput_writes(second, [("messages", [answer])], "task-2")
        at_first = await plain.aget_tuple(first)
        at_second = await plain.aget_tuple(second)

    assert before_next is not None
    assert before_next.pending_writes == [("task-1", "messages", [answer])]
    assert at_first is not None and at_first.pending_writes == [("task-1", "messages", [answer])]
    assert at_second is not None and at_second.pending_writes == [("task-2", "messages", [answer])]


class Ears:
    """What a store's `hear_ends` told one callback (ends, or admissions), in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str | None, ...]] = []
        self._news = asyncio.Event()

    def __call__(self, *told: str | None) -> None:
        self.heard.append(told)
        self._news.set()

    async def until(self, check: Callable[[list[tuple[str | None, ...]]], bool]) -> None:
        async with asyncio.timeout(HEAR_DEADLINE_S):
            while not check(self.heard):
                self._news.clear()
                await self._news.wait()


def _run(thread_id: str, run_id: str, owner: str) -> StoredRun:
    record = RunRecord(
        run_id=run_id, thread_id=thread_id, graph="weather", status="running", created_at=0.0
    )
    request = {"messages": [], "resume": [], "streamTokens": True}
    return StoredRun(record=record, owner=owner, request=request, checkpoint_before=None)


async def test_a_run_end_recorded_by_one_replica_is_heard_by_the_others(
    postgres_url: str,
) -> None:
    settings = Settings(agent_db=postgres_url)
    ears = Ears()
    async with (
        open_storage(settings) as writer,
        open_storage(settings) as listener,
        listener.runs.hear_ends(ears),
    ):
        await writer.runs.create(_run("t1", "r1", "host:1"))
        await writer.runs.create(_run("t2", "r2", "host:1"))
        await writer.runs.write([], [RunEnd("t1", "r1", "success", 1.0, None, "host:1")])
        await writer.runs.write([], [RunEnd("t1", "r1", "success", 1.0, None, "host:9")])
        await writer.runs.write([], [RunEnd("t2", "r2", "error", 2.0, None, "host:1")])
        await ears.until(lambda heard: len(heard) >= 2)

    # The end refused to a process that lost its run (host:9) is not announced.
    assert ears.heard == [("t1", "host:1"), ("t2", "host:1")]


async def test_a_run_admitted_by_one_replica_is_heard_by_the_others(postgres_url: str) -> None:
    settings = Settings(agent_db=postgres_url)
    ends, admissions = Ears(), Ears()
    async with (
        open_storage(settings) as writer,
        open_storage(settings) as listener,
        listener.runs.hear_ends(ends, admitted=admissions),
    ):

        async def admit(thread_id: str, run_id: str) -> str:
            stored = _run(thread_id, run_id, "host:1")
            admission = await writer.runs.admit(
                stored, strategy="enqueue", ttl_s=30.0, max_queued=10
            )
            return admission.outcome

        first = await admit("t1", "r1")
        again = await admit("t1", "r1")  # the same run: refused as existing
        other = await admit("t2", "r2")
        await admissions.until(lambda heard: len(heard) >= 2)

    assert (first, again, other) == ("created", "exists", "created")
    # The admission refused (the run exists) is not announced; nothing ended.
    assert admissions.heard == [("t1",), ("t2",)]
    assert ends.heard == []


async def test_a_lost_listening_connection_comes_back_and_says_ends_may_have_been_missed(
    postgres_url: str,
) -> None:
    settings = Settings(agent_db=postgres_url)
    ears = Ears()
    async with open_storage(settings) as storage, storage.runs.hear_ends(ears):
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE %s",
                ("LISTEN %",),
            ).fetchall()
        assert ended == [(True,)]
        await ears.until(lambda heard: (None, None) in heard)
        await storage.runs.create(_run("t1", "r1", "host:1"))
        await storage.runs.write([], [RunEnd("t1", "r1", "success", 1.0, None, "host:1")])
        await ears.until(lambda heard: ("t1", "host:1") in heard)

    assert ears.heard == [(None, None), ("t1", "host:1")]
