"""`POST /threads/{id}/state` through langgraph-sdk: state updates as a node, Studio's
"re-run from here" (a `__copy__`, then a run with no input), the refusals, and a long
thread's transcript kept across an update (both backends)."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError

from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.langgraph_api.conftest import LongReplies, contents, said
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers
# A small window, so that a long thread's older turns leave its working state.
SERVER_ENV = {"AGENT_CONTEXT_TOKENS": "2048"}


async def test_a_state_update_as_a_node_adds_to_the_history_and_the_next_run_sees_it(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text("北京晴。"))
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))

    written = await client.threads.update_state(
        thread_id,
        {"messages": [{"role": "assistant", "content": "补充：明天有雨。", "id": "note-1"}]},
        as_node="agent",
    )
    state = await client.threads.get_state(thread_id)
    view = api.http.get(f"/api/threads/{thread_id}").json()
    llm.script(text("记得带伞。"))
    after = await client.runs.wait(thread_id, "weather", input=said("要带伞吗"))

    assert written["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert written["checkpoint"]["thread_id"] == thread_id
    assert contents(state["values"]) == ["北京天气", "北京晴。", "补充：明天有雨。"]
    assert state["metadata"]["source"] == "update" and state["next"] == []
    assert [m["content"] for m in view["messages"]] == ["北京天气", "北京晴。", "补充：明天有雨。"]
    asked = [m.get("content") for m in llm.last_request["messages"]]
    assert "补充：明天有雨。" in asked
    assert contents(after)[-3:] == ["补充：明天有雨。", "要带伞吗", "记得带伞。"]


async def test_rerun_from_here_copies_a_checkpoint_and_a_run_without_input_runs_from_it(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text("北京晴。"))
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))
    history = await client.threads.get_history(thread_id, limit=100)
    before_answer = next(s for s in history if s["next"] == ["agent"])

    copied = await client.threads.update_state(
        thread_id, None, as_node="__copy__", checkpoint=before_answer["checkpoint"]
    )
    state = await client.threads.get_state(thread_id)
    llm.script(text("北京多云。"))
    rerun = await client.runs.wait(thread_id, "weather", input=None)

    assert copied["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert copied["checkpoint"]["checkpoint_id"] != before_answer["checkpoint"]["checkpoint_id"]
    assert state["next"] == ["agent"] and contents(state["values"]) == ["北京天气"]
    assert state["metadata"]["graph_id"] == "weather"
    assert contents(rerun) == ["北京天气", "北京多云。"]
    records = api.http.get(f"/api/threads/{thread_id}/runs").json()
    assert [r["status"] for r in records] == ["success", "success"]
    view = api.http.get(f"/api/threads/{thread_id}").json()
    assert [m["content"] for m in view["messages"]] == ["北京天气", "北京多云。"]


async def test_a_run_without_input_from_an_earlier_checkpoint_reruns_from_there(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text("北京晴。"))
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))
    history = await client.threads.get_history(thread_id, limit=100)
    before_answer = next(s for s in history if s["next"] == ["agent"])

    llm.script(text("北京有雾。"))
    rerun = await client.runs.wait(
        thread_id,
        "weather",
        input=None,
        checkpoint_id=before_answer["checkpoint"]["checkpoint_id"],
    )

    assert contents(rerun) == ["北京天气", "北京有雾。"]
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["北京天气", "北京有雾。"]


async def test_a_copy_from_before_a_question_leaves_no_question_and_the_thread_ready_to_rerun(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    await client.runs.wait(thread_id, "weather", input=said("查天气"))
    asked = await client.threads.get(thread_id)
    history = await client.threads.get_history(thread_id, limit=100)
    before_question = next(s for s in history if s["next"] == ["agent"])

    await client.threads.update_state(
        thread_id, None, as_node="__copy__", checkpoint=before_question["checkpoint"]
    )
    copied = await client.threads.get(thread_id)
    llm.script(text("请告诉我城市。"))
    rerun = await client.runs.wait(thread_id, "weather", input=None)

    # As LangGraph's servers say it: a step is next (the agent's), so `interrupted`.
    assert asked["status"] == "interrupted" and copied["status"] == "interrupted"
    assert copied["interrupts"] == {}
    assert contents(rerun) == ["查天气", "请告诉我城市。"]
    assert (await client.threads.get(thread_id))["status"] == "idle"


async def test_updates_and_runs_without_input_are_refused_clearly_where_they_cannot_be(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    http = client.http.client

    on_new_thread = await http.post(
        f"/threads/{thread_id}/runs/wait", json={"assistant_id": "weather", "input": None}
    )
    state_of_nothing = await http.post(
        f"/threads/{thread_id}/state", json={"values": {"messages": []}, "as_node": "agent"}
    )
    llm.script(text("北京晴。"))
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))
    refusals = []
    for path, body in (
        ("runs/wait", {"assistant_id": "weather", "input": None}),  # nothing left to run
        ("state", {"values": {"messages": []}, "as_node": "nowhere"}),
        ("state", {"values": {"messages": [{"role": "robot", "content": "?"}]}}),
        ("state", {"values": {"messages": []}, "checkpoint_id": "nope"}),
        ("state", {"values": {"messages": ["长" * 20_000]}, "as_node": "agent"}),  # 60 kB
    ):
        response = await http.post(f"/threads/{thread_id}/{path}", json=body)
        refusals.append((response.status_code, response.json()["code"]))

    assert (on_new_thread.status_code, on_new_thread.json()["code"]) == (422, "no_user_message")
    assert (state_of_nothing.status_code, state_of_nothing.json()["code"]) == (
        404,
        "unknown_thread",
    )
    assert refusals == [
        (422, "no_user_message"),
        (422, "unknown_node"),
        (422, "invalid_update"),
        (404, "unknown_thread"),
        (422, "message_too_large"),
    ]
    state = await client.threads.get_state(thread_id)
    assert contents(state["values"]) == ["北京天气", "北京晴。"]


async def test_a_state_update_is_refused_while_a_run_is_in_progress(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(text("北京晴。"), hang(30, partial="我"))
    thread_id = (await client.threads.create())["thread_id"]
    await client.runs.wait(thread_id, "weather", input=said("北京天气"))
    run = await client.runs.create(thread_id, "weather", input=said("上海呢"))
    await llm.await_requests(2)

    with pytest.raises(ConflictError) as refused:
        await client.threads.update_state(
            thread_id, {"messages": [{"role": "assistant", "content": "插话"}]}, as_node="agent"
        )

    assert refused.value.response.json()["code"] == "thread_busy"
    await client.runs.cancel(thread_id, run["run_id"], wait=True)
    state = await client.threads.get_state(thread_id)
    assert "插话" not in contents(state["values"])


async def test_a_state_update_on_a_long_thread_keeps_the_messages_its_state_let_go(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.fallback = LongReplies()
    thread_id = (await client.threads.create())["thread_id"]
    for n in range(1, 9):
        await client.runs.wait(thread_id, "weather", input=said(f"第{n}个问题"))
    latest = (await client.threads.get_history(thread_id, limit=1))[0]
    working = await client.threads.get_state(
        thread_id, checkpoint_id=latest["checkpoint"]["checkpoint_id"]
    )
    before = [m["content"] for m in api.http.get(f"/api/threads/{thread_id}").json()["messages"]]

    await client.threads.update_state(
        thread_id, {"messages": [{"role": "assistant", "content": "补充说明。"}]}, as_node="agent"
    )

    after = [m["content"] for m in api.http.get(f"/api/threads/{thread_id}").json()["messages"]]
    state = await client.threads.get_state(thread_id)
    assert len(working["values"]["messages"]) < len(before) == 16, "older turns left the state"
    assert after == [*before, "补充说明。"]
    assert contents(state["values"]) == after
