"""The thread-growth phase (issue 26): `python -m bench --growth`, its marks, its profile."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.growth import MESSAGES_PER_RUN, RunRecord, runs_needed, window_runs
from bench.plan import plan_from_args
from bench.profile import OTHER, _component
from bench.report import render

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {"floor/ainvoke", "ours/agui", "ours-pg/agui", "ours/chat"}
PY_SPY = Path(sys.executable).parent / "py-spy"


def _records(runs: int) -> list[RunRecord]:
    return [
        {"run": k, "messages": (k - 1) * MESSAGES_PER_RUN, "ok": True} for k in range(1, runs + 1)
    ]


def test_a_mark_is_the_runs_whose_thread_length_is_nearest_it_without_the_first_run() -> None:
    records = _records(runs_needed([10, 40], 4))

    assert [r["messages"] for r in window_runs(records, 40, 4)] == [32, 36, 40, 44]
    # The first run creates the thread: a mark near the start takes the runs after it.
    assert [r["run"] for r in window_runs(records, 4, 4)] == [2, 3, 4, 5]


def test_the_threads_grow_past_the_last_mark_by_half_a_window() -> None:
    runs = runs_needed([10, 100, 400, 800], 6)

    assert (runs - 1) * MESSAGES_PER_RUN == 800 + 3 * MESSAGES_PER_RUN
    assert [r["messages"] for r in window_runs(_records(runs), 800, 6)] == [
        788,
        792,
        796,
        800,
        804,
        808,
    ]


def test_growth_alone_runs_no_other_phase_and_the_full_plan_ends_with_it() -> None:
    alone = plan_from_args(["--growth"])
    full = plan_from_args([])

    assert (alone.mode, alone.growth_only, alone.results_md) == ("growth", True, None)
    assert full.growth and not full.growth_only and full.growth_marks == (10, 100, 400, 800)
    assert not plan_from_args(["--no-growth"]).growth


def test_a_growth_run_grows_one_thread_per_target_and_reports_each_mark(
    tmp_path: Path, postgres_admin_url: str
) -> None:
    argv = [
        sys.executable,
        "-m",
        "bench",
        "--growth",
        "--growth-marks=4,12",
        "--growth-window=2",
        "--warmup=1",
        "--max-minutes=3",
        f"--raw-dir={tmp_path}",
    ]
    env = {**os.environ, "AGENT_TEST_POSTGRES_URL": postgres_admin_url}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]

    [raw_file] = tmp_path.glob("*-growth.json")
    results = json.loads(raw_file.read_text())
    phase = results["growth"]
    assert "latencies" not in results or not results["latencies"]  # no other phase ran
    runs = phase["runs_per_thread"]
    assert set(phase["runs"]) == set(phase["summary"]) == TARGETS
    for name, records in phase["runs"].items():
        assert [r["ok"] for r in records] == [True] * runs, (name, records)
        assert all(r["server_cpu_ms"] > 0 for r in records), name
    # Every run continued its target's one thread: the runs' messages are all there.
    assert phase["final_messages"] == dict.fromkeys(TARGETS, runs * MESSAGES_PER_RUN)
    for name, marks in phase["summary"].items():
        assert [m["mark"] for m in marks] == [4, 12]
        assert [m["runs"] for m in marks] == [[2, 3], [3, 4]], name
        assert all(m["samples"] == 2 and m["server_cpu_ms_median"] > 0 for m in marks), name
    assert all(m["db_cpu_ms_median"] is not None for m in phase["summary"]["ours-pg/agui"])

    assert done.stdout == render(results)
    assert "## Targets (issue 7)" not in done.stdout
    # In a full run's report the same section comes last.
    full = {**results, "meta": {**results["meta"], "plan": {**results["meta"]["plan"]}}}
    full["meta"]["plan"].update(growth_only=False, mode="full")
    assert render(full).split("\n## ")[-1] == done.stdout.split("\n## ")[-1]
    lines = done.stdout.splitlines()
    table = lines[lines.index("| target | 4 msgs | 12 msgs | 12 / 4 |") + 2 :]
    rows = table[: table.index("")]
    assert [row.split("|")[1].strip() for row in rows] == [
        "floor/ainvoke",
        "ours/agui",
        "ours-pg/agui",
        "ours-pg/agui + backends",
        "ours/chat",
    ]
    verdicts = [line for line in lines if line.startswith("| server CPU per run, 12 vs 4")]
    assert len(verdicts) == 2 and all(
        re.search(r"\| (met|\*\*not met\*\*) \|$", v) for v in verdicts
    )


def test_decoding_is_charged_to_decoding_wherever_it_is_called_from() -> None:
    # As py-spy names them: `Class.method`, `outer.<locals>.inner`.
    stack = [
        "app/core/runs/service.py:AgentService._execute",
        "app/core/runs/prepare.py:prepare_run",
        "langgraph/pregel/main.py:Pregel.aget_state",
        "langgraph/checkpoint/serde/jsonplus.py:JsonPlusSerializer.loads_typed",
        "langgraph/checkpoint/serde/jsonplus.py:_create_msgpack_ext_hook.<locals>.ext_hook",
        "pydantic/main.py:BaseModel.__init__",
    ]

    assert _component(stack).startswith("checkpoint decoding")
    assert _component(stack[:3]) == "service: prepare_run (but its decoding)"


def test_outside_any_scope_a_sample_goes_to_its_innermost_layer() -> None:
    stack = [
        "app/core/runs/service.py:AgentService._execute",
        "app/core/runs/events.py:stream_run",
        "langgraph/pregel/main.py:Pregel.astream",
        "httpx2/_client.py:AsyncClient.send",
    ]

    assert _component(stack).startswith("model response")
    assert _component(stack[:2]) == "service: event transformer (events.py)"
    # The process's root frames hold every stack: the loop's own time is no layer's.
    loop = ["app/main.py:_serve", "uvicorn/server.py:Server.run", "asyncio/runners.py:Runner.run"]
    assert _component(loop) == OTHER


@pytest.mark.skipif(not PY_SPY.exists(), reason="py-spy is not installed")
def test_a_profile_on_grown_threads_records_the_runs_at_that_length_by_component(
    tmp_path: Path,
) -> None:
    argv = [
        sys.executable,
        "-m",
        "bench.profile",
        "--thread-messages=12",
        "--runs=2",
        "--clients=1",
        f"--raw-dir={tmp_path}",
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]

    # Grown to 12 - 2 x 2 = 8 messages: the two recorded runs start at 8 and 12.
    assert "each client on its own thread, runs starting at 8-12 messages" in done.stdout
    assert "2 runs in" in done.stdout
    lines = done.stdout.splitlines()
    start = lines.index("| share | ms/run | component |") + 2
    rows = lines[start : lines.index("", start)]
    shares = [float(row.split("|")[1].strip().rstrip("%")) for row in rows]
    assert abs(sum(shares) - 100) < 1
    [stacks] = tmp_path.glob("profile-*.txt")
    assert stacks.read_text().strip()
