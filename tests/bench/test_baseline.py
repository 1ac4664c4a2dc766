"""The baseline (issue 11): the ref, the import check, the plan, and the budget table."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.baseline import (
    BASELINE_REF,
    MARKER,
    BaselineError,
    check_imports,
    reported_imports,
    resolve,
)
from bench.plan import plan_from_args
from bench.report import BUDGET_LIMIT, budget, render

ROOT = Path(__file__).resolve().parents[2]


def _shallow() -> bool:
    done = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() == "true"


@pytest.mark.skipif(_shallow(), reason="a shallow clone lacks the baseline commit")
@pytest.mark.processes  # git
def test_the_pinned_baseline_is_a_commit_of_this_repository() -> None:
    commit, subject = resolve(BASELINE_REF)
    assert commit == BASELINE_REF
    assert subject


@pytest.mark.processes  # git
def test_an_unknown_ref_is_refused_with_the_way_out() -> None:
    with pytest.raises(BaselineError, match="--no-base"):
        resolve("no-such-ref-for-the-bench")


def test_a_module_from_outside_the_export_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "src"
    inside = {name: str(src / name) for name in ("app", "graphs", "tools", "prompts", "bench")}
    check_imports(inside, src)
    with pytest.raises(BaselineError, match=r"app\.core"):
        check_imports({**inside, "app.core": str(ROOT / "app" / "core" / "__init__.py")}, src)
    with pytest.raises(BaselineError, match="prompts"):
        check_imports({k: v for k, v in inside.items() if k != "prompts"}, src)


def test_the_imports_are_read_from_the_server_log() -> None:
    log = f'INFO starting\n{MARKER} {{"app": "/x/app/__init__.py"}}\nINFO up\n'
    assert reported_imports(log) == {"app": "/x/app/__init__.py"}
    with pytest.raises(BaselineError, match="did not report"):
        reported_imports("INFO starting\n")


def test_quick_and_full_plans_serve_the_baseline() -> None:
    full, quick = plan_from_args([]), plan_from_args(["--quick"])
    assert (full.base_ref, full.base_endpoints) == (BASELINE_REF, ("agui", "chat"))
    assert (quick.base_ref, quick.base_endpoints) == (BASELINE_REF, ("agui",))
    other = plan_from_args(["--base", "HEAD~3"])
    assert (other.base_ref, other.mode) == ("HEAD~3", "full")
    off = plan_from_args(["--no-base"])
    assert (off.base_ref, off.mode, off.results_md) == (None, "custom", None)


def _results(ours: tuple[float, float, float], base: tuple[float, float, float]) -> dict:
    def seq(p50: float, cpu: float) -> dict:
        return {
            "p50_ms": p50,
            "p99_ms": p50,
            "ttft_p50_ms": None,
            "server_cpu_ms_per_run": cpu,
            "client_cpu_ms_per_run": 1.0,
            "errors": 0,
        }

    def rate(runs_per_s: float) -> dict:
        return {"10": {"runs_per_s": runs_per_s, "errors": 0}}

    return {
        "meta": {
            "date": "2026-12-01T00:00:00+00:00",
            "machine": {"cpu": "cpu", "cores": 2, "kernel": "k", "python": "3.11", "loadavg": []},
            "plan": {"mode": "quick", "clients": [10]},
            "base": {"ref": "HEAD", "commit": "0123456789abcdef", "subject": "before"},
        },
        "latencies": {
            "0": {"sequential": {"ours/agui": seq(*ours[:2]), "base/agui": seq(*base[:2])}},
            "50": {
                "throughput": {
                    "ours/agui": rate(ours[2]),
                    "base/agui": rate(base[2]),
                }
            },
        },
    }


def test_the_budget_is_how_many_times_worse_ours_is() -> None:
    # p50 exactly at the limit, CPU just over it, throughput 1.25x worse (base / ours).
    rows = budget(_results(ours=(22.0, 27.6, 32.0), base=(20.0, 25.0, 40.0)))
    assert [row.ratio for row in rows] == pytest.approx([1.10, 1.104, 1.25])
    assert [row.met for row in rows] == [True, False, False]
    faster = budget(_results(ours=(18.0, 20.0, 44.0), base=(20.0, 25.0, 40.0)))
    assert all(row.met for row in faster)
    assert BUDGET_LIMIT == 1.10


def test_the_report_has_the_budget_table() -> None:
    text = render(_results(ours=(22.0, 27.6, 32.0), base=(20.0, 25.0, 40.0)))
    lines = text.splitlines()
    start = lines.index("## Run log budget (issue 11): ours vs base")
    assert "0123456789ab" in lines[start + 2]
    assert lines[start + 6 : start + 9] == [
        "| p50 ms at 0 ms (ours / base) | 22.0 | 20.0 | 1.100x | <= 1.10x | met |",
        "| server CPU ms/run at 0 ms (ours / base) | 27.6 | 25.0 | 1.104x | <= 1.10x "
        "| **not met** |",
        "| runs/s, 10 clients at 50 ms (base / ours) | 32.0 | 40.0 | 1.250x | <= 1.10x "
        "| **not met** |",
    ]
