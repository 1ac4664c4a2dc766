"""langgraph-sdk against `react-agent serve`: the weather agent's question and answer,
state and history, join, cancel and rejoin, on both backends."""

from __future__ import annotations

import uuid

import pytest

from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, call, hang, text, tool_call, tool_calls
from tests.langgraph_api.conftest import WEATHER_ASSISTANT, collect

pytestmark = pytest.mark.processes  # real servers
MODES = ["values", "messages-tuple", "updates"]


async def ask_city(client: LangGraphClient, llm: ScriptedLLM, thread_id: str) -> list:
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    return await collect(
        client.runs.stream(
            thread_id,
            "weather",
            input={"messages": [{"role": "user", "content": "查天气"}]},
            stream_mode=MODES,
        )
    )


async def test_the_weather_question_pauses_and_a_resume_command_answers_it(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread = await client.threads.create()
    thread_id = thread["thread_id"]

    asked = await ask_city(client, llm, thread_id)

    events = [event for event, _, _ in asked]
    assert events[0] == "metadata" and events[-1] == "end"
    assert {"values", "messages", "updates"} <= set(events)
    assert all(part_id for _, _, part_id in asked)
    [interrupt] = [data["__interrupt__"] for e, data, _ in asked if e == "updates" and "__interrupt__" in data][0]
    assert interrupt["value"] == {"type": "input", "message": "哪个城市？", "placeholder": "北京"}
    waiting = await client.threads.get(thread_id)
    assert waiting["status"] == "interrupted"
    assert [i["id"] for pending in waiting["interrupts"].values() for i in pending] == [interrupt["id"]]

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    answered = await collect(
        client.runs.stream(thread_id, WEATHER_ASSISTANT, command=Command(resume="上海"), stream_mode=MODES)
    )

    tokens = "".join(
        data[0]["content"]
        for event, data, _ in answered
        if event == "messages" and data[0]["type"] == "AIMessageChunk"
    )
    assert tokens == "上海今天晴。"
    final = [data for event, data, _ in answered if event == "values"][-1]
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert final["messages"][2]["content"] == "用户回答：上海"
    assert final["messages"][-1]["content"] == "上海今天晴。"
    updates = [next(iter(data)) for event, data, _ in answered if event == "updates"]
    assert updates == ["tools", "agent", "tools", "agent"]
    state = await client.threads.get_state(thread_id)
    assert [m["type"] for m in state["values"]["messages"]] == [m["type"] for m in final["messages"]]
    assert state["next"] == [] and state["interrupts"] == []
    assert (await client.threads.get(thread_id))["status"] == "idle"
