"""AG-UI runs over SSE against a real `react-agent serve` process and the doubles."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.core.runs.prepare import CALL_ABANDONED
from tests.doubles.llm import ScriptedLLM, call, error, hang, text, tool_call, tool_calls
from tests.doubles.open_meteo import HANG_CITY
from tests.service.conftest import (
    API_KEY,
    OPENAI_SECRET,
    Api,
    Stream,
    answer,
    parse_sse,
    run_body,
)
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def outline(stream: Stream) -> list[tuple[Any, ...]]:
    """The run as (type, key field) pairs, deltas of one message or call joined."""
    out: list[tuple[Any, ...]] = []
    for event in stream.events:
        kind = event["type"]
        if kind in ("TOOL_CALL_ARGS", "TEXT_MESSAGE_CONTENT"):
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + event["delta"])
            else:
                out.append((kind, event["delta"]))
        elif kind == "RUN_STARTED":
            out.append((kind, event["threadId"], event["runId"]))
        elif kind in ("STEP_STARTED", "STEP_FINISHED"):
            out.append((kind, event["stepName"]))
        elif kind == "TOOL_CALL_START":
            out.append((kind, event["toolCallName"]))
        elif kind in ("TOOL_CALL_RESULT", "TEXT_MESSAGE_START"):
            out.append((kind, event["role"]))
        elif kind == "RUN_FINISHED":
            out.append((kind, event["outcome"]["type"]))
        else:
            out.append((kind,))
    return out


def test_a_weather_run_streams_the_contract_event_sequence(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天多云。"))
    body = run_body(thread_id, ("u1", "北京今天天气怎么样"))

    stream = api.run("weather", body)

    assert stream.status == 200
    assert outline(stream) == [
        ("RUN_STARTED", thread_id, body["runId"]),
        ("STEP_STARTED", "agent"),
        ("TOOL_CALL_START", "get_weather"),
        ("TOOL_CALL_ARGS", '{"location": "北京"}'),
        ("TOOL_CALL_END",),
        ("STEP_FINISHED", "agent"),
        ("STEP_STARTED", "tools"),
        ("TOOL_CALL_RESULT", "tool"),
        ("STEP_FINISHED", "tools"),
        ("STEP_STARTED", "agent"),
        ("TEXT_MESSAGE_START", "assistant"),
        ("TEXT_MESSAGE_CONTENT", "北京今天多云。"),
        ("TEXT_MESSAGE_END",),
        ("STEP_FINISHED", "agent"),
        ("RUN_FINISHED", "success"),
    ]
    [start] = stream.of("TOOL_CALL_START")
    [result] = stream.of("TOOL_CALL_RESULT")
    [text_start] = stream.of("TEXT_MESSAGE_START")
    call_id = start["toolCallId"]
    assert {e["toolCallId"] for e in stream.of("TOOL_CALL_ARGS")} == {call_id}
    assert stream.of("TOOL_CALL_END")[0]["toolCallId"] == result["toolCallId"] == call_id
    assert start["parentMessageId"] and start["parentMessageId"] != text_start["messageId"]
    assert "北京" in result["content"] and result["messageId"]
    assert {e["messageId"] for e in stream.of("TEXT_MESSAGE_CONTENT")} == {text_start["messageId"]}
    assert stream.last == {
        "type": "RUN_FINISHED",
        "threadId": thread_id,
        "runId": body["runId"],
        "outcome": {"type": "success"},
    }


PARALLEL = [
    call("get_weather", {"location": "北京"}),
    call("get_weather", {"location": "上海"}, split=False),
    call("get_weather", {"location": "Beijing"}),
]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (tool_call("get_weather", {"location": "北京"}, split=True), [{"location": "北京"}]),
        (tool_call("get_weather", {"location": "北京"}, split=False), [{"location": "北京"}]),
        (tool_calls(PARALLEL, interleave=True), [c.args for c in PARALLEL]),
    ],
    ids=["split", "whole-chunk", "parallel-interleaved"],
)
def test_tool_call_args_concatenate_to_the_exact_arguments(
    api: Api, llm: ScriptedLLM, thread_id: str, reply: Any, expected: list[dict[str, str]]
) -> None:
    llm.script(reply, text("好的。"))

    stream = api.run("weather", run_body(thread_id, ("u1", "天气")))

    starts = stream.of("TOOL_CALL_START")
    args = stream.args_by_call()
    assert [json.loads(args[s["toolCallId"]]) for s in starts] == expected
    for start in starts:
        call_id = start["toolCallId"]
        mine = [i for i, e in enumerate(stream.events) if e.get("toolCallId") == call_id]
        kinds = [stream.events[i]["type"] for i in mine]
        assert kinds[0] == "TOOL_CALL_START"
        assert kinds[-2:] == ["TOOL_CALL_END", "TOOL_CALL_RESULT"]
        assert set(kinds[1:-2]) == {"TOOL_CALL_ARGS"}
    assert len(stream.of("TOOL_CALL_RESULT")) == len(expected)
    assert stream.last["outcome"] == {"type": "success"}


def test_an_interrupt_is_answered_by_a_resume_and_the_run_succeeds(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("ask_input", {"message": "请问要查哪个城市？", "placeholder": "北京"}))
    first = api.run("weather", run_body(thread_id, ("u1", "查天气")))

    [start] = first.of("TOOL_CALL_START")
    assert first.of("TOOL_CALL_RESULT") == []
    outcome = first.last["outcome"]
    assert outcome["type"] == "interrupt"
    [pending] = outcome["interrupts"]
    payload = {"type": "input", "message": "请问要查哪个城市？", "placeholder": "北京"}
    assert pending == {
        "id": pending["id"],
        "reason": "input",
        "message": "请问要查哪个城市？",
        "toolCallId": start["toolCallId"],
        "responseSchema": {
            "type": "object",
            "properties": {"value": {"type": "string"}},
            "required": ["value"],
            "additionalProperties": False,
        },
        "metadata": {"payload": payload},
    }

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    second = api.run(
        "weather",
        run_body(thread_id, ("u1", "查天气"), resume=[answer(pending["id"], "上海")]),
    )

    results = second.of("TOOL_CALL_RESULT")
    assert results[0]["toolCallId"] == start["toolCallId"]
    assert results[0]["content"] == "用户回答：上海"
    assert "上海" in results[1]["content"]
    assert "".join(e["delta"] for e in second.of("TEXT_MESSAGE_CONTENT")) == "上海今天晴。"
    assert second.last["outcome"] == {"type": "success"}


def test_two_parallel_interrupts_are_resumed_together_by_id(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(
        tool_calls(
            [
                call("ask_input", {"message": "去哪个城市？"}),
                call("ask_choice", {"message": "查哪天？", "options": ["今天", "明天"]}),
            ]
        )
    )
    first = api.run("weather", run_body(thread_id, ("u1", "帮我查天气")))

    calls = {s["toolCallName"]: s["toolCallId"] for s in first.of("TOOL_CALL_START")}
    pending = {i["reason"]: i for i in first.last["outcome"]["interrupts"]}
    assert set(pending) == {"input", "select"}
    assert pending["input"]["toolCallId"] == calls["ask_input"]
    assert pending["select"]["toolCallId"] == calls["ask_choice"]
    assert pending["select"]["responseSchema"]["properties"]["value"]["enum"] == ["今天", "明天"]

    llm.script(text("好的，上海明天。"))
    both = [answer(pending["select"]["id"], "明天"), answer(pending["input"]["id"], "上海")]
    second = api.run("weather", run_body(thread_id, resume=both))

    results = {r["toolCallId"]: r["content"] for r in second.of("TOOL_CALL_RESULT")}
    assert results == {calls["ask_input"]: "用户回答：上海", calls["ask_choice"]: "用户选择：明天"}
    assert second.last["outcome"] == {"type": "success"}


def test_a_second_run_on_a_busy_thread_is_refused_with_409(
    api: Api, server: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("一二三四五六七八", chunk_size=1, delay_s=0.1))
    body = run_body(thread_id, ("u1", "慢慢说"))
    with api.http.stream("POST", "/api/agents/weather", json=body) as response:
        stream = Stream(status=response.status_code)
        events = parse_sse(response.iter_lines(), stream)
        while next(events)["type"] != "TEXT_MESSAGE_CONTENT":
            pass

        busy = api.run("weather", run_body(thread_id, ("u1", "慢慢说"), ("u2", "再来")))

        for _ in events:
            pass
    assert busy.status == 409
    assert busy.body["code"] == "thread_busy"
    assert stream.last["outcome"] == {"type": "success"}
    assert "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT")) == "一二三四五六七八"


def test_keepalive_comments_flow_while_the_model_is_slow(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("慢慢", chunk_size=1, delay_s=0.4))  # pauses longer than the keep-alive

    stream = api.run("weather", run_body(thread_id, ("u1", "慢一点")))

    assert stream.last["outcome"] == {"type": "success"}
    assert len(stream.comments) >= 2
    assert b"\n:" in stream.raw or stream.raw.startswith(b":")


@pytest.mark.parametrize("stage", ["model", "tool"])
def test_a_client_that_asks_for_cancel_on_disconnect_stops_the_run_by_leaving(
    api: Api, server: ServerProcess, llm: ScriptedLLM, thread_id: str, stage: str
) -> None:
    if stage == "model":
        llm.script(hang(30, partial="我想"))
        until = {"type": "TEXT_MESSAGE_CONTENT"}
    else:  # the Open-Meteo double hangs on this city, so the tool is running when we go
        llm.script(tool_call("get_weather", {"location": HANG_CITY}))
        until = {"type": "STEP_STARTED", "stepName": "tools"}
    body = run_body(thread_id, ("u1", "北京天气"), onDisconnect="cancel")
    with api.http.stream("POST", "/api/agents/weather", json=body) as response:
        stream = Stream(status=response.status_code)
        for event in parse_sse(response.iter_lines(), stream):
            if until.items() <= event.items():
                break
    server.logged(f"run thread={thread_id} ")
    assert "outcome=cancelled" in _run_line(server, thread_id)

    llm.script(text("北京今天晴。"))
    again = api.run("weather", run_body(thread_id, ("u1", "北京天气"), ("u2", "再说一次")))

    assert again.last["outcome"] == {"type": "success"}
    sent = llm.last_request["messages"]
    assert [m["role"] for m in sent if m["role"] == "user"] == ["user", "user"]
    if stage == "tool":
        [abandoned] = [m for m in sent if m["role"] == "tool"]
        assert abandoned["content"] == CALL_ABANDONED
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["role"] for m in view["messages"]][-3:-1] == (
        ["tool", "user"] if stage == "tool" else ["assistant", "user"]
    )
    if stage == "tool":  # the call the stopped run left unanswered says so, as data
        abandoned_view = view["messages"][-3]
        assert abandoned_view["metadata"] == {"outcome": "abandoned"}
        assert abandoned_view["error"] == CALL_ABANDONED
    if stage == "model":  # what the client had been shown stays, marked as stopped
        stopped = view["messages"][-3]
        assert (stopped["content"], stopped["metadata"]) == ("我想", {"stopped": True})
        assert [m["content"] for m in sent if m["role"] == "assistant"] == ["我想"]
    assert view["messages"][-1]["content"] == "北京今天晴。"


def _run_line(server: ServerProcess, thread_id: str) -> str:
    return next(line for line in server.log if f"run thread={thread_id} " in line)


def test_a_model_failure_is_a_readable_run_error_without_secrets(
    api: Api, server: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.fallback = lambda body: error(500)

    failed = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert failed.types[0] == "RUN_STARTED"
    assert "RUN_FINISHED" not in failed.types
    last = failed.last
    assert last["type"] == "RUN_ERROR"
    assert last["code"] == "model_error"
    assert "HTTP 500" in last["message"]
    assert "Traceback" not in last["message"]
    server.logged(f"run thread={thread_id} ")
    assert OPENAI_SECRET.encode() not in failed.raw
    assert OPENAI_SECRET not in server.log_text
    assert API_KEY not in server.log_text
    assert llm.request_headers[-1]["authorization"] == f"Bearer {OPENAI_SECRET}"

    llm.fallback = None
    llm.script(text("现在好了。"))
    again = api.run("weather", run_body(thread_id, ("u1", "北京天气"), ("u2", "再试一次")))

    assert again.last["outcome"] == {"type": "success"}
    assert "".join(e["delta"] for e in again.of("TEXT_MESSAGE_CONTENT")) == "现在好了。"


def test_the_stream_is_plain_sse_any_http_client_can_read(
    server: ServerProcess, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好！"))
    response = httpx.post(
        f"{server.url}/api/agents/weather",
        json=run_body(thread_id, ("u1", "你好")),
        headers={"Authorization": f"Bearer {API_KEY}", "Accept": "text/event-stream"},
        timeout=30,
    )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-store"
    frames = [f for f in response.text.split("\n\n") if f.strip() and not f.startswith(":")]
    ids = [f.partition("\n")[0] for f in frames]
    assert ids == [f"id: {n}" for n in range(1, len(frames) + 1)]
    data = [f.partition("\n")[2] for f in frames]
    assert all(d.startswith("data: {") for d in data)
    assert json.loads(data[-1].removeprefix("data: "))["type"] == "RUN_FINISHED"
