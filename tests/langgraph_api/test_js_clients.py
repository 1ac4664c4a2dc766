"""@langchain/langgraph-sdk, LangGraph's JavaScript client, against `react-agent serve`:
a Node program (js/sdk_flow.mjs) asks the weather agent, answers its question with a
resume command and reads the thread back, on both backends; and the join it sends."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.langgraph_api.js_build import built_js_clients
from tests.service.conftest import API_KEY, Api
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, and Node
NODE_S = 60.0
WAIT_S = 30.0


@pytest.fixture(scope="session")
def js_clients() -> Path:
    return built_js_clients()


def sdk_flow(js: Path, server: ServerProcess) -> dict[str, Any]:
    """What `node sdk_flow.mjs` saw at each step, from its JSON output."""
    done = subprocess.run(
        ["node", "sdk_flow.mjs", server.url, API_KEY],
        cwd=js,
        capture_output=True,
        text=True,
        timeout=NODE_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def of(parts: list[dict[str, Any]], event: str) -> list[Any]:
    return [part["data"] for part in parts if part["event"] == event]


def test_the_js_sdk_pauses_on_the_question_resumes_it_with_a_command_and_reads_the_thread(
    js_clients: Path, server: ServerProcess, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天晴。"),
        text("不客气。"),
    )

    seen = sdk_flow(js_clients, server)

    asked, answered = seen["asked"], seen["answered"]
    thread_id = seen["threadId"]
    assert asked[0]["event"] == "metadata" and asked[-1]["event"] == "end"
    assert {"values", "messages", "updates"} <= {part["event"] for part in asked}
    assert all(part["id"] is not None for part in asked)
    # The SDK read the run's address from Content-Location as the stream began.
    assert seen["created"] == [{"run_id": asked[0]["data"]["run_id"], "thread_id": thread_id}]
    [interrupt] = next(u["__interrupt__"] for u in of(asked, "updates") if "__interrupt__" in u)
    assert interrupt["value"] == {"type": "input", "message": "哪个城市？", "placeholder": "北京"}
    assert seen["waiting"]["status"] == "interrupted"
    assert [i["id"] for pending in seen["waiting"]["interrupts"].values() for i in pending] == [
        interrupt["id"]
    ]

    tokens = "".join(
        chunk["content"]
        for chunk, _ in of(answered, "messages")
        if chunk["type"] == "AIMessageChunk"
    )
    assert tokens == "上海今天晴。"
    final = of(answered, "values")[-1]["messages"]
    assert [m["type"] for m in final] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert final[2]["content"] == "用户回答：上海"
    assert [next(iter(update)) for update in of(answered, "updates")] == [
        "tools",
        "agent",
        "tools",
        "agent",
    ]
    assert answered[-1]["event"] == "end"

    state = seen["state"]
    assert [m["type"] for m in state["messages"]] == [m["type"] for m in final]
    assert state["messages"][-1]["content"] == "上海今天晴。"
    assert state["next"] == [] and state["interrupts"] == []
    history = seen["history"]
    steps = [s["step"] for s in history]
    assert steps == sorted(steps, reverse=True) and len(steps) >= 5
    assert history[0]["checkpointId"] == state["checkpointId"]
    assert [s["parentId"] for s in history[:-1]] == [s["checkpointId"] for s in history[1:]]
    assert seen["idle"] == "idle"

    assert seen["background"]["status"] in ("pending", "running")
    assert seen["joined"][-2:] == [
        {"type": "human", "content": "谢谢"},
        {"type": "ai", "content": "不客气。"},
    ]
    assert seen["finished"] == "success"
    # One thread, two protocols: the page's API reads what the JS client wrote.
    read_back = api.http.get(f"/api/threads/{thread_id}").json()
    assert read_back["graphId"] == "weather" and read_back["interrupts"] == []
    assert read_back["messages"][-1]["content"] == "不客气。"


def test_a_join_asked_to_cancel_on_disconnect_cancels_the_run_when_its_caller_leaves(
    server: ServerProcess, llm: ScriptedLLM, api: Api
) -> None:
    # The JS SDK's `runs.join(..., {cancelOnDisconnect: true})`; it sends `0` otherwise.
    llm.script(hang(30, partial="我"))
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]
    run_id = api.http.post(
        f"/threads/{thread_id}/runs",
        json={"assistant_id": "weather", "input": {"messages": ["慢慢说"]}},
    ).json()["run_id"]
    llm.wait_for_requests(1)
    host, port = server.url.removeprefix("http://").rsplit(":", 1)

    with socket.create_connection((host, int(port))) as caller:
        caller.sendall(
            f"GET /threads/{thread_id}/runs/{run_id}/join?cancel_on_disconnect=true HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\nAuthorization: Bearer {API_KEY}\r\n\r\n".encode()
        )
    # The caller has left before the run's end: the run ends, cancelled.

    deadline = time.monotonic() + WAIT_S
    while (status := api.http.get(f"/api/threads/{thread_id}/runs").json()[0]["status"]) in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline, (status, server.log_text()[-3000:])
        time.sleep(0.05)  # polling the run's record, not waiting a result
    assert status == "cancelled"
