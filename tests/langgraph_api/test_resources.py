"""Info, assistants and threads through langgraph-sdk, and bad requests answered with
clear 4xx (both backends)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.langgraph_api.conftest import WEATHER_ASSISTANT, collect
from tests.service.conftest import OPENAI_SECRET, Api

pytestmark = pytest.mark.processes  # real servers


def test_info_and_ok_answer(api: Api) -> None:
    info = api.http.get("/info")
    ok = api.http.get("/ok")

    assert info.status_code == 200 and info.json()["flags"]["assistants"] is True
    assert ok.json() == {"ok": True}
    assert httpx.get(f"{api.server.url}/info").status_code == 401  # the same key as /api


async def test_each_graph_is_a_system_assistant_found_by_its_uuid5_id_or_graph_id(
    client: LangGraphClient,
) -> None:
    found = await client.assistants.search(graph_id="weather")
    by_id = await client.assistants.get(WEATHER_ASSISTANT)
    by_graph = await client.assistants.get("weather")
    count = await client.assistants.count()
    graph = await client.assistants.get_graph("weather")
    schemas = await client.assistants.get_schemas(WEATHER_ASSISTANT)
    subgraphs = await client.assistants.get_subgraphs("weather")

    assert [a["assistant_id"] for a in found] == [WEATHER_ASSISTANT]
    assert by_id == by_graph == found[0]
    assert by_id["metadata"] == {"created_by": "system"} and by_id["graph_id"] == "weather"
    assert count == len(await client.assistants.search(limit=100)) >= 2
    assert {"agent", "tools"} <= {node["id"] for node in graph["nodes"]}
    assert "messages" in schemas["input_schema"]["properties"]
    assert subgraphs == {}
    with pytest.raises(NotFoundError):
        await client.assistants.get(str(uuid.uuid4()))


async def test_threads_are_created_found_searched_renamed_and_deleted(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = str(uuid.uuid4())
    created = await client.threads.create(thread_id=thread_id)
    llm.script(text("晴。"))
    await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "今天天气"}]}
    )

    again = await client.threads.create(thread_id=thread_id, if_exists="do_nothing")
    found = await client.threads.search(metadata={"graph_id": "weather"}, limit=200)
    by_assistant = await client.threads.search(
        metadata={"assistant_id": WEATHER_ASSISTANT}, limit=200
    )
    renamed = await client.threads.update(thread_id, metadata={"title": "今日天气"})
    counted = await client.threads.count(metadata={"graph_id": "weather"})

    assert created["thread_id"] == thread_id and created["status"] == "idle"
    assert again["thread_id"] == thread_id and again["values"]["messages"][-1]["content"] == "晴。"
    assert thread_id in [t["thread_id"] for t in found]
    assert thread_id in [t["thread_id"] for t in by_assistant]
    assert renamed["metadata"]["graph_id"] == "weather"
    assert counted == len(found)
    titles = [
        t["metadata"]["title"]
        for t in await client.threads.search(metadata={"graph_id": "weather"}, limit=200)
        if t["thread_id"] == thread_id
    ]
    assert titles == ["今日天气"]
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=thread_id)
    assert len(await client.runs.list(thread_id)) == 1
    await client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await client.threads.get(thread_id)
    with pytest.raises(NotFoundError):
        await client.runs.list(thread_id)


async def test_if_not_exists_reject_refuses_a_thread_there_is_not_and_create_makes_it(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = str(uuid.uuid4())
    question = {"messages": [{"role": "user", "content": "天气"}]}

    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.runs.wait(thread_id, "weather", input=question, if_not_exists="reject")
    refused_left = await client.http.client.get(f"/threads/{thread_id}")
    llm.script(text("晴。"), text("多云。"), text("还是晴。"))
    made = await client.runs.wait(thread_id, "weather", input=question, if_not_exists="create")
    stateless = await client.runs.wait(None, "weather", input=question, if_not_exists="reject")

    assert refused.value.response.status_code == 404
    assert refused.value.response.json()["code"] == "unknown_thread"
    assert refused_left.status_code == 404, "the refused run made no thread"
    assert made["messages"][-1]["content"] == "晴。"
    assert stateless["messages"][-1]["content"] == "多云。", "a stateless run's thread is new"
    again = await client.runs.wait(thread_id, "weather", input=question, if_not_exists="reject")
    assert again["messages"][0]["content"] == "天气", "an existing thread is taken"


async def test_bad_run_requests_are_refused_clearly_and_change_nothing(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    refusals = []
    for bad in (
        {"assistant_id": "nope", "input": {"messages": [{"role": "user", "content": "x"}]}},
        {"assistant_id": "weather", "input": {"messages": [{"role": "assistant", "content": "x"}]}},
        {"assistant_id": "weather", "input": {}},
        {"assistant_id": "weather", "command": {"resume": "北京"}},
        {"assistant_id": "weather", "command": {"goto": "nowhere"}},
        {"input": {"messages": []}},
    ):
        response = await client.http.client.post(f"/threads/{thread_id}/runs/wait", json=bad)
        refusals.append((response.status_code, response.json()["code"]))

    assert refusals == [
        (404, "unknown_graph"),
        (422, "invalid_body"),
        (422, "no_user_message"),
        (404, "unknown_thread"),  # a resume needs a thread that asked
        (422, "unknown_node"),
        (422, "invalid_body"),
    ]
    assert await client.runs.list(thread_id) == []  # nothing was started
    assert (await client.threads.get(thread_id))["values"] is None


async def test_a_wrong_answer_is_refused_and_the_question_stays(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(tool_call("ask_confirm", {"message": "确定吗？"}))
    await collect(
        client.runs.stream(
            thread_id, "weather", input={"messages": [{"role": "user", "content": "确认一下"}]}
        )
    )

    with pytest.raises(httpx.HTTPStatusError) as refused:  # what the SDK's wait raises
        await client.runs.wait(thread_id, "weather", command={"resume": "也许"})

    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["code"] == "invalid_answer"
    assert (await client.threads.get(thread_id))["status"] == "interrupted"


def test_studio_is_not_allowed_unless_agent_studio_says_so(api: Api) -> None:
    studio = "https://smith.langchain.com"
    preflight = api.http.options(
        "/threads/search",
        headers={"Origin": studio, "Access-Control-Request-Method": "POST"},
    )
    text_body = api.http.post(
        "/threads/search", content="{}", headers={"Origin": studio, "Content-Type": "text/plain"}
    )

    assert "access-control-allow-origin" not in preflight.headers
    assert (text_body.status_code, text_body.json()["code"]) == (415, "unsupported_media_type")


async def test_a_created_thread_exists_with_its_metadata_before_its_first_run(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    created = await client.threads.create(metadata={"user": "小王"})
    thread_id = created["thread_id"]

    before = await client.threads.get(thread_id)
    runs_before = await client.runs.list(thread_id)
    renamed = await client.threads.update(thread_id, metadata={"title": "问天气"})
    llm.script(text("晴。"))
    await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "天气"}]}
    )
    after = await client.threads.get(thread_id)

    assert runs_before == [], "a made thread is there with no runs yet"
    assert created["metadata"] == {"user": "小王"} and created["status"] == "idle"
    assert before["metadata"] == {"user": "小王"} and before["values"] is None
    assert renamed["metadata"] == {"user": "小王", "title": "问天气"}
    assert after["metadata"]["user"] == "小王" and after["metadata"]["graph_id"] == "weather"
    assert after["values"]["messages"][-1]["content"] == "晴。"
    await client.threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await client.threads.get(thread_id)


async def test_a_secret_a_reply_quoted_is_masked_in_streams_states_and_threads(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text(f"你的密钥是 {OPENAI_SECRET}。"), text("好的。"))
    first = await collect(
        client.runs.stream(
            thread_id,
            "weather",
            input={"messages": [{"role": "user", "content": "密钥"}]},
            stream_mode=["values", "messages-tuple"],
        )
    )
    second = await collect(
        client.runs.stream(
            thread_id,
            "weather",
            input={"messages": [{"role": "user", "content": "再说一次"}]},
            stream_mode=["values", "updates"],
        )
    )

    shown = [
        first,
        second,
        await client.threads.get_state(thread_id),
        await client.threads.get(thread_id),
        await client.threads.get_history(thread_id),
    ]
    assert all(OPENAI_SECRET not in json.dumps(s, ensure_ascii=False) for s in shown)
    assert "***" in json.dumps(second, ensure_ascii=False)
