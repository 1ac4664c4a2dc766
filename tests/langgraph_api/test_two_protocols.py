"""One thread, two protocols: a thread started over AG-UI goes on through LangGraph's API
and reads back through `/api`, and the reverse (both backends)."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.langgraph_api.conftest import collect
from tests.service.conftest import Api, answer, run_body

pytestmark = pytest.mark.processes  # real servers


async def test_a_thread_started_over_agui_continues_through_the_langgraph_api(
    client: LangGraphClient, llm: ScriptedLLM, api: Api, thread_id: str
) -> None:
    llm.script(tool_call("ask_input", {"message": "哪个城市？"}))
    asked = api.run("weather", run_body(thread_id, ("u1", "查天气")))
    [pending] = asked.last["outcome"]["interrupts"]

    seen = await client.threads.get(thread_id)
    llm.script(tool_call("get_weather", {"location": "广州"}), text("广州多云。"))
    parts = await collect(
        client.runs.stream(
            thread_id, "weather", command=Command(resume="广州"), stream_mode=["values"]
        )
    )
    llm.script(text("不客气。"))
    await collect(
        client.runs.stream(
            thread_id, "weather", input={"messages": [{"role": "user", "content": "谢谢"}]}
        )
    )

    assert seen["status"] == "interrupted"
    assert [i["id"] for v in seen["interrupts"].values() for i in v] == [pending["id"]]
    assert parts[0][0] == "metadata" and parts[-1][0] == "end"
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["role"] for m in view["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert view["messages"][0]["id"] == "u1"
    assert view["messages"][2]["content"] == "用户回答：广州"
    assert view["messages"][-1]["content"] == "不客气。"
    runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
    assert [r["status"] for r in runs] == ["success", "success", "interrupted"]


async def test_a_thread_started_through_the_langgraph_api_continues_over_agui(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(tool_call("ask_input", {"message": "哪个城市？"}))
    await collect(
        client.runs.stream(
            thread_id, "weather", input={"messages": [{"role": "user", "content": "查天气"}]}
        )
    )
    [pending] = api.http.get(f"/api/threads/{thread_id}").json()["interrupts"]

    llm.script(tool_call("get_weather", {"location": "深圳"}), text("深圳有雨。"))
    answered = api.run("weather", run_body(thread_id, resume=[answer(pending["id"], "深圳")]))

    assert answered.last["type"] == "RUN_FINISHED"
    state = await client.threads.get_state(thread_id)
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert messages[-1]["content"] == "深圳有雨。"
    agui_run = api.http.get(f"/api/threads/{thread_id}/runs").json()[0]["runId"]
    rejoined = await collect(client.runs.join_stream(thread_id, agui_run, stream_mode="values"))
    assert rejoined[-2][1]["messages"][-1]["content"] == "深圳有雨。"
    assert [m["id"] for m in rejoined[-2][1]["messages"]] == [m["id"] for m in messages]
