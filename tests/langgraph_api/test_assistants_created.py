"""Created assistants through langgraph-sdk (both backends): created, changed (each
change a version), listed with the system ones, moved back to a version, deleted; their
creator's alone; and their config applied to their runs, under the run's own."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

from graphs.react import STEP_LIMIT
from tests.doubles.llm import ScriptedLLM, text
from tests.langgraph_api.conftest import WEATHER_ASSISTANT

pytestmark = pytest.mark.processes  # real servers

QUESTION = {"messages": [{"role": "user", "content": "北京天气？"}]}
# LangGraph's own config key, which the agents' step guard reads (`remaining_steps`): this
# little leaves the agent no step for a model call.
NO_STEPS = {"recursion_limit": 3}


async def test_an_assistant_is_created_changed_listed_moved_back_and_deleted(
    clients: dict[str, LangGraphClient],
) -> None:
    assistants = clients["alice"].assistants
    made = await assistants.create(
        "weather",
        config={"configurable": {"tone": "brief"}},
        metadata={"team": "a"},
        name="简报",
        description="天气简报",
    )
    changed = await assistants.update(made["assistant_id"], metadata={"stage": "2"}, name="简报2")
    found = await assistants.search(graph_id="weather", limit=100)
    counted = await assistants.count(graph_id="weather")
    by_metadata = await assistants.search(metadata={"team": "a"}, limit=100)
    versions = await assistants.get_versions(made["assistant_id"])
    back = await assistants.set_latest(made["assistant_id"], 1)

    assert made["graph_id"] == "weather" and made["version"] == 1
    assert made["config"] == {"configurable": {"tone": "brief"}}
    assert made["context"] == {"tone": "brief"}  # kept in step, as LangGraph's servers do
    assert (made["name"], made["description"], made["metadata"]) == (
        "简报",
        "天气简报",
        {"team": "a"},
    )
    assert changed["version"] == 2 and changed["name"] == "简报2"
    assert changed["metadata"] == {"team": "a", "stage": "2"}  # merged
    assert changed["config"] == made["config"]  # not given: kept
    assert [a["assistant_id"] for a in found] == [made["assistant_id"], WEATHER_ASSISTANT]
    assert counted == 2
    assert [a["assistant_id"] for a in by_metadata] == [made["assistant_id"]]
    assert [(v["version"], v["name"]) for v in versions] == [(2, "简报2"), (1, "简报")]
    assert back["version"] == 1 and back["name"] == "简报" and back["metadata"] == {"team": "a"}
    assert await assistants.get(made["assistant_id"]) == back
    moved_on = await assistants.update(made["assistant_id"], context={"tone": "long"})
    assert moved_on["version"] == 3 and moved_on["name"] == "简报"  # from the one in use
    assert moved_on["context"] == {"tone": "long"}
    assert moved_on["config"] == {"configurable": {"tone": "long"}}
    graph = await assistants.get_graph(made["assistant_id"])
    assert {"agent", "tools"} <= {node["id"] for node in graph["nodes"]}

    with pytest.raises(NotFoundError):
        await assistants.set_latest(made["assistant_id"], 7)
    await assistants.delete(made["assistant_id"])
    with pytest.raises(NotFoundError):
        await assistants.get(made["assistant_id"])
    assert [a["assistant_id"] for a in await assistants.search(graph_id="weather")] == [
        WEATHER_ASSISTANT
    ]


async def test_an_id_taken_a_system_assistant_and_bad_bodies_are_refused_with_a_code(
    clients: dict[str, LangGraphClient],
) -> None:
    alice = clients["alice"]
    wanted = str(uuid.uuid4())
    made = await alice.assistants.create("weather", assistant_id=wanted, name="一")
    again = await alice.assistants.create(
        "weather", assistant_id=wanted, name="二", if_exists="do_nothing"
    )
    with pytest.raises(ConflictError) as taken:
        await alice.assistants.create("weather", assistant_id=wanted)
    with pytest.raises(ConflictError) as system_delete:
        await alice.assistants.delete(WEATHER_ASSISTANT)
    with pytest.raises(ConflictError) as system_change:
        await alice.assistants.update("weather", name="改不了")
    http = alice.http.client
    refused = []
    for body in (
        {"graph_id": "nope"},
        {"graph_id": "weather", "assistant_id": "not-a-uuid"},
        {"graph_id": "weather", "config": {"recursion_limit": 0}},
        {"graph_id": "weather", "config": {"configurable": {"a": 1}}, "context": {"a": 2}},
        {"graph_id": "weather", "metadata": ["not", "an", "object"]},
    ):
        answer = await http.post("/assistants", json=body)
        refused.append((answer.status_code, answer.json()["code"]))

    assert again == made
    assert taken.value.response.json()["code"] == "assistant_exists"
    assert system_delete.value.response.json()["code"] == "system_assistant"
    assert system_change.value.response.json()["code"] == "system_assistant"
    assert refused == [(404, "unknown_graph")] + [(422, "invalid_body")] * 4
    assert (await alice.assistants.get(WEATHER_ASSISTANT))["metadata"] == {"created_by": "system"}
    with pytest.raises(UnprocessableEntityError):
        await alice.assistants.delete(wanted, delete_threads=True)
    with pytest.raises(UnprocessableEntityError):  # the assistant is there; the graph is not
        await alice.assistants.update(wanted, graph_id="nope")
    assert (await alice.assistants.get(wanted))["version"] == 1


async def test_another_users_assistant_is_one_there_is_not_and_an_admin_reaches_it(
    clients: dict[str, LangGraphClient], llm: ScriptedLLM
) -> None:
    alice, bob, admin = clients["alice"], clients["bob"], clients["admin"]
    made = await alice.assistants.create("weather", name="Alice 的")
    mine = made["assistant_id"]

    for attempt in (
        lambda: bob.assistants.get(mine),
        lambda: bob.assistants.update(mine, name="Bob 的"),
        lambda: bob.assistants.delete(mine),
        lambda: bob.assistants.get_versions(mine),
        lambda: bob.assistants.set_latest(mine, 1),
        lambda: bob.assistants.get_schemas(mine),
        lambda: bob.runs.wait(None, mine, input=QUESTION),
        lambda: bob.assistants.create("weather", assistant_id=mine, if_exists="do_nothing"),
    ):
        # (`runs.wait` raises httpx's own error: the SDK reads its answer itself.)
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await attempt()
        assert refused.value.response.status_code == 404
        assert refused.value.response.json()["code"] == "unknown_graph"
    assert mine not in [a["assistant_id"] for a in await bob.assistants.search(limit=100)]
    assert await bob.assistants.count() == len(await bob.assistants.search(limit=100))
    assert llm.requests == []  # Bob's run never started

    assert mine in [a["assistant_id"] for a in await admin.assistants.search(limit=100)]
    assert (await admin.assistants.get(mine))["name"] == "Alice 的"
    assert (await alice.assistants.get(mine))["name"] == "Alice 的"  # nothing of it changed


async def test_an_assistants_config_is_applied_to_its_runs_under_the_runs_own(
    clients: dict[str, LangGraphClient], llm: ScriptedLLM
) -> None:
    alice = clients["alice"]
    limited = await alice.assistants.create("weather", config=NO_STEPS, name="没有步数")
    thread_id = (await alice.threads.create())["thread_id"]

    stopped = await alice.runs.wait(thread_id, limited["assistant_id"], input=QUESTION)
    asked_model = len(llm.requests)
    llm.script(text("晴。"))
    overridden = await alice.runs.wait(
        None, limited["assistant_id"], input=QUESTION, config={"recursion_limit": 25}
    )
    llm.script(text("晴。"))
    system = await alice.runs.wait(None, "weather", input=QUESTION)

    assert stopped["messages"][-1]["content"] == STEP_LIMIT.format(steps=0)
    assert asked_model == 0  # the assistant's config left no step for the model
    assert overridden["messages"][-1]["content"] == "晴。"  # the run's own config won
    assert system["messages"][-1]["content"] == "晴。"
    assert len(llm.requests) == 2
    runs = await alice.runs.list(thread_id)
    assert [run["assistant_id"] for run in runs] == [limited["assistant_id"]]
