"""Checkpoint retention on real savers (SQLite and PostgreSQL) with real LangGraph runs.

A small graph (no model) writes the checkpoints: a few steps per run, a parallel `Send`
and a question (`interrupt`) on request, so its state has blobs, pending writes and
interrupts like the agents'. The run records live in a real run store.
"""

from __future__ import annotations

import operator
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, interrupt
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from app.core.storage.backends import open_checkpointer
from app.core.storage.retention import DAY_S, PruneResult, checkpoint_time, prune
from app.core.storage.runs import RunEnd, RunRecord, RunStatus, RunStore, StoredRun
from app.core.storage.sqlite.runs import open_sqlite_run_store


class State(TypedDict):
    log: Annotated[list[str], operator.add]
    ask: bool


def _note(state: State) -> dict[str, Any]:
    return {"log": [f"note {len(state['log'])}"]}


def _fan_out(state: State) -> list[Send]:
    return [Send("work", {"log": [], "ask": state["ask"] and n == 1}) for n in range(2)]


def _work(state: State) -> dict[str, Any]:
    if state["ask"]:
        return {"log": [f"answered {interrupt({'type': 'input', 'message': '哪个城市？'})}"]}
    return {"log": ["worked"]}


def _graph(saver: BaseCheckpointSaver) -> CompiledStateGraph:
    builder = StateGraph(State)
    builder.add_node("note", _note)
    builder.add_node("again", _note)
    builder.add_node("work", _work)
    builder.add_edge(START, "note")
    builder.add_edge("note", "again")
    builder.add_conditional_edges("again", _fan_out, ["work"])
    builder.add_edge("work", END)
    return builder.compile(checkpointer=saver)


