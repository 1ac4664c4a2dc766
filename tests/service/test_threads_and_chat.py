"""Threads (read back, forget), the plain-JSON chat endpoint, graphs, health and docs."""

from __future__ import annotations

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, call, error, text, tool_call, tool_calls
from tests.service.conftest import Api, answer, run_body
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def test_a_thread_reads_back_its_messages_and_the_pending_interrupt(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(
        tool_calls(
            [
                call("get_weather", {"location": "北京"}),
                call("ask_choice", {"message": "还要查哪里？", "options": ["上海", "广州"]}),
            ]
        )
    )
    run = api.run("weather", run_body(thread_id, ("u1", "北京和另一个城市的天气")))
    [pending] = run.last["outcome"]["interrupts"]

    view = api.http.get(f"/api/threads/{thread_id}")

    assert view.status_code == 200
    body = view.json()
    assert body["threadId"] == thread_id
    assert body["graphId"] == "weather"
    assert body["interrupts"] == [pending]
    user, assistant, weather = body["messages"]
    assert user == {"id": "u1", "role": "user", "content": "北京和另一个城市的天气"}
    assert assistant["role"] == "assistant"
    assert [
        (c["function"]["name"], c["function"]["arguments"]) for c in assistant["toolCalls"]
    ] == [
        ("get_weather", '{"location": "北京"}'),
        ("ask_choice", '{"message": "还要查哪里？", "options": ["上海", "广州"]}'),
    ]
    get_weather_id, ask_id = (c["id"] for c in assistant["toolCalls"])
    assert pending["toolCallId"] == ask_id
    assert weather["role"] == "tool" and weather["toolCallId"] == get_weather_id
    assert "北京" in weather["content"]


def test_a_forgotten_thread_is_gone(api: Api, llm: ScriptedLLM, thread_id: str) -> None:
    llm.script(text("你好。"))
    api.run("weather", run_body(thread_id, ("u1", "你好")))

    deleted = api.http.delete(f"/api/threads/{thread_id}")

    assert deleted.status_code == 204
    missing = api.http.get(f"/api/threads/{thread_id}")
    assert missing.status_code == 404
    assert missing.json()["code"] == "unknown_thread"
    again = api.http.delete(f"/api/threads/{thread_id}")
    assert (again.status_code, again.json()["code"]) == (404, "unknown_thread")


def test_chat_runs_interrupt_then_resume_as_plain_json(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    first = api.chat(graph="weather", threadId=thread_id, message="查天气")

    assert first.status_code == 200
    asked = first.json()
    assert asked["threadId"] == thread_id
    assert asked["status"] == "interrupted"
    [pending] = asked["interrupts"]
    assert pending["reason"] == "input"
    assert pending["metadata"]["payload"] == {
        "type": "input",
        "message": "哪个城市？",
        "placeholder": "北京",
    }
    [assistant] = asked["messages"]
    assert assistant["toolCalls"][0]["id"] == pending["toolCallId"]

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    second = api.chat(graph="weather", threadId=thread_id, resume=[answer(pending["id"], "上海")])

    assert second.status_code == 200
    done = second.json()
    assert done["status"] == "done"
    assert done["interrupts"] == []
    roles = [m["role"] for m in done["messages"]]
    assert roles == ["tool", "assistant", "tool", "assistant"]
    assert done["messages"][0] == {
        "id": done["messages"][0]["id"],
        "role": "tool",
        "content": "用户回答：上海",
        "toolCallId": pending["toolCallId"],
        "metadata": {"outcome": "ok"},
    }
    assert done["messages"][0]["id"], "every message has its id, tool results too"
    assert done["messages"][-1]["content"] == "上海今天晴。"


def test_chat_without_a_thread_id_starts_a_new_thread(api: Api, llm: ScriptedLLM) -> None:
    llm.script(text("你好！"))

    reply = api.chat(graph="weather", message="你好")

    assert reply.status_code == 200
    body = reply.json()
    assert body["status"] == "done"
    assert [m["content"] for m in body["messages"]] == ["你好！"]
    assert api.http.get(f"/api/threads/{body['threadId']}").json()["graphId"] == "weather"


def test_a_thread_of_one_graph_is_refused_by_another(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好。"))
    api.chat(graph="weather", threadId=thread_id, message="你好")
    graphs = {g["id"] for g in api.http.get("/api/graphs").json()}
    other = next(iter(graphs - {"weather"}), None)
    assert other is not None, "a second graph to try"

    refused = api.chat(graph=other, threadId=thread_id, message="分析一下平安")

    assert refused.status_code == 409
    assert refused.json()["code"] == "wrong_graph"


def test_graphs_health_and_docs_are_served(api: Api, server: ServerProcess) -> None:
    graphs = api.http.get("/api/graphs").json()
    health = httpx.get(f"{server.url}/healthz")  # no bearer key: health stays open
    schema = httpx.get(f"{server.url}/openapi.json").json()

    assert graphs[0]["id"] == "weather" and graphs[0]["description"]
    assert {g["id"] for g in graphs} <= {"weather", "tushare"}
    assert health.json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/docs").status_code == 200
    run_body_ref = schema["paths"]["/api/agents/{graph_id}"]["post"]["requestBody"]
    assert run_body_ref["content"]["application/json"]["schema"]["$ref"].endswith("RunAgentInput")
    assert "resume" in schema["components"]["schemas"]["RunAgentInput"]["properties"]


def test_a_failed_chat_run_is_a_502_with_a_readable_message(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.fallback = lambda body: error(503)

    failed = api.chat(graph="weather", threadId=thread_id, message="你好")

    assert failed.status_code == 502
    assert failed.json()["code"] == "model_error"
    assert "HTTP 503" in failed.json()["detail"]
    llm.fallback = None
    llm.script(text("你好！"))
    assert api.chat(graph="weather", threadId=thread_id, message="再试").json()["status"] == "done"


def test_a_bare_answer_value_resumes_like_value_of_it(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(tool_call("ask_choice", {"message": "哪个城市？", "options": ["北京", "上海"]}))
    [pending] = api.chat(graph="weather", threadId=thread_id, message="查天气").json()["interrupts"]

    wrong = api.chat(
        graph="weather",
        threadId=thread_id,
        resume=[{"interruptId": pending["id"], "status": "resolved", "payload": "广州"}],
    )
    assert wrong.status_code == 422
    assert wrong.json()["code"] == "invalid_answer"

    llm.script(text("上海。"))
    done = api.chat(
        graph="weather",
        threadId=thread_id,
        resume=[{"interruptId": pending["id"], "status": "resolved", "payload": "上海"}],
    )
    assert done.status_code == 200
    assert done.json()["messages"][0]["content"] == "用户选择：上海"
