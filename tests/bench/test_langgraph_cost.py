"""`python -m bench.langgraph_cost` end to end with minimal counts (issue 30).

Ours on SQLite and on PostgreSQL, through `runs/wait`, `runs/stream` and AG-UI, and
`serve --workers 2` on PostgreSQL through both LangGraph routes, every run's answer
checked by the harness. Aegra is pointed at a venv that does not exist, so the test
never depends on the git-ignored `.venv-aegra`: the report must say why Aegra is missing.
`langgraph dev` is left out (the main smoke test leaves it out too: it is slow to start).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
RUN_S = 240  # three servers, one latency, minimal counts, on a loaded 2-core machine
KINDS = ("agui", "lg-wait", "lg-stream")
TARGETS = {f"{family}/{kind}" for family in ("ours", "ours-pg") for kind in KINDS} | {
    "ours-pg-w2/lg-wait",
    "ours-pg-w2/lg-stream",
}


@pytest.mark.timeout(RUN_S + 30)
def test_a_minimal_run_measures_both_langgraph_routes_beside_agui_and_says_why_aegra_is_missing(
    tmp_path: Path, postgres_admin_url: str
) -> None:
    missing_venv = tmp_path / "no-aegra-venv"
    argv = [
        sys.executable,
        "-m",
        "bench.langgraph_cost",
        "--latencies=0",
        "--warmup=1",
        "--seq-runs=2",
        "--rounds=1",
        "--clients=1,2",
        "--batch-runs=2,2",
        "--no-peer",
        f"--aegra-venv={missing_venv}",
        f"--raw-dir={tmp_path}",
    ]
    env = {**os.environ, "AGENT_TEST_POSTGRES_URL": postgres_admin_url}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_S)
    assert done.returncode == 0, done.stderr[-3000:]

    [raw] = tmp_path.glob("*-langgraph.json")
    results = json.loads(raw.read_text())
    sequential = results["latencies"]["0"]["sequential"]
    assert set(sequential) == TARGETS
    for name, row in sequential.items():
        assert (row["runs"], row["errors"]) == (2, 0), (name, row["error_examples"])
        assert row["server_cpu_ms_median"] > 0
        assert (row["ttft_p50_ms"] is not None) == (not name.endswith("lg-wait"))
    throughput = results["latencies"]["0"]["throughput"]
    assert all(throughput[name]["2"]["errors"] == 0 for name in TARGETS)
    assert all(throughput[name]["2"]["runs_per_s"] > 0 for name in TARGETS)
    # The whole machine's CPU, what the report weighs a target's CPU against.
    assert all(throughput[name]["2"]["machine_cpu_ms_per_run"] > 0 for name in TARGETS)
    assert str(missing_venv) in results["meta"]["aegra"]["missing"]
    assert f"Aegra not measured: no Aegra venv at {missing_venv}" in done.stdout
    assert "| runs/s at 2: ours/agui / ours/lg-stream |" in done.stdout
    assert "| ours-pg/lg-wait vs ours-pg/agui: p50 |" in done.stdout
