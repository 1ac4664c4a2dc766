"""A pending question survives SIGKILL: a new process resumes it from AGENT_DB."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import env_for_subprocess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]


def test_a_killed_process_leaves_a_question_a_new_process_can_answer(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path
) -> None:
    env = env_for_subprocess(llm, meteo, data_dir)
    command = [sys.executable, "-m", "tests.graphs.weather_process"]
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    first = subprocess.Popen(
        [*command, "ask", "t-kill", "查天气"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None
    pending = json.loads(first.stdout.readline())
    assert pending["value"]["type"] == "input"
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=10) == -signal.SIGKILL

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天多云。"))
    second = subprocess.run(
        [*command, "answer", "t-kill", "上海"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(second.stdout.splitlines()[-1]) == {"answer": "上海今天多云。"}
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("31.22222", "121.45806")
    ]
