"""Thread growth (issue 26): what one run costs as its thread gets longer.

Each growth target keeps one thread and does the bench run on it again and again. A run
adds `MESSAGES_PER_RUN` messages (the user's, the tool call, the tool's result, the
answer), so the k-th run starts with 4 (k - 1). The targets take turns, one run each per
round, the order rotated every round: at every length they run under the same
background load. Every run is kept with the thread's length at its start, its latency
and its server's CPU (read once the server is idle again, as in the sequential phase;
for the in-process floor, this process's CPU), plus its PostgreSQL backends' CPU when
visible.

A mark of N messages is the `window` runs whose start is nearest N (the first run of a
thread, which creates it, is left out): its CPU per run is their median, its latency
their p50. The largest mark gets runs on both sides of it, so the thread grows a few
runs past it (`runs_needed`). At the end each thread's length is read back (the thread
view for a server, the state for the floor) and checked against what the runs added.
"""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig

from bench.measure import Tally, measured_run, ms, percentile
from bench.targets import FloorInvoke, HttpTarget, Target

MESSAGES_PER_RUN = 4

RunRecord = dict[str, Any]


def on_thread(target: Target, thread_id: str | None = None) -> Target:
    """`target`, every run of it from now on continuing one thread (a new one by default)."""
    target.thread_id = thread_id or uuid.uuid4().hex
    return target


def runs_needed(marks: Sequence[int], window: int) -> int:
    """Runs per thread for `window` runs around every mark, half of them past the last."""
    runs_to_last = -(-max(marks) // MESSAGES_PER_RUN)  # rounded up
    return runs_to_last + (window + 1) // 2 + 1


async def grow(
    targets: Sequence[Target],
    runs: int,
    progress: Callable[[int, dict[str, list[RunRecord]]], None] = lambda done, records: None,
) -> dict[str, list[RunRecord]]:
    """`runs` runs per target on its thread, interleaved; every run's record, by target."""
    records: dict[str, list[RunRecord]] = {target.name: [] for target in targets}
    for index in range(runs):
        shift = index % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            sample = await measured_run(target, Tally())
            records[target.name].append(
                {
                    "run": index + 1,
                    "messages": index * MESSAGES_PER_RUN,
                    "ok": sample.ok,
                    "latency_ms": ms(sample.latency_s),
                    "server_cpu_ms": ms(sample.server_cpu_s),
                    "db_cpu_ms": ms(sample.db_cpu_s),
                    "error": sample.error,
                }
            )
        progress(index + 1, records)
    return records


def window_runs(records: Sequence[RunRecord], mark: int, window: int) -> list[RunRecord]:
    """The `window` runs whose thread length at start is nearest `mark` (not the first run)."""
    later = [record for record in records if record["run"] > 1]
    nearest = sorted(later, key=lambda r: (abs(r["messages"] - mark), r["messages"]))
    return sorted(nearest[:window], key=lambda r: r["run"])


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(statistics.median(present), 2) if present else None


def mark_summary(records: Sequence[RunRecord], mark: int, window: int) -> dict[str, Any]:
    """One mark of one target: which runs, their median CPU, their p50, their spread."""
    chosen = window_runs(records, mark, window)
    ok = [record for record in chosen if record["ok"]]
    cpus = [record["server_cpu_ms"] for record in ok if record["server_cpu_ms"] is not None]
    db = [record["db_cpu_ms"] for record in ok]
    both = [
        record["server_cpu_ms"] + record["db_cpu_ms"]
        for record in ok
        if record["server_cpu_ms"] is not None and record["db_cpu_ms"] is not None
    ]
    latencies = [record["latency_ms"] for record in ok]
    return {
        "mark": mark,
        "runs": [chosen[0]["run"], chosen[-1]["run"]] if chosen else None,
        "messages_mean": (
            round(statistics.mean(r["messages"] for r in chosen), 1) if chosen else None
        ),
        "samples": len(ok),
        "errors": len(chosen) - len(ok),
        "server_cpu_ms_median": _median(cpus),
        "server_cpu_ms_min": min(cpus) if cpus else None,
        "server_cpu_ms_max": max(cpus) if cpus else None,
        "db_cpu_ms_median": _median(db),
        "server_and_db_cpu_ms_median": _median(both),
        "p50_ms": percentile(latencies, 50),
    }


def summarise(
    records: dict[str, list[RunRecord]], marks: Sequence[int], window: int
) -> dict[str, list[dict[str, Any]]]:
    """Every target's marks."""
    return {
        name: [mark_summary(runs, mark, window) for mark in marks] for name, runs in records.items()
    }


async def thread_length(target: Target) -> int | None:
    """How many messages the target's thread holds now (None: the target cannot say)."""
    if target.thread_id is None:
        return None
    if isinstance(target, FloorInvoke):
        config: RunnableConfig = {"configurable": {"thread_id": target.thread_id}}
        state = await target.graph.aget_state(config)
        return len(state.values.get("messages", []))
    if isinstance(target, HttpTarget):
        url = f"{target.base}/api/threads/{target.thread_id}"
        response = await target.client.get(url, params={"limit": 1})
        response.raise_for_status()
        page = response.json()  # the newest message, and how many come before it
        return len(page["messages"]) + (page["older"]["count"] if page["older"] else 0)
    return None
