"""The benchmark harness end to end, with minimal counts (no langgraph dev, no soak, no
thread growth: `test_growth.py` runs that phase).

The baseline server is the checkout's HEAD (`--base=HEAD`): every clone has it. The
PostgreSQL target gets the suite's server (`tests.support.postgres`), as `make bench` finds one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import render

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
TARGETS = (
    "floor/ainvoke",
    "floor/astream",
    "floor/model-only",
    "ours/agui",
    "ours-pg/agui",
    "ours/chat",
    "base/agui",
    "base/chat",
)
BENCH_S = 180  # the whole harness, minimal counts (its --max-minutes=2, plus start-up)
VERDICTS = {"met", "**not met**", "not measured"}


@pytest.mark.timeout(BENCH_S + 30)
def test_a_minimal_run_prints_the_targets_table_and_keeps_well_formed_raw_json(
    tmp_path: Path, postgres_admin_url: str
) -> None:
    raw_dir = tmp_path / "raw"
    report = tmp_path / "RESULTS.md"
    argv = [
        sys.executable,
        "-m",
        "bench",
        "--latencies=0",
        "--warmup=1",
        "--seq-runs=3",
        "--clients=1,2",
        "--batch-runs=2,2",
        "--rounds=1",
        "--cold-starts=1",
        "--rss-marks=2,8",
        "--soak-sessions=0",
        "--no-peer",
        "--base=HEAD",
        "--metrics-pairs=1",
        "--metrics-runs=3",
        "--workers-clients=2",
        "--workers-runs=4",
        "--no-growth",
        "--no-langgraph",
        "--max-minutes=2",
        f"--raw-dir={raw_dir}",
        f"--results={report}",
    ]
    env = {**os.environ, "AGENT_TEST_POSTGRES_URL": postgres_admin_url}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BENCH_S)
    assert done.returncode == 0, done.stderr[-3000:]

    [raw_file] = raw_dir.glob("*.json")
    results = json.loads(raw_file.read_text())
    assert results["meta"]["machine"]["loop_ns"] > 0
    sequential = results["latencies"]["0"]["sequential"]
    assert set(sequential) == set(TARGETS)
    for name, row in sequential.items():
        assert (row["runs"], row["errors"]) == (3, 0), (name, row["error_examples"])
        assert row["p50_ms"] > 0 and row["p99_ms"] >= row["p50_ms"]
        streams = name not in {"floor/ainvoke", "ours/chat", "base/chat"}
        assert (row["ttft_p50_ms"] is not None) == streams
    throughput = results["latencies"]["0"]["throughput"]
    assert all(throughput[name]["2"]["runs_per_s"] > 0 for name in TARGETS)
    assert results["cold_start"]["ours"][0]["first_run_ok"] is True
    [pair] = results["metrics_cost"]["latencies"]["0"]["pairs"]
    assert pair["ratio"] > 0 and pair["on"]["errors"] == pair["off"]["errors"] == 0
    assert set(results["rss"]["ours"]) == {"2", "8"}
    # The workers comparison's runs go through the lean client (bench.wire): all checked.
    workers = results["workers"]["throughput"]
    assert set(workers) == {
        "floor/ainvoke",
        "ours-w1/agui",
        "ours-w1/chat",
        "ours-w2/agui",
        "ours-w2/chat",
    }
    for name, row in workers.items():
        assert (row["runs"], row["errors"]) == (4, 0), (name, row)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    base = results["meta"]["base"]
    assert (base["ref"], base["commit"]) == ("HEAD", head.stdout.strip())
    # The base server ran the export's code, not the checkout's.
    assert {"app", "app.main", "graphs", "tools", "prompts", "bench"} <= set(base["imports"])
    assert not any(Path(path).is_relative_to(ROOT) for path in base["imports"].values())

    assert report.read_text() == done.stdout == render(results)
    lines = done.stdout.splitlines()
    table = lines[lines.index("## Targets (issue 7)") + 4 :]
    rows = table[: table.index("")]
    assert len(rows) == 16
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 5 and cells[4] in VERDICTS, row
    assert "| ours/agui |" in done.stdout and "| base/agui |" in done.stdout
    budget = lines[lines.index("## Run log budget (issue 11): ours vs base") + 6 :]
    rows = budget[: budget.index("")]
    assert len(rows) == 3
    verdicts = [[cell.strip() for cell in row.strip("|").split("|")][5] for row in rows]
    # Measured at 0 ms only, with 1 and 2 clients: the 10-client rate is not measured.
    assert verdicts[0] in VERDICTS - {"not measured"}
    assert verdicts[1] in VERDICTS - {"not measured"}
    assert verdicts[2] == "not measured"
