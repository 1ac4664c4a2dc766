"""`langgraph dev` (Studio's server) serves the weather graph from langgraph.json, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import env_for_subprocess
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"
# At INFO, uvicorn logs the port it really bound for `--port 0` (the banner only says 0).
DEV_ARGS = ("dev", "--no-browser", "--no-reload", "--port", "0", "--server-log-level", "INFO")


@pytest.fixture
def dev_server(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path, tmp_path: Path
) -> Iterator[str]:
    if not LANGGRAPH.exists():
        pytest.fail("langgraph-cli is not installed: run `make install`")
    # A copy of the project keeps the server's .langgraph_api/ out of the work tree.
    project = tmp_path / "project"
    project.mkdir()
    for name in ("langgraph.json", "graphs", "tools", "prompts", "app"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("web"))
        else:
            shutil.copy(source, project / name)
    env = env_for_subprocess(llm, meteo, data_dir)
    env["PYTHONPATH"] = str(project) + os.pathsep + env.get("PYTHONPATH", "")
    process = ServerProcess(
        env,
        command=[str(LANGGRAPH), *DEV_ARGS],
        cwd=project,
        health="/ok",
        startup_s=60,
    )
    try:
        yield process.url
    finally:
        process.stop()


def test_langgraph_dev_serves_weather_with_interrupt_and_resume(
    dev_server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    with httpx.Client(base_url=dev_server, timeout=30) as client:
        thread = client.post("/threads", json={}).json()["thread_id"]
        llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
        run = client.post(
            f"/threads/{thread}/runs/wait",
            json={
                "assistant_id": "weather",
                "input": {"messages": [{"role": "user", "content": "查天气"}]},
            },
        )
        assert run.status_code == 200, run.text
        [question] = run.json()["__interrupt__"]
        assert question["value"] == {
            "type": "input",
            "message": "哪个城市？",
            "placeholder": "北京",
        }

        llm.script(tool_call("get_weather", {"location": "北京"}), text("北京晴。"))
        resumed = client.post(
            f"/threads/{thread}/runs/wait",
            json={
                "assistant_id": "weather",
                "command": {"resume": {question["id"]: {"value": "北京"}}},
            },
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["messages"][-1]["content"] == "北京晴。"
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("39.9075", "116.39723")
    ]


def readme_sdk_snippet() -> str:
    """The README's LangGraph SDK example, as written there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    studio = readme[readme.index("### LangGraph Studio") :]
    return studio[studio.index("```python\n") + len("```python\n") : studio.index("\n```\n")]


def test_the_readme_sdk_example_runs_as_written_against_langgraph_dev(
    dev_server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    snippet = readme_sdk_snippet()
    written = 'URL = "http://127.0.0.1:2024"'
    assert written in snippet  # the one place the example names the port
    llm.script(
        tool_call("ask_input", {"message": "请问要查询哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "北京"}),
        text("北京今天晴。"),
    )
    done = subprocess.run(
        [sys.executable, "-c", snippet.replace(written, f'URL = "{dev_server}"')],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["请问要查询哪个城市？", "北京今天晴。"]
