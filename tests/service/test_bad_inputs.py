"""Guarding the door: every bad request gets the right 4xx with a message, never a 500."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.service.conftest import API_KEY, UI_ORIGIN, Api, answer, run_body
from tests.support.processes import REACT_AGENT

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

MAX_MESSAGES = Settings.model_fields["agent_max_messages_per_request"].default


@dataclass
class Pending:
    """A thread paused at an `input` interrupt."""

    thread_id: str
    interrupt_id: str


@pytest.fixture
def pending(api: Api, llm: ScriptedLLM, thread_id: str) -> Pending:
    llm.script(tool_call("ask_input", {"message": "哪个城市？"}))
    reply = api.chat(graph="weather", threadId=thread_id, message="查天气").json()
    return Pending(thread_id, reply["interrupts"][0]["id"])


Request = Callable[[httpx.Client, Pending], httpx.Response]


def post_json(path: str, body: Any, **headers: str) -> Request:
    def send(http: httpx.Client, pending: Pending) -> httpx.Response:
        content = body(pending) if callable(body) else body
        raw = content if isinstance(content, bytes) else json.dumps(content).encode()
        return http.post(path, content=raw, headers={"content-type": "application/json", **headers})

    return send


def resume_with(*entries: Callable[[Pending], dict[str, Any]]) -> Callable[[Pending], Any]:
    return lambda p: run_body(p.thread_id, resume=[entry(p) for entry in entries])


CASES: dict[str, tuple[Request, int, str]] = {
    "malformed JSON": (
        post_json("/api/agents/weather", b'{"threadId": "x",'),
        400,
        "malformed_json",
    ),
    "not a RunAgentInput": (
        post_json("/api/agents/weather", {"threadId": "x"}),
        422,
        "invalid_body",
    ),
    "unknown graph": (
        post_json("/api/agents/nope", run_body("t", ("u", "hi"))),
        404,
        "unknown_graph",
    ),
    "bad thread id": (
        post_json("/api/agents/weather", run_body("../../etc/passwd", ("u", "hi"))),
        422,
        "bad_thread_id",
    ),
    "wrong resume shape": (
        post_json(
            "/api/agents/weather",
            resume_with(
                lambda p: {"interruptId": p.interrupt_id, "status": "resolved", "payload": 3}
            ),
        ),
        422,
        "invalid_answer",
    ),
    "empty answer to an input": (
        post_json("/api/agents/weather", resume_with(lambda p: answer(p.interrupt_id, "  "))),
        422,
        "invalid_answer",
    ),
    "unknown interrupt id": (
        post_json("/api/agents/weather", resume_with(lambda p: answer("not-an-id", "上海"))),
        409,
        "unknown_interrupt",
    ),
    "resume with nothing pending": (
        post_json(
            "/api/agents/weather",
            run_body("t-nothing-pending", resume=[answer("some-id", "上海")]),
        ),
        409,
        "nothing_pending",
    ),
    "new message while answers are awaited": (
        post_json("/api/agents/weather", lambda p: run_body(p.thread_id, ("u-new", "换个问题"))),
        409,
        "awaiting_answers",
    ),
    "no user message": (
        post_json("/api/agents/weather", run_body("t-no-message")),
        422,
        "no_user_message",
    ),
    "oversized body": (
        post_json("/api/agents/weather", run_body("t-big", ("u", "长" * 100_000))),
        413,
        "body_too_large",
    ),
    "more messages than one request may carry": (
        post_json(
            "/api/agents/weather",
            lambda p: run_body(p.thread_id, *[(f"u{i}", "嗨") for i in range(MAX_MESSAGES + 1)]),
        ),
        413,
        "too_many_messages",
    ),
    "oversized message": (
        post_json("/api/agents/weather", run_body("t-long", ("u", "a" * 40_000))),
        422,
        "message_too_large",
    ),
    "an oversized answer": (
        post_json(
            "/api/agents/weather",
            resume_with(
                lambda p: {
                    "interruptId": p.interrupt_id,
                    "status": "resolved",
                    "payload": {"value": "a" * 40_000},
                }
            ),
        ),
        422,
        "message_too_large",
    ),
    "chat with neither message nor resume": (
        post_json("/api/chat", {"graph": "weather"}),
        422,
        "message_xor_resume",
    ),
    "chat with an unknown field": (
        post_json("/api/chat", {"graph": "weather", "message": "hi", "extra": 1}),
        422,
        "invalid_body",
    ),
    "two new messages with one id": (
        post_json("/api/agents/weather", run_body("t-dup", ("same", "一"), ("same", "二"))),
        422,
        "duplicate_message",
    ),
    "chat on an empty thread id": (
        post_json("/api/chat", {"graph": "weather", "threadId": "", "message": "hi"}),
        422,
        "bad_thread_id",
    ),
    "an answer with a key its schema forbids": (
        post_json(
            "/api/agents/weather",
            resume_with(
                lambda p: {
                    "interruptId": p.interrupt_id,
                    "status": "resolved",
                    "payload": {"value": "上海", "sql": "drop table"},
                }
            ),
        ),
        422,
        "invalid_answer",
    ),
    "missing bearer key": (
        post_json("/api/agents/weather", run_body("t", ("u", "hi")), authorization=""),
        401,
        "unauthorized",
    ),
    "wrong bearer key": (
        post_json(
            "/api/agents/weather", run_body("t", ("u", "hi")), authorization="Bearer wrong-key"
        ),
        401,
        "unauthorized",
    ),
    "wrong scheme": (
        post_json("/api/chat", {"graph": "weather"}, authorization=f"Basic {API_KEY}"),
        401,
        "unauthorized",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_request_gets_the_right_4xx_and_the_interrupt_stays_pending(
    api: Api, llm: ScriptedLLM, pending: Pending, case: str
) -> None:
    send, status, code = CASES[case]
    requests_before = len(llm.requests)

    response = send(api.http, pending)

    assert (response.status_code, response.json()["code"]) == (status, code)
    detail = response.json()["detail"]
    assert isinstance(detail, str) and detail and "Traceback" not in detail
    assert API_KEY not in response.text
    assert len(llm.requests) == requests_before  # refused before any model call
    view = api.http.get(f"/api/threads/{pending.thread_id}").json()
    assert [i["id"] for i in view["interrupts"]] == [pending.interrupt_id]


def test_a_refused_answer_can_be_followed_by_a_right_one(
    api: Api, llm: ScriptedLLM, pending: Pending
) -> None:
    thread_id, interrupt_id = pending.thread_id, pending.interrupt_id
    wrong = api.chat(graph="weather", threadId=thread_id, resume=[answer(interrupt_id, 7)])
    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海晴。"))
    right = api.chat(graph="weather", threadId=thread_id, resume=[answer(interrupt_id, "上海")])

    assert wrong.status_code == 422
    assert "请输入非空文本" in wrong.json()["detail"]
    assert right.status_code == 200
    assert right.json()["status"] == "done"
    assert right.json()["messages"][-1]["content"] == "上海晴。"


def test_a_run_request_sent_again_is_refused_by_the_thread_and_runs_nothing(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好！"))
    first = api.run("weather", run_body(thread_id, ("u-hello", "你好")))
    requests_before = len(llm.requests)

    again = api.http.post("/api/agents/weather", json=run_body(thread_id, ("u-hello", "你好")))

    assert first.events[-1]["type"] == "RUN_FINISHED"
    assert (again.status_code, again.json()["code"]) == (409, "no_new_message")
    assert len(llm.requests) == requests_before
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["content"] for m in view["messages"]] == ["你好", "你好！"]


def test_a_misspelt_query_parameter_is_refused_with_the_ones_the_route_takes(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好！"))
    api.chat(graph="weather", threadId=thread_id, message="你好")

    misspelt = api.http.get(f"/api/threads/{thread_id}", params={"limt": "1"})
    listed = api.http.get("/api/threads", params={"graph": "weather", "cursor": "x"})
    right = api.http.get(f"/api/threads/{thread_id}", params={"limit": "1"})

    assert (misspelt.status_code, misspelt.json()["code"]) == (422, "invalid_request")
    assert "'limt'" in misspelt.json()["detail"] and "before" in misspelt.json()["detail"]
    assert (listed.status_code, listed.json()["code"]) == (422, "invalid_request")
    assert right.status_code == 200 and len(right.json()["messages"]) == 1


def test_a_request_over_the_message_cap_is_refused_and_the_thread_goes_on(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好。"))
    first = api.run("weather", run_body(thread_id, ("u1", "你好")))
    # A client resending a history longer than the cap, with one new message at its end.
    history = [(f"old-{i}", "旧") for i in range(MAX_MESSAGES)]
    refused = api.http.post(
        "/api/agents/weather", json=run_body(thread_id, *history, ("u2", "再问一次"))
    )
    llm.script(text("好的。"))
    again = api.run("weather", run_body(thread_id, ("u1", "你好"), ("u2", "再问一次")))

    assert first.last["type"] == "RUN_FINISHED"
    assert (refused.status_code, refused.json()["code"]) == (413, "too_many_messages")
    assert f"the limit is {MAX_MESSAGES}" in refused.json()["detail"]
    assert again.last["type"] == "RUN_FINISHED"
    assert len(llm.requests) == 2  # the refused request never reached the model
    messages = api.http.get(f"/api/threads/{thread_id}").json()["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["你好", "再问一次"]


def test_thread_routes_refuse_bad_ids_and_unknown_threads(api: Api) -> None:
    assert api.http.get("/api/threads/bad%20id").status_code == 422
    assert api.http.get("/api/threads/t-never-seen").status_code == 404
    assert api.http.delete("/api/threads/bad%20id").status_code == 422
    assert httpx.get(f"{api.server.url}/api/threads/t-never-seen").status_code == 401


def test_cors_lets_only_the_configured_origin_in(api: Api) -> None:
    def preflight(origin: str) -> httpx.Response:
        return httpx.options(
            f"{api.server.url}/api/agents/weather",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )

    allowed = preflight(UI_ORIGIN)
    refused = preflight("http://elsewhere.example")

    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == UI_ORIGIN
    assert "access-control-allow-origin" not in refused.headers


def test_a_client_that_hangs_up_mid_upload_leaves_one_quiet_log_line(
    api: Api, thread_id: str
) -> None:
    server = api.server
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /api/agents/weather HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + f"Authorization: Bearer {API_KEY}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            + b'{"threadId": "'
        )
    deadline = time.monotonic() + 10
    while "client left during the upload" not in server.log_text:
        assert time.monotonic() < deadline, server.log_text[-2000:]
        time.sleep(0.02)  # polling interval, not a wait for a result

    assert "Traceback" not in server.log_text
    assert "ClientDisconnect" not in server.log_text
    assert api.http.get("/healthz").status_code == 200


def test_an_empty_api_key_stops_start_up_with_a_clear_message(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_API_KEY": " ", "AGENT_DB": str(tmp_path / "db.sqlite")}

    result = subprocess.run(
        [REACT_AGENT, "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 2
    assert "AGENT_API_KEY is set but empty" in result.stderr
    assert "Traceback" not in result.stderr
