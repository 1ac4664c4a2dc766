"""`python -m bench.langgraph_compare` against us and `langgraph dev` (issue 30).

The one langgraph-sdk sequence (interrupt, resume, state, history, join, cancel, wait)
must go through on both servers without a failed step, and ours must show what the
sequence is about. Aegra is left out (`--no-aegra`): its venv is git-ignored and local.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ask_graph import QUESTION
from bench.fake_model import answer_text

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
RUN_S = 240  # two servers and a 5 s slow model call for the cancel, on a loaded machine


@pytest.mark.timeout(RUN_S + 30)
def test_the_sdk_sequence_runs_through_on_us_and_on_langgraph_dev_and_prints_the_differences(
    tmp_path: Path, postgres_admin_url: str
) -> None:
    out = tmp_path / "compare.json"
    argv = [sys.executable, "-m", "bench.langgraph_compare", "--no-aegra", f"--json={out}"]
    env = {**os.environ, "AGENT_TEST_POSTGRES_URL": postgres_admin_url}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_S)
    assert done.returncode == 0, done.stderr[-3000:]

    results = json.loads(out.read_text())
    assert set(results) == {"ours", "langgraph dev"}
    for server, steps in results.items():
        failed = {step: summary["error"] for step, summary in steps.items() if "error" in summary}
        assert not failed, (server, failed)
    ours = results["ours"]
    [asked] = ours["runs.stream (question)"]["interrupt_values"]
    assert asked["message"] == QUESTION
    assert ours["threads.get (waiting)"]["status"] == "interrupted"
    assert ours["threads.get_state (waiting)"]["next"] == ["tools"]
    assert ours["runs.stream (Command resume)"]["streamed_text"] == answer_text(20)
    assert ours["threads.get_state (answered)"]["messages"] == ["human", "ai", "tool", "ai"]
    assert ours["runs.create + runs.join"]["final_status"] == "success"
    assert ours["runs.cancel (slow model)"]["run_status"] == "interrupted"
    assert ours["runs.wait"]["messages"] == ["human", "ai", "tool", "ai"]
    assert "ours and langgraph dev: " in done.stdout
