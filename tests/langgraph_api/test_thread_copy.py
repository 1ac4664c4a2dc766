"""`POST /threads/{id}/copy` through langgraph-sdk, and threads found by the search before
their first run and by metadata a PATCH gave them (both backends)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError
from langgraph_sdk.schema import Command

from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.langgraph_api.conftest import LongReplies, contents, said
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers
# A small window, so that a long thread's older turns leave its working state.
SERVER_ENV = {"AGENT_CONTEXT_TOKENS": "2048"}


def checkpoint_ids(history: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [
        (s["checkpoint"]["checkpoint_id"], (s["parent_checkpoint"] or {}).get("checkpoint_id"))
        for s in history
    ]


async def test_a_copy_has_the_history_and_question_and_goes_its_own_way(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    thread_id = (await client.threads.create(metadata={"topic": "天气"}))["thread_id"]
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    await client.runs.wait(thread_id, "weather", input=said("查天气"))

    copy = await client.threads.copy(thread_id)
    copy_id = copy["thread_id"]
    source_history = await client.threads.get_history(thread_id, limit=100)
    copy_history = await client.threads.get_history(copy_id, limit=100)
    llm.script(text("上海晴。"))
    answered = await client.runs.wait(copy_id, "weather", command=Command(resume="上海"))

    assert copy_id != thread_id
    assert copy["status"] == "interrupted" and copy["metadata"]["topic"] == "天气"
    assert [i["value"] for pending in copy["interrupts"].values() for i in pending] == [
        {"type": "input", "message": "哪个城市？", "placeholder": "北京"}
    ]
    assert checkpoint_ids(copy_history) == checkpoint_ids(source_history)
    assert [s["values"] for s in copy_history] == [s["values"] for s in source_history]
    assert contents(answered)[-1] == "上海晴。"
    source = await client.threads.get(thread_id)
    assert source["status"] == "interrupted", "the source still waits for its answer"
    listed = [t["threadId"] for t in api.http.get("/api/threads").json()]
    found = [t["thread_id"] for t in await client.threads.search(limit=100)]
    assert copy_id in listed and copy_id in found
    runs = api.http.get(f"/api/threads/{copy_id}/runs").json()
    assert [r["status"] for r in runs] == ["success", "interrupted"]


async def test_a_copy_is_refused_while_a_run_is_in_progress_and_unknown_threads_are_404(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    llm.script(hang(30, partial="我"))
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "weather", input=said("慢慢说"))
    await llm.await_requests(1)

    with pytest.raises(ConflictError) as refused:
        await client.threads.copy(thread_id)
    await client.runs.cancel(thread_id, run["run_id"], wait=True)

    assert refused.value.response.json()["code"] == "thread_busy"
    with pytest.raises(NotFoundError):
        await client.threads.copy("no-such-thread")


async def test_a_copy_of_a_long_thread_keeps_the_messages_its_state_let_go(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    llm.fallback = LongReplies()
    thread_id = (await client.threads.create())["thread_id"]
    for n in range(1, 9):
        await client.runs.wait(thread_id, "weather", input=said(f"第{n}个问题"))

    copy_id = (await client.threads.copy(thread_id))["thread_id"]
    await client.runs.wait(copy_id, "weather", input=said("第9个问题"))

    source = [m["content"] for m in api.http.get(f"/api/threads/{thread_id}").json()["messages"]]
    copied = [m["content"] for m in api.http.get(f"/api/threads/{copy_id}").json()["messages"]]
    assert len(source) == 16
    assert copied[:16] == source and copied[16] == "第9个问题"
    assert contents((await client.threads.get_state(copy_id))["values"]) == copied


async def test_threads_without_runs_are_searched_and_counted_with_their_metadata(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    tag = {"project": "alpha-7"}
    fresh = await client.threads.create(metadata={**tag, "graph_id": "weather"})
    other = await client.threads.create(metadata={"project": "beta"})
    llm.script(text("晴。"))
    ran = (await client.threads.create())["thread_id"]
    await client.runs.wait(ran, "weather", input=said("今天天气"))

    unpatched = await client.threads.get(ran)
    patched = await client.threads.update(ran, metadata={**tag, "owner_team": "天气组"})
    found = await client.threads.search(metadata=tag, limit=100)
    counted = await client.threads.count(metadata=tag)
    by_graph = await client.threads.search(metadata={"graph_id": "weather"}, limit=100)
    again = await client.threads.get(ran)

    assert patched["metadata"]["owner_team"] == "天气组"
    assert again["metadata"]["project"] == "alpha-7"
    assert again["created_at"] == unpatched["created_at"], "it began with its first run"
    assert {t["thread_id"] for t in found} == {fresh["thread_id"], ran}
    assert counted == 2
    assert {fresh["thread_id"], ran} <= {t["thread_id"] for t in by_graph}
    assert other["thread_id"] not in {t["thread_id"] for t in by_graph}
    listed = next(t for t in found if t["thread_id"] == fresh["thread_id"])
    assert listed["status"] == "idle" and listed["values"] is None
    assert [t["metadata"]["title"] for t in found if t["thread_id"] == ran] == ["今天天气"]
