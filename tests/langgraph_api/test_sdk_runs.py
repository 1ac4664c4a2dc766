"""langgraph-sdk against `react-agent serve`: the weather agent's question and answer,
state and history, join, cancel and rejoin, on both backends."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.langgraph_api.conftest import WEATHER_ASSISTANT, collect
from tests.service.conftest import Api

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
    [interrupt] = next(
        data["__interrupt__"] for e, data, _ in asked if e == "updates" and "__interrupt__" in data
    )
    assert interrupt["value"] == {"type": "input", "message": "哪个城市？", "placeholder": "北京"}
    paused = [data for e, data, _ in asked if e == "values"][-1]  # as LangGraph streams it
    assert paused["__interrupt__"] == [interrupt]
    assert [m["type"] for m in paused["messages"]] == ["human", "ai"]
    waiting = await client.threads.get(thread_id)
    assert waiting["status"] == "interrupted"
    assert [i["id"] for pending in waiting["interrupts"].values() for i in pending] == [
        interrupt["id"]
    ]

    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    answered = await collect(
        client.runs.stream(
            thread_id, WEATHER_ASSISTANT, command=Command(resume="上海"), stream_mode=MODES
        )
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
    assert [m["type"] for m in state["values"]["messages"]] == [
        m["type"] for m in final["messages"]
    ]
    assert state["next"] == [] and state["interrupts"] == []
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_history_lists_the_checkpoints_newest_first_and_pages_before_one(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    await ask_city(client, llm, thread_id)

    history = await client.threads.get_history(thread_id, limit=100)
    older = await client.threads.get_history(thread_id, limit=100, before=history[1]["checkpoint"])

    steps = [state["metadata"]["step"] for state in history]
    assert steps == sorted(steps, reverse=True) and len(steps) >= 3
    assert (
        history[0]["checkpoint"]["checkpoint_id"]
        == (await client.threads.get_state(thread_id))["checkpoint"]["checkpoint_id"]
    )
    assert history[0]["next"] == ["tools"] and history[0]["interrupts"]
    assert (
        history[0]["parent_checkpoint"]["checkpoint_id"]
        == history[1]["checkpoint"]["checkpoint_id"]
    )
    assert [s["checkpoint"]["checkpoint_id"] for s in older] == [
        s["checkpoint"]["checkpoint_id"] for s in history[2:]
    ]
    at = await client.threads.get_state(
        thread_id, checkpoint_id=history[1]["checkpoint"]["checkpoint_id"]
    )
    assert at["checkpoint"] == history[1]["checkpoint"]


async def test_a_background_run_is_joined_and_its_record_is_an_ordinary_run(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(text("你好，我是天气助手。"))
    thread_id = (await client.threads.create())["thread_id"]

    run = await client.runs.create(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "你好"}]}
    )
    values = await client.runs.join(thread_id, run["run_id"])

    assert run["assistant_id"] == "weather" and run["status"] in ("pending", "running")
    assert [m["content"] for m in values["messages"]] == ["你好", "你好，我是天气助手。"]
    assert (await client.runs.get(thread_id, run["run_id"]))["status"] == "success"
    [record] = api.http.get(f"/api/threads/{thread_id}/runs").json()
    assert (record["runId"], record["graph"], record["status"]) == (
        run["run_id"],
        "weather",
        "success",
    )
    [listed] = await client.runs.list(thread_id)
    assert listed["run_id"] == run["run_id"]


async def test_wait_answers_the_values_and_a_stateless_run_gets_a_thread_of_its_own(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    # A client that waits for the values gets nothing from streamed tokens: the model is
    # asked for its answer in one piece (a streamed run asks for a stream, see
    # test_messages_mode_sends_metadata_then_growing_partials_and_whole_tool_messages).
    llm.script(text("好的。"), text("再见。"))
    thread_id = (await client.threads.create())["thread_id"]

    values = await client.runs.wait(
        thread_id, WEATHER_ASSISTANT, input={"messages": [{"role": "user", "content": "嗨"}]}
    )
    stateless = await client.runs.wait(
        None, "weather", input={"messages": [{"role": "user", "content": "拜拜"}]}
    )

    assert [m["type"] for m in values["messages"]] == ["human", "ai"]
    assert values["messages"][-1]["content"] == "好的。"
    assert stateless["messages"][-1]["content"] == "再见。"
    assert [bool(request.get("stream")) for request in llm.requests] == [False, False]


async def test_a_cancelled_run_ends_and_the_thread_takes_the_next_one(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(hang(30, partial="我"))
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "慢慢说"}]}
    )
    await llm.await_requests(1)

    await client.runs.cancel(thread_id, run["run_id"], wait=True)

    cancelled = await client.runs.get(thread_id, run["run_id"])
    assert cancelled["status"] == "interrupted"
    [record] = api.http.get(f"/api/threads/{thread_id}/runs").json()
    assert record["status"] == "cancelled"
    llm.script(text("好了。"))
    values = await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "继续"}]}
    )
    assert values["messages"][-1]["content"] == "好了。"


async def test_a_rejoin_with_last_event_id_sends_what_followed_it_once(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴，气温适宜。"))
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(
        thread_id,
        "weather",
        input={"messages": [{"role": "user", "content": "北京天气"}]},
        stream_mode=MODES,
    )
    await client.runs.join(thread_id, run["run_id"])

    whole = await collect(client.runs.join_stream(thread_id, run["run_id"]))
    cut = len(whole) // 2
    rest = await collect(
        client.runs.join_stream(thread_id, run["run_id"], last_event_id=whole[cut][2])
    )

    ids = [part_id for _, _, part_id in whole]
    assert len(set(ids)) == len(ids) and ids[0] == "0"
    assert rest == whole[cut + 1 :]
    assert rest[-1][0] == "end"
    assert {event for event, _, _ in whole} >= {"metadata", "values", "messages", "updates", "end"}


async def test_a_run_from_an_earlier_checkpoint_forks_the_thread(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text("北京晴。"), text("上海雨。"))
    await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "北京"}]}
    )
    await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "上海"}]}
    )
    history = await client.threads.get_history(thread_id, limit=100)
    after_first = next(
        s
        for s in history
        if [m["content"] for m in s["values"].get("messages", [])] == ["北京", "北京晴。"]
    )

    llm.script(text("广州多云。"))
    forked = await client.runs.wait(
        thread_id,
        "weather",
        input={"messages": [{"role": "user", "content": "广州"}]},
        checkpoint_id=after_first["checkpoint"]["checkpoint_id"],
    )

    assert [m["content"] for m in forked["messages"]] == ["北京", "北京晴。", "广州", "广州多云。"]
    state = await client.threads.get_state(thread_id)
    assert [m["content"] for m in state["values"]["messages"]] == [
        "北京",
        "北京晴。",
        "广州",
        "广州多云。",
    ]
    assert state["parent_checkpoint"] is not None
    missing = await client.http.client.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "weather", "input": {"messages": ["再来"]}, "checkpoint_id": "nope"},
    )
    assert (missing.status_code, missing.json()["code"]) == (404, "unknown_thread")


async def test_messages_mode_sends_metadata_then_growing_partials_and_whole_tool_messages(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴，气温适宜。"))
    thread_id = (await client.threads.create())["thread_id"]

    parts = await collect(
        client.runs.stream(
            thread_id,
            "weather",
            input={"messages": [{"role": "user", "content": "北京天气"}]},
            stream_mode="messages",
        )
    )

    events = [event for event, _, _ in parts]
    assert set(events) == {
        "metadata",
        "messages/metadata",
        "messages/partial",
        "messages/complete",
        "end",
    }
    partials = [data[0]["content"] for event, data, _ in parts if event == "messages/partial"]
    answer = [p for p in partials if p]
    assert answer[-1] == "北京今天晴，气温适宜。"
    assert all(answer[-1].startswith(p) for p in answer)
    [tool] = [data[0] for event, data, _ in parts if event == "messages/complete"]
    assert tool["type"] == "tool" and tool["name"] == "get_weather"
    first_seen = events.index("messages/metadata")
    assert first_seen < events.index("messages/partial")
