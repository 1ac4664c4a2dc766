"""Runs through langgraph-sdk beyond starting them: deleting a run's record, cancelling
with `action=rollback`, and `Command(update=..., goto=...)` (both backends)."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, hang, text
from tests.langgraph_api.conftest import collect, contents, said
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers


async def test_an_ended_run_is_deleted_and_one_in_progress_is_refused(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(text("北京晴。"), hang(30, partial="我"))
    thread_id = (await client.threads.create())["thread_id"]
    done = await client.runs.create(thread_id, "weather", input=said("北京天气"))
    await client.runs.join(thread_id, done["run_id"])
    going = await client.runs.create(thread_id, "weather", input=said("上海呢"))
    await llm.await_requests(2)

    with pytest.raises(ConflictError) as refused:
        await client.runs.delete(thread_id, going["run_id"])
    await client.runs.cancel(thread_id, going["run_id"], wait=True)
    await client.runs.delete(thread_id, done["run_id"])

    assert refused.value.response.json()["code"] == "run_active"
    with pytest.raises(NotFoundError):
        await client.runs.get(thread_id, done["run_id"])
    again = await client.http.client.delete(f"/threads/{thread_id}/runs/{done['run_id']}")
    assert (again.status_code, again.json()["code"]) == (404, "unknown_run")
    listed = [r["runId"] for r in api.http.get(f"/api/threads/{thread_id}/runs").json()]
    assert listed == [going["run_id"]]
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"])[:2] == ["北京天气", "北京晴。"], "the state stays"


async def test_cancel_with_rollback_takes_the_thread_back_to_before_the_run(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(text("北京晴。"), hang(30, partial="上海"))
    thread_id = (await client.threads.create())["thread_id"]
    first = await client.runs.create(thread_id, "weather", input=said("北京天气"))
    await client.runs.join(thread_id, first["run_id"])
    second = await client.runs.create(thread_id, "weather", input=said("上海呢"))
    await llm.await_requests(2)

    await client.runs.cancel(thread_id, second["run_id"], wait=True, action="rollback")

    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["北京天气", "北京晴。"]
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["content"] for m in view["messages"]] == ["北京天气", "北京晴。"]
    with pytest.raises(NotFoundError):
        await client.runs.get(thread_id, second["run_id"])
    assert [r["run_id"] for r in await client.runs.list(thread_id)] == [first["run_id"]]
    llm.script(text("广州多云。"))
    values = await client.runs.wait(thread_id, "weather", input=said("广州呢"))
    assert contents(values) == ["北京天气", "北京晴。", "广州呢", "广州多云。"]


async def test_a_rollback_of_the_run_a_thread_began_with_leaves_it_empty_and_usable(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(hang(30, partial="我"))
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "weather", input=said("慢慢说"))
    await llm.await_requests(1)

    answered = await client.http.client.post(
        f"/threads/{thread_id}/runs/{run['run_id']}/cancel", params={"action": "rollback"}
    )

    assert answered.status_code == 202 and answered.json()["run_id"] == run["run_id"]
    assert await client.runs.list(thread_id) == []
    assert (await client.threads.get(thread_id))["values"] is None
    llm.script(text("好的。"))
    values = await client.runs.wait(thread_id, "weather", input=said("重新开始"))
    assert contents(values) == ["重新开始", "好的。"]


async def test_command_update_and_goto_run_the_graph_as_langgraph_does(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.script(text("北京晴。"))
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))

    llm.script(text("上海小雨。"))
    values = await client.runs.wait(
        thread_id,
        "weather",
        command=Command(
            update={"messages": [{"role": "user", "content": "改问上海"}]}, goto="agent"
        ),
    )

    assert contents(values) == ["北京天气", "北京晴。", "改问上海", "上海小雨。"]
    assert llm.last_request["messages"][-1]["content"] == "改问上海"
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["content"] for m in view["messages"]] == contents(values)
    too_long = {"messages": [{"role": "user", "content": "长" * 20_000}]}  # 60 kB
    refusals = []
    for command in (
        {"goto": "nowhere"},
        {"update": {"nonsense": 1}},
        {"goto": ["agent", 3]},
        {"update": ["messages"]},
        {"update": too_long, "goto": "agent"},
        {"update": {"messages": [{"role": "robot", "content": "?"}]}},
    ):
        response = await client.http.client.post(
            f"/threads/{thread_id}/runs/wait", json={"assistant_id": "weather", "command": command}
        )
        refusals.append((response.status_code, response.json()["code"]))
    both = await client.http.client.post(
        f"/threads/{thread_id}/runs/wait",
        json={"assistant_id": "weather", "input": said("又一句"), "command": {"goto": "agent"}},
    )
    assert refusals == [
        (422, "unknown_node"),
        (422, "invalid_update"),
        (422, "unknown_node"),
        (422, "invalid_update"),
        (422, "message_too_large"),
        (422, "invalid_update"),
    ]
    assert (both.status_code, both.json()["code"]) == (422, "invalid_body")
    assert len(await client.runs.list(thread_id)) == 2, "nothing else was started"


async def test_a_streamed_command_update_shows_its_messages_in_the_values_as_the_state_has_them(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(text("北京晴。"))
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))

    llm.script(text("上海小雨。"))
    parts = await collect(
        client.runs.stream(
            thread_id,
            "weather",
            command=Command(
                update={"messages": [{"role": "user", "content": "改问上海"}]}, goto="agent"
            ),
            stream_mode="values",
        )
    )

    last = [data for event, data, _ in parts if event == "values"][-1]
    state = await client.threads.get_state(thread_id)
    assert contents(last) == ["北京天气", "北京晴。", "改问上海", "上海小雨。"]
    assert [m["id"] for m in last["messages"]] == [m["id"] for m in state["values"]["messages"]]
