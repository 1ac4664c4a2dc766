"""LangGraph's thread-scoped streaming protocol ("v2") against `react-agent serve`, on
both backends: @langchain/langgraph-sdk's own client of it from Node (js/v2_flow.mjs)
asks the weather agent, answers its question with `input.respond` and reads the answer
from the messages and values channels; and plain HTTP shows what a wrong command or
filter is told."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, error, hang, text, tool_call
from tests.langgraph_api.js_build import built_js_clients
from tests.langgraph_api.people import Served, served  # noqa: F401
from tests.service.conftest import API_KEY, Api, wait_until
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, and Node
NODE_S = 60.0
QUESTION = {"type": "input", "message": "哪个城市？", "placeholder": "北京"}


@pytest.fixture(scope="session")
def js_clients() -> Path:
    return built_js_clients()


def v2_flow(js: Path, server: ServerProcess) -> dict[str, Any]:
    """What `node v2_flow.mjs` saw, from its JSON output."""
    done = subprocess.run(
        ["node", "v2_flow.mjs", server.url, API_KEY, "weather", "查天气", "上海"],
        cwd=js,
        capture_output=True,
        text=True,
        timeout=NODE_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr + server.log_text[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout)
    return seen


def command(api: Api, thread_id: str, method: str, params: Any, **extra: Any) -> httpx.Response:
    body = {"id": 7, "method": method, "params": params, **extra}
    return api.http.post(f"/threads/{thread_id}/commands", json=body)


def asked_weather(api: Api, llm: ScriptedLLM) -> tuple[str, str]:
    """A thread whose weather question waits for its answer; (thread id, interrupt id)."""
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]
    started = command(
        api, thread_id, "run.start", {"assistant_id": "weather", "input": {"messages": ["查天气"]}}
    )
    assert started.status_code == 200, started.text
    assert started.json()["type"] == "success" and started.json()["result"]["run_id"]
    pending = wait_until(
        "the question", lambda: api.http.get(f"/api/threads/{thread_id}").json().get("interrupts")
    )
    return thread_id, pending[0]["id"]


def test_the_js_v2_client_pauses_on_the_question_answers_it_and_streams_the_answer(
    js_clients: Path, server: ServerProcess, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(
        tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海今天晴。"),
    )

    seen = v2_flow(js_clients, server)

    paused, resumed = seen["paused"], seen["resumed"]
    [asked] = [e["data"] for e in paused if e["method"] == "input.requested"]
    assert asked["payload"] == QUESTION
    assert paused[-1] == {**paused[-1], "method": "lifecycle"}
    assert paused[-1]["data"]["event"] == "interrupted"
    # The answer's text, as the messages channel streamed it, block by block (the client
    # may hand over the first run's blocks after the pause: it widens its subscription).
    deltas = [
        e["data"]["delta"]["text"]
        for e in resumed
        if e["method"] == "messages" and e["data"]["event"] == "content-block-delta"
        if e["data"]["delta"]["type"] == "text-delta"
    ]
    assert "".join(deltas) == "上海今天晴。"
    finished = {
        block.get("name", block["type"]): block
        for e in paused + resumed
        if e["method"] == "messages" and e["data"]["event"] == "content-block-finish"
        for block in [e["data"]["content"]]
    }
    assert finished["text"] == {"type": "text", "text": "上海今天晴。"}
    assert finished["ask_input"]["type"] == "tool_call"
    assert finished["ask_input"]["args"] == {"message": "哪个城市？", "placeholder": "北京"}
    assert finished["get_weather"]["args"] == {"location": "上海"}
    tools = [e["data"] for e in resumed if e["method"] == "tools"]
    assert [t["event"] for t in tools] == ["tool-started", "tool-finished"] * 2
    assert tools[0]["tool_name"] == "ask_input" and tools[-2]["tool_name"] == "get_weather"
    # The values end with the answer, and the state the client read says the same.
    final = [e["data"] for e in resumed if e["method"] == "values"][-1]["messages"]
    assert [m["type"] for m in final] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert final[2]["content"] == "用户回答：上海" and final[-1]["content"] == "上海今天晴。"
    assert resumed[-1]["method"] == "lifecycle" and resumed[-1]["data"]["event"] == "completed"
    assert seen["state"]["values"]["messages"][-1]["content"] == "上海今天晴。"
    # Every event's seq is its place in the thread: one each.
    seqs = [e["seq"] for e in paused + resumed]
    assert len(set(seqs)) == len(seqs)
    # One thread, two protocols: the page's API reads what the v2 client wrote.
    read_back = api.http.get(f"/api/threads/{seen['threadId']}").json()
    assert read_back["graphId"] == "weather" and read_back["interrupts"] == []
    assert read_back["messages"][-1]["content"] == "上海今天晴。"


def test_an_unknown_command_is_refused_with_422_and_a_message_naming_the_commands(
    api: Api, llm: ScriptedLLM
) -> None:
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]

    refused = command(api, thread_id, "thread.explode", {})

    assert refused.status_code == 422
    body = refused.json()
    assert body["type"] == "error" and body["id"] == 7 and body["error"] == "unknown_command"
    assert "run.start" in body["message"] and body["code"] == "unsupported"


def test_a_protocol_command_this_server_does_not_serve_is_refused_as_not_supported(
    api: Api,
) -> None:
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]

    refused = command(api, thread_id, "state.fork", {"checkpoint_id": "x"})

    assert refused.status_code == 422
    assert refused.json()["error"] == "not_supported"
    assert "state.fork" in refused.json()["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"method": "run.start", "params": {}},  # no id
        {"id": True, "method": "run.start", "params": {}},  # an id that is no integer
        {"id": 1, "params": {}},  # no method
        {"id": 1, "method": "run.start", "params": []},  # params no object
    ],
    ids=["no-id", "boolean-id", "no-method", "list-params"],
)
def test_a_body_that_is_no_command_is_refused_with_422(api: Api, body: dict[str, Any]) -> None:
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]

    refused = api.http.post(f"/threads/{thread_id}/commands", json=body)

    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_body" and refused.json()["detail"]


def test_run_start_without_an_assistant_or_with_an_unknown_one_is_refused_with_a_message(
    api: Api,
) -> None:
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]

    nameless = command(api, thread_id, "run.start", {"input": {"messages": ["你好"]}})
    unknown = command(
        api, thread_id, "run.start", {"assistant_id": "nope", "input": {"messages": ["你好"]}}
    )
    not_input = command(api, thread_id, "run.start", {"assistant_id": "weather", "input": 42})

    assert nameless.status_code == 422 and "assistant_id" in nameless.json()["message"]
    assert nameless.json()["error"] == "invalid_argument"
    assert unknown.status_code == 404 and "nope" in unknown.json()["message"]
    # A bare value answers a pending question; this thread has none.
    assert not_input.status_code == 422 and "input.messages" in not_input.json()["message"]


def test_an_answer_to_an_interrupt_not_pending_is_refused_and_the_right_one_resumes(
    api: Api, llm: ScriptedLLM
) -> None:
    thread_id, interrupt_id = asked_weather(api, llm)

    wrong = command(
        api,
        thread_id,
        "input.respond",
        {"namespace": [], "interrupt_id": "not-this-one", "response": "上海"},
    )
    llm.script(text("好的。"))
    right = command(
        api,
        thread_id,
        "input.respond",
        {"namespace": [], "interrupt_id": interrupt_id, "response": "上海"},
    )

    assert wrong.status_code == 409 and wrong.json()["error"] == "no_such_interrupt"
    assert "not-this-one" in wrong.json()["message"]
    assert right.status_code == 200 and right.json() == {"type": "success", "id": 7, "result": {}}
    final = wait_until(
        "the answer",
        lambda: (
            (m := api.http.get(f"/api/threads/{thread_id}").json()["messages"])
            and m[-1].get("content") == "好的。"
            and m
        ),
    )
    assert final[-2]["content"] == "用户回答：上海"


def test_a_command_or_stream_on_an_unknown_thread_is_404(api: Api) -> None:
    respond = command(
        api, "t-nowhere", "input.respond", {"namespace": [], "interrupt_id": "x", "response": 1}
    )
    stream = api.http.post("/threads/t-nowhere/stream/events", json={"channels": ["values"]})

    assert respond.status_code == 404 and respond.json()["message"]
    assert stream.status_code == 404 and stream.json()["code"] == "unknown_thread"


@pytest.mark.parametrize(
    "subscription",
    [
        {},
        {"channels": []},
        {"channels": ["values", "gossip"]},
        {"channels": ["values"], "since": -1},
        {"channels": ["values"], "since": True},
        {"channels": ["values"], "depth": "deep"},
    ],
    ids=[
        "no-channels",
        "empty-channels",
        "unknown-channel",
        "negative-since",
        "boolean-since",
        "bad-depth",
    ],
)
def test_a_bad_subscription_filter_is_refused_with_422_naming_what_is_wrong(
    api: Api, subscription: dict[str, Any]
) -> None:
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]

    refused = api.http.post(f"/threads/{thread_id}/stream/events", json=subscription)

    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_body" and refused.json()["detail"]


def sse_events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The events of an open SSE response, as they come."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


def without_time(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "params": {k: v for k, v in event["params"].items() if k != "timestamp"}}


def test_a_stream_sends_only_the_channels_asked_and_since_skips_what_was_received(
    api: Api, llm: ScriptedLLM
) -> None:
    thread_id, _ = asked_weather(api, llm)
    url = f"/threads/{thread_id}/stream/events"

    with api.http.stream("POST", url, json={"channels": ["lifecycle", "input"]}) as first:
        seen: list[dict[str, Any]] = []
        for event in sse_events(first):
            seen.append(event)
            if event["method"] == "lifecycle" and event["params"]["data"]["event"] == "interrupted":
                break
    since = seen[0]["seq"]
    with api.http.stream(
        "POST", url, json={"channels": ["lifecycle", "input"], "since": since}
    ) as again:
        replayed: list[dict[str, Any]] = []
        for event in sse_events(again):
            replayed.append(event)
            if event["method"] == "lifecycle" and event["params"]["data"]["event"] == "interrupted":
                break

    assert [e["method"] for e in seen] == ["lifecycle", "input.requested", "lifecycle"]
    assert seen[1]["params"]["data"]["payload"] == QUESTION
    # The same events again (each event's timestamp is when it was sent: the log has none).
    assert [without_time(e) for e in replayed] == [without_time(e) for e in seen[1:]]


def test_a_stream_opened_before_the_next_run_follows_it_live(api: Api, llm: ScriptedLLM) -> None:
    thread_id, interrupt_id = asked_weather(api, llm)
    llm.script(hang(30, partial="上海"))
    url = f"/threads/{thread_id}/stream/events"

    with api.http.stream("POST", url, json={"channels": ["lifecycle", "messages"]}) as live:
        events = sse_events(live)
        assert next(events)["params"]["data"]["event"] == "running"  # the paused run
        answered = command(
            api,
            thread_id,
            "input.respond",
            {"namespace": [], "interrupt_id": interrupt_id, "response": "上海"},
        )
        assert answered.status_code == 200, answered.text
        methods = []
        for event in events:
            methods.append((event["method"], event["params"]["data"].get("event")))
            delta = event["params"]["data"].get("delta") or {}
            if delta.get("type") == "text-delta":
                assert delta["text"] == "上海"
                break

    # The paused run to its pause, then the answered one as it streams.
    paused_at = methods.index(("lifecycle", "interrupted"))
    assert ("lifecycle", "running") in methods[paused_at:]
    assert methods[-1] == ("messages", "content-block-delta")
    runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
    api.http.post(f"/threads/{thread_id}/runs/{runs[0]['runId']}/cancel")


def until_lifecycle(events: Iterator[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    """The events up to the first lifecycle event of `phase`, that one included."""
    seen = []
    for event in events:
        seen.append(event)
        if event["method"] == "lifecycle" and event["params"]["data"]["event"] == phase:
            return seen
    raise AssertionError(f"the stream ended before {phase}: {seen}")


def test_a_failed_run_ends_with_a_failed_lifecycle_naming_the_error_and_state_get_reads_it(
    api: Api, llm: ScriptedLLM
) -> None:
    llm.script(error(400))
    thread_id = api.http.post("/threads", json={}).json()["thread_id"]
    started = command(
        api, thread_id, "run.start", {"assistant_id": "weather", "input": {"messages": ["你好"]}}
    )
    assert started.status_code == 200, started.text
    url = f"/threads/{thread_id}/stream/events"

    with api.http.stream("POST", url, json={"channels": ["lifecycle", "values"]}) as stream:
        seen = until_lifecycle(sse_events(stream), "failed")
    state = command(api, thread_id, "state.get", {"namespace": []})

    assert seen[0]["params"]["data"] == {"event": "running", "graph_name": "weather"}
    failed = seen[-1]["params"]["data"]
    assert failed["code"] == "model_error" and "400" in failed["error"], failed
    assert [m["content"] for m in seen[1]["params"]["data"]["messages"]] == ["你好"]
    assert state.status_code == 200
    result = state.json()["result"]
    assert [m["content"] for m in result["values"]["messages"]] == ["你好"]
    assert result["checkpoint"]["id"]


def test_another_users_thread_is_404_to_its_commands_and_streams(
    served: Served,  # noqa: F811
    llm: ScriptedLLM,
) -> None:
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    url = served.server.url
    alice, bob = (
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0)
        for key in (served.alice, served.bob)
    )
    with alice, bob:
        thread_id = alice.post("/threads", json={}).json()["thread_id"]
        start = {"assistant_id": "weather", "input": {"messages": ["查天气"]}}
        mine = alice.post(
            f"/threads/{thread_id}/commands", json={"id": 1, "method": "run.start", "params": start}
        )
        theirs = bob.post(
            f"/threads/{thread_id}/commands", json={"id": 1, "method": "run.start", "params": start}
        )
        peek = bob.post(f"/threads/{thread_id}/stream/events", json={"channels": ["values"]})
        read = bob.post(
            f"/threads/{thread_id}/commands", json={"id": 2, "method": "state.get", "params": {}}
        )

    assert mine.status_code == 200, mine.text
    assert theirs.status_code == 404 and theirs.json()["code"] == "unknown_thread"
    assert peek.status_code == 404 and read.status_code == 404
