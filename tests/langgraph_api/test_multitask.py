"""Double-texting through LangGraph's API: each multitask strategy on a thread with a run
in progress, on the same run records as `/api` (both backends)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError

from tests.doubles.llm import ScriptedLLM, hang, held, text
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers


def said(text_: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text_}]}


async def busy_thread(
    client: LangGraphClient, llm: ScriptedLLM, first: Any, *, shown: str = ""
) -> tuple[str, str]:
    """A thread whose first run is going: the model was asked, and its `shown` text (if
    any) has reached the run's stream, so a run that stops it now keeps that text."""
    llm.script(first)
    thread_id = (await client.threads.create())["thread_id"]
    run = await client.runs.create(thread_id, "weather", input=said("第一句"))
    await llm.await_requests(1)
    if shown:
        parts = client.runs.join_stream(thread_id, run["run_id"], stream_mode="messages-tuple")
        async for part in parts:
            if part.event == "messages" and shown in json.dumps(part.data, ensure_ascii=False):
                break
        else:
            raise AssertionError(f"{shown!r} never reached the first run's stream")
    return thread_id, run["run_id"]


async def test_reject_refuses_a_second_run_while_one_is_in_progress(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id, first = await busy_thread(client, llm, hang(30, partial="我"))

    with pytest.raises(ConflictError):
        await client.runs.create(
            thread_id, "weather", input=said("第二句"), multitask_strategy="reject"
        )

    await client.runs.cancel(thread_id, first, wait=True)


async def test_enqueue_runs_the_second_after_the_first(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id, first = await busy_thread(client, llm, held(text("一。")))
    llm.script(text("二。"))

    second = await client.runs.create(
        thread_id, "weather", input=said("第二句"), multitask_strategy="enqueue"
    )
    assert second["status"] == "pending"
    llm.release()
    values = await client.runs.join(thread_id, second["run_id"])

    contents = [m["content"] for m in values["messages"]]
    assert contents == ["第一句", "一。", "第二句", "二。"]
    assert (await client.runs.get(thread_id, first))["status"] == "success"


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_stop_the_first_run_for_the_second(
    client: LangGraphClient, llm: ScriptedLLM, api: Api, strategy: str
) -> None:
    thread_id, first = await busy_thread(client, llm, hang(30, partial="我想"), shown="我想")
    llm.script(text("好的。"))

    second = await client.runs.create(
        thread_id, "weather", input=said("算了，换个问题"), multitask_strategy=strategy
    )
    values = await client.runs.join(thread_id, second["run_id"])

    contents = [m["content"] for m in values["messages"]]
    if strategy == "interrupt":  # the first run's shown text stays, marked stopped
        assert contents == ["第一句", "我想", "算了，换个问题", "好的。"]
    else:  # as if the first run had never been
        assert contents == ["算了，换个问题", "好的。"]
    records = {
        r["runId"]: r["status"] for r in api.http.get(f"/api/threads/{thread_id}/runs").json()
    }
    assert records == {first: "cancelled", second["run_id"]: "success"}
