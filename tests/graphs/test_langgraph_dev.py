"""`langgraph dev` (Studio's server) serves the weather graph from langgraph.json, offline."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.doubles.env import env_for_subprocess
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = ROOT / ".venv" / "bin" / "langgraph"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
    port = free_port()
    env = env_for_subprocess(llm, meteo, data_dir)
    env["PYTHONPATH"] = str(project) + os.pathsep + env.get("PYTHONPATH", "")
    log = (tmp_path / "langgraph-dev.log").open("w")
    process = subprocess.Popen(
        [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, (tmp_path / "langgraph-dev.log").read_text()[-3000:]
        try:
            if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "langgraph dev did not become healthy in 60 s"
        time.sleep(0.2)  # polling interval while waiting for the server, not a wait for a result
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


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