def _config(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


@dataclass
class Db:
    """One database under test: its saver, a run store and the graph on the saver."""

    kind: str
    saver: BaseCheckpointSaver
    store: RunStore
    graph: CompiledStateGraph

    async def turns(self, thread_id: str, n: int) -> None:
        for _ in range(n):
            await self.graph.ainvoke({"log": [], "ask": False}, _config(thread_id))

    async def ids(self, thread_id: str) -> list[str]:
        """The thread's checkpoint ids, newest first."""
        return [
            saved.config["configurable"]["checkpoint_id"]
            async for saved in self.saver.alist(_config(thread_id))
        ]

    async def state(self, thread_id: str) -> tuple[Any, Any, Any]:
        snapshot = await self.graph.aget_state(_config(thread_id))
        return snapshot.values, snapshot.next, [i.value for i in snapshot.interrupts]

    async def record(
        self, thread_id: str, run_id: str, status: RunStatus, at: float | None = None
    ) -> None:
        """A run of the thread in the store, started (and, unless active, ended) at `at`."""
        at = time.time() if at is None else at
        record = RunRecord(
            run_id=run_id, thread_id=thread_id, graph="test", status=status, created_at=at
        )
        request = {"messages": [{"role": "user", "content": thread_id}]}
        stored = StoredRun(record=record, owner="test:1", request=request, checkpoint_before=None)
        assert await self.store.create(stored)
        if status not in ("queued", "running"):
            end = RunEnd(thread_id, run_id, status, at, None)
            await self.store.write([(thread_id, run_id, 1, "{}")], [end])

    async def orphans(self) -> dict[str, int]:
        """Rows no checkpoint owns: writes of a missing checkpoint, unreferenced blobs."""
        if self.kind == "sqlite":
            conn = self.saver.conn  # type: ignore[attr-defined]
            async with conn.execute(
                "SELECT COUNT(*) FROM writes w WHERE NOT EXISTS (SELECT 1 FROM checkpoints c"
                " WHERE c.thread_id = w.thread_id AND c.checkpoint_ns = w.checkpoint_ns"
                " AND c.checkpoint_id = w.checkpoint_id)"
            ) as cur:
                row = await cur.fetchone()
            return {"writes": row[0]}
        counts = {}
        async with self.saver._cursor() as cur:  # type: ignore[attr-defined]
            await cur.execute(
                "SELECT COUNT(*) AS n FROM checkpoint_writes w WHERE NOT EXISTS (SELECT 1"
                " FROM checkpoints c WHERE c.thread_id = w.thread_id"
                " AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)"
            )
            counts["writes"] = (await cur.fetchone())["n"]
            await cur.execute(
                "SELECT COUNT(*) AS n FROM checkpoint_blobs b WHERE NOT EXISTS (SELECT 1"
                " FROM checkpoints c CROSS JOIN LATERAL"
                " jsonb_each_text(c.checkpoint -> 'channel_versions') AS v"
                " WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns"
                " AND v.key = b.channel AND v.value = b.version)"
            )
            counts["blobs"] = (await cur.fetchone())["n"]
        return counts

    async def blobs(self) -> int:
        async with self.saver._cursor() as cur:  # type: ignore[attr-defined]
            await cur.execute("SELECT COUNT(*) AS n FROM checkpoint_blobs")
            return int((await cur.fetchone())["n"])


@pytest.fixture(params=["sqlite", "postgres", "postgres-pool"])
async def db(request: pytest.FixtureRequest, data_dir: Path) -> AsyncIterator[Db]:
    """The database under test; the run store is SQLite's in every case.

    PostgreSQL's saver on one connection (its own `from_conn_string`) or on a pool (what
    the service uses).
    """
    path = data_dir / "agent.sqlite"
    async with open_sqlite_run_store(path) as store:
        if request.param == "sqlite":
            async with open_checkpointer(path) as saver:
                yield Db("sqlite", saver, store, _graph(saver))
            return
        url = request.getfixturevalue("postgres_url")
        if request.param == "postgres":
            async with AsyncPostgresSaver.from_conn_string(url) as saver:
                await saver.setup()
                yield Db("postgres", saver, store, _graph(saver))
            return
        kwargs = {"autocommit": True, "row_factory": dict_row, "prepare_threshold": 0}
        async with AsyncConnectionPool(url, kwargs=kwargs, max_size=4) as pool:
            pooled = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await pooled.setup()
            yield Db("postgres", pooled, store, _graph(pooled))


async def test_the_latest_checkpoints_of_each_thread_stay_and_its_state_with_them(db: Db) -> None:
    await db.turns("long", 3)
    await db.turns("short", 1)
    long_ids, short_ids = await db.ids("long"), await db.ids("short")
    states = {t: await db.state(t) for t in ("long", "short")}

    result = await prune(db.saver, db.store, keep=2)

    assert result == PruneResult(
        threads_seen=2,
        threads_skipped=0,
        checkpoints_removed=len(long_ids) + len(short_ids) - 4,
        threads_removed=0,
    )
    assert await db.ids("long") == long_ids[:2]
    assert await db.ids("short") == short_ids[:2]
    assert {t: await db.state(t) for t in ("long", "short")} == states
    oldest_kept = [s async for s in db.saver.alist(_config("long"))][-1]
    assert oldest_kept.parent_config is None, "its parent is gone: it points at none"
    assert set((await db.orphans()).values()) == {0}


async def test_a_thread_keeps_its_history_when_it_has_no_more_than_keep(db: Db) -> None:
    await db.turns("t", 1)
    ids = await db.ids("t")

    result = await prune(db.saver, db.store, keep=len(ids))

    assert result.checkpoints_removed == 0
    assert await db.ids("t") == ids


async def test_a_pending_question_survives_pruning_to_one_checkpoint_and_can_be_answered(
    db: Db,
) -> None:
    asking: dict[str, Any] = {"log": [], "ask": True}
    for thread_id in ("asked", "control"):  # the same history; only "asked" is pruned
        await db.turns(thread_id, 2)
        first = await db.graph.ainvoke(asking, _config(thread_id))
        assert "__interrupt__" in first
    before = await db.state("asked")

    await prune(db.saver, db.store, keep=1)

    assert len(await db.ids("asked")) == 1
    assert await db.state("asked") == before
    assert before[2] == [{"type": "input", "message": "哪个城市？"}]
    answered = await db.graph.ainvoke(Command(resume="上海"), _config("asked"))
    assert "answered 上海" in answered["log"]
    # The state shown before already held the sibling's result: it is not run again.
    assert answered["log"].count("worked") == before[0]["log"].count("worked")
    control = await db.graph.ainvoke(Command(resume="上海"), _config("control"))
    assert answered == control


@pytest.mark.parametrize("db", ["postgres", "postgres-pool"], indirect=True)
async def test_postgres_blobs_go_only_when_no_kept_checkpoint_references_them(db: Db) -> None:
    await db.turns("t", 4)
    assert await db.orphans() == {"writes": 0, "blobs": 0}
    before = await db.blobs()
    values = await db.state("t")

    await prune(db.saver, db.store, keep=1)

    assert await db.blobs() < before
    assert await db.orphans() == {"writes": 0, "blobs": 0}
    assert await db.state("t") == values
    await db.turns("t", 1)  # the next run builds on what stayed
    n = len(values[0]["log"])
    after = [*values[0]["log"], f"note {n}", f"note {n + 1}", "worked", "worked"]
    assert (await db.state("t"))[0]["log"] == after


@pytest.mark.parametrize("status", ["queued", "running"])
async def test_a_thread_with_a_run_in_progress_is_left_alone(db: Db, status: RunStatus) -> None:
    await db.turns("busy", 2)
    await db.turns("idle", 2)
    await db.record("busy", "r1", status)
    busy_ids = await db.ids("busy")

    result = await prune(db.saver, db.store, keep=1, idle_s=DAY_S, now=time.time() + 30 * DAY_S)

    assert (result.threads_seen, result.threads_skipped, result.threads_removed) == (2, 1, 1)
    assert await db.ids("busy") == busy_ids
    assert await db.ids("idle") == []


async def test_idle_threads_go_with_their_runs_and_threads_active_since_stay(db: Db) -> None:
    now = time.time() + 30 * DAY_S  # the checkpoints below are 30 days old then
    await db.turns("idle", 2)
    await db.record("idle", "r1", "success", at=time.time())
    await db.turns("recent", 2)
    await db.record("recent", "r1", "interrupted", at=now - DAY_S)  # a run a day ago
    await db.turns("no-runs", 1)
    await db.record("runs-only", "r1", "error", at=now - 10 * DAY_S)
    recent_ids = await db.ids("recent")

    result = await prune(db.saver, db.store, keep=10, idle_s=7 * DAY_S, now=now)

    assert (result.threads_seen, result.threads_removed) == (4, 3)
    assert await db.ids("idle") == [] and await db.ids("no-runs") == []
    assert await db.ids("recent") == recent_ids
    assert await db.store.of_thread("idle") == []
    assert await db.store.of_thread("runs-only") == []
    assert await db.store.events("idle", "r1") == []
    assert [s.thread_id for s in await db.store.threads(None, 10)] == ["recent"]
    assert await db.store.events("recent", "r1") == [(1, "{}")]
    assert set((await db.orphans()).values()) == {0}


async def test_a_dry_run_counts_what_a_prune_removes_and_removes_nothing(db: Db) -> None:
    now = time.time() + 30 * DAY_S
    await db.turns("long", 3)
    await db.turns("old", 1)
    await db.record("long", "r1", "success", at=now)
    ids = {t: await db.ids(t) for t in ("long", "old")}

    dry = await prune(db.saver, db.store, keep=2, idle_s=DAY_S, now=now, dry_run=True)

    assert {t: await db.ids(t) for t in ("long", "old")} == ids
    real = await prune(db.saver, db.store, keep=2, idle_s=DAY_S, now=now)
    assert dry == real
    assert real.checkpoints_removed == len(ids["long"]) - 2 + len(ids["old"])
    assert real.threads_removed == 1


def test_a_checkpoint_id_tells_when_the_checkpoint_was_made() -> None:
    from langgraph.checkpoint.base.id import uuid6

    made = checkpoint_time(str(uuid6(clock_seq=-1)))

    assert made is not None and abs(made - time.time()) < 5
    assert checkpoint_time("not-a-uuid") is None
    assert checkpoint_time("8f3b1a52-3c6e-4b1f-9a7d-2e4c5b6a7d8e") is None  # v4: no time
