"""The stream modes made from the run's checkpoints (`checkpoints`, `tasks`, `debug`), the
`events` mode, `stream_subgraphs`, and breakpoints (`interrupt_before`/`interrupt_after`),
through langgraph-sdk against `react-agent serve` on both backends.

The shapes are LangGraph's own: the same scripted replies go through the weather graph
in this process (`graph.astream` / `astream_events`) and the parts the server sends are
compared with what LangGraph yields there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command as GraphCommand
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command

from app.http.langgraph.encoding import dumps
from graphs import weather
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.langgraph_api.conftest import collect, said
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers
CHECKPOINT_MODES = ["checkpoints", "tasks", "debug"]
QUESTION = "查天气"
ASK = tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"})


def answers() -> list[Any]:
    return [tool_call("get_weather", {"location": "上海"}), text("上海今天晴。")]


async def shanghai(
    client: LangGraphClient, thread_id: str, **options: Any
) -> list[tuple[str, Any, str | None]]:
    """The parts of a stream asking for Shanghai's weather on the thread, with `options`."""
    return await collect(
        client.runs.stream(thread_id, "weather", input=said("上海天气"), **options)
    )


def shape(mode: str, data: Any) -> tuple[Any, ...]:
    """What LangGraph's part says, without what differs by run (ids, times, model output)."""
    if mode == "checkpoints":
        meta = data["metadata"]
        tasks = [(t["name"], sorted(t), len(t["interrupts"])) for t in data["tasks"]]
        return (mode, meta["source"], meta["step"], data["next"], tasks, sorted(data))
    if mode == "tasks":
        asked = len(data.get("interrupts", ()))
        return (
            mode,
            data["name"],
            sorted(data),
            data.get("triggers"),
            asked,
            _call(data.get("input")),
        )
    assert mode == "debug"
    payload = data["payload"]
    keys = set(payload)
    if data["type"] == "checkpoint":
        keys -= {"checkpoint", "parent_checkpoint"}  # langgraph-api adds them (Studio reads them)
    extra = (
        (payload["name"], len(payload.get("interrupts", ())))
        if data["type"] != "checkpoint"
        else payload["metadata"]["step"]
    )
    return (mode, data["type"], data["step"], extra, sorted(keys), sorted(data))


def _call(task_input: Any) -> Any:
    """A Send's call without its id (the double numbers its calls by request)."""
    if isinstance(task_input, dict) and "call" in task_input:
        return task_input["call"]["name"], task_input["call"]["args"]
    return None


async def langgraph_parts(
    graph: Any, run_input: Any, thread: str, modes: list[str]
) -> list[tuple[str, Any]]:
    """What LangGraph itself streams in these modes, as JSON."""
    config = {"configurable": {"thread_id": thread}}
    return [
        (mode, json.loads(dumps(data)))
        async for mode, data in graph.astream(run_input, config, stream_mode=modes)
    ]


def our_parts(parts: list[tuple[str, Any, str | None]], modes: list[str]) -> list[tuple[str, Any]]:
    return [(event, data) for event, data, _ in parts if event in modes]


async def test_checkpoints_tasks_and_debug_are_the_parts_langgraph_streams_for_the_same_replies(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    graph = weather.make_graph(InMemorySaver())
    llm.script(ASK)
    theirs = await langgraph_parts(
        graph, {"messages": [HumanMessage(QUESTION)]}, "t1", CHECKPOINT_MODES
    )
    llm.script(*answers())
    theirs_resumed = await langgraph_parts(
        graph, GraphCommand(resume="上海"), "t1", CHECKPOINT_MODES
    )
    thread_id = (await client.threads.create())["thread_id"]

    llm.script(ASK)
    asked = await collect(
        client.runs.stream(
            thread_id,
            "weather",
            input={"messages": [{"role": "user", "content": QUESTION}]},
            stream_mode=CHECKPOINT_MODES,
        )
    )
    llm.script(*answers())
    answered = await collect(
        client.runs.stream(
            thread_id, "weather", command=Command(resume="上海"), stream_mode=CHECKPOINT_MODES
        )
    )

    ours, ours_resumed = our_parts(asked, CHECKPOINT_MODES), our_parts(answered, CHECKPOINT_MODES)
    assert [shape(*part) for part in ours] == [shape(*part) for part in theirs]
    assert [shape(*part) for part in ours_resumed] == [shape(*part) for part in theirs_resumed]
    # The ids are the thread's own: each checkpoint shown is one of its history, in order.
    history = await client.threads.get_history(thread_id, limit=100)
    kept = [state["checkpoint"]["checkpoint_id"] for state in reversed(history)]
    shown = [
        data["config"]["configurable"]["checkpoint_id"]
        for event, data in ours + ours_resumed
        if event == "checkpoints"
    ]
    assert shown == [kept[0], kept[1], kept[2], kept[2], *kept[3:]]
    debug = [data["payload"] for event, data in ours if event == "debug"]
    for payload in (p for p in debug if "config" in p):
        assert (
            payload["checkpoint"]["checkpoint_id"]
            == payload["config"]["configurable"]["checkpoint_id"]
        )
        parent = payload["parent_config"]
        assert (payload["parent_checkpoint"] or {}).get("checkpoint_id") == (
            parent["configurable"]["checkpoint_id"] if parent else None
        )
    # Task ids are LangGraph's: the tasks of the thread's checkpoints.
    task_ids = {task["id"] for state in history for task in state["tasks"]}
    assert {data["id"] for event, data in ours + ours_resumed if event == "tasks"} <= task_ids
    [interrupted] = [d for e, d in ours if e == "tasks" and d.get("interrupts")]
    assert interrupted["interrupts"][0]["value"]["message"] == "哪个城市？"


async def test_events_are_astream_events_shaped_for_the_graph_its_nodes_the_model_and_tools(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    graph = weather.make_graph(InMemorySaver())
    llm.script(*answers())
    config = {"configurable": {"thread_id": "t1"}}
    theirs = [
        json.loads(dumps(event))
        async for event in graph.astream_events(
            {"messages": [HumanMessage("上海天气")]}, config, version="v2"
        )
    ]
    thread_id = (await client.threads.create())["thread_id"]

    llm.script(*answers())
    parts = await shanghai(client, thread_id, stream_mode="events")

    ours = [data for event, data, _ in parts if event == "events"]
    assert {event for event, _, _ in parts} == {"metadata", "events", "end"}
    assert all(set(e) == set(theirs[0]) for e in ours)

    def outline(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """Chain events of the graph and its nodes, and tool events, in order."""
        chains = {"weather", "agent", "tools"}
        return [
            (e["event"], e["name"])
            for e in events
            if (e["event"] in ("on_chain_start", "on_chain_end") and e["name"] in chains)
            or e["event"] in ("on_tool_start", "on_tool_end")
        ]

    def tokens(events: list[dict[str, Any]]) -> str:
        return "".join(
            e["data"]["chunk"]["content"] for e in events if e["event"] == "on_chat_model_stream"
        )

    assert outline(ours) == outline(theirs)
    assert tokens(ours) == tokens(theirs) == "上海今天晴。"
    graph_run = ours[0]["run_id"]
    assert ours[0]["event"] == "on_chain_start" and ours[0]["parent_ids"] == []
    assert all(graph_run in e["parent_ids"] for e in ours[1:-1])
    assert ours[-1]["event"] == "on_chain_end" and ours[-1]["run_id"] == graph_run
    final = ours[-1]["data"]["output"]["messages"]
    assert final[-1]["content"] == "上海今天晴。"


async def test_a_rejoin_folds_the_same_parts_and_sends_each_once_after_last_event_id(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    modes: list[Any] = [*CHECKPOINT_MODES, "events", "values", "updates", "messages-tuple"]
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(ASK, *answers())
    ask = {"messages": [{"role": "user", "content": QUESTION}]}

    for run in ({"input": ask}, {"command": Command(resume="上海")}):
        live = await collect(client.runs.stream(thread_id, "weather", stream_mode=modes, **run))
        run_id = live[0][1]["run_id"]
        whole = await collect(client.runs.join_stream(thread_id, run_id))
        cut = len(whole) // 2
        rest = await collect(
            client.runs.join_stream(thread_id, run_id, last_event_id=whole[cut][2])
        )

        assert whole == live
        assert rest == whole[cut + 1 :]
        ids = [part_id for _, _, part_id in whole]
        assert len(set(ids)) == len(ids)
        assert {event for event, _, _ in whole} >= {*CHECKPOINT_MODES, "events", "values"}


async def test_stream_subgraphs_is_taken_and_sends_the_same_parts_without_namespaces(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    # Not the model's chunks: how many the log joins into one part depends on timing.
    modes = ["values", "updates", *CHECKPOINT_MODES]
    outlines = []
    for subgraphs in (False, True):
        thread_id = (await client.threads.create())["thread_id"]
        llm.script(*answers())
        parts = await shanghai(client, thread_id, stream_mode=modes, stream_subgraphs=subgraphs)
        outlines.append([event for event, _, _ in parts])

    assert outlines[0] == outlines[1]
    assert not any("|" in event for event in outlines[1])  # our graphs have no subgraphs


async def test_a_run_paused_before_the_tools_goes_on_with_a_run_without_input(
    client: LangGraphClient, llm: ScriptedLLM, api: Api
) -> None:
    graph = weather.make_graph(InMemorySaver())
    llm.script(answers()[0])  # LangGraph stops before the tools: the answer is not asked
    config = {"configurable": {"thread_id": "t1"}}
    theirs = [
        (mode, json.loads(dumps(data)))
        async for mode, data in graph.astream(
            {"messages": [HumanMessage("上海天气")]},
            config,
            stream_mode=["updates"],
            interrupt_before=["tools"],
        )
    ]
    thread_id = (await client.threads.create())["thread_id"]

    llm.script(*answers())
    paused = await shanghai(client, thread_id, stream_mode="updates", interrupt_before=["tools"])

    assert [next(iter(d)) for e, d, _ in paused if e == "updates"] == [
        next(iter(d)) for _, d in theirs
    ]
    assert [d for e, d, _ in paused if e == "updates"][-1] == {"__interrupt__": []}
    run = (await client.runs.list(thread_id))[0]
    assert run["status"] == "interrupted"
    thread = await client.threads.get(thread_id)
    assert thread["status"] == "interrupted"
    state = await client.threads.get_state(thread_id)
    assert state["next"] == ["tools"] and state["interrupts"] == []
    # Over AG-UI the same run ends with one interrupt saying why (AG-UI wants one).
    outcome = api.join(thread_id, run["run_id"]).last["outcome"]
    [pause] = outcome["interrupts"]
    assert (outcome["type"], pause["reason"], pause["metadata"]) == (
        "interrupt",
        "breakpoint",
        {"next": ["tools"]},
    )

    went_on = await collect(
        client.runs.stream(thread_id, "weather", input=None, stream_mode=["values", "updates"])
    )

    assert [next(iter(d)) for e, d, _ in went_on if e == "updates"] == ["tools", "agent"]
    final = [d for e, d, _ in went_on if e == "values"][-1]
    assert [m["type"] for m in final["messages"]] == ["human", "ai", "tool", "ai"]
    assert final["messages"][-1]["content"] == "上海今天晴。"
    assert (await client.threads.get(thread_id))["status"] == "idle"
    assert (await client.threads.get_state(thread_id))["next"] == []


async def test_interrupt_after_every_node_pauses_after_each_step(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(*answers())
    ask = {"messages": [{"role": "user", "content": "上海天气"}]}

    nexts = []
    values = await client.runs.wait(thread_id, "weather", input=ask, interrupt_after="*")
    nexts.append((await client.threads.get_state(thread_id))["next"])
    while nexts[-1]:
        values = await client.runs.wait(thread_id, "weather", interrupt_after="*")
        nexts.append((await client.threads.get_state(thread_id))["next"])

    assert nexts == [["tools"], ["agent"], []]
    assert values["messages"][-1]["content"] == "上海今天晴。"


async def test_breakpoints_on_unknown_nodes_and_runs_with_nothing_to_go_on_are_refused(
    client: LangGraphClient,
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    refusals = []

    for body in (
        {"assistant_id": "weather", "input": {"messages": ["你好"]}, "interrupt_before": ["nope"]},
        {"assistant_id": "weather", "input": {"messages": ["你好"]}, "interrupt_after": "all"},
        {"assistant_id": "weather"},
    ):
        response = await client.http.client.post(f"/threads/{thread_id}/runs/wait", json=body)
        refusals.append((response.status_code, response.json()["code"]))

    assert refusals == [(422, "unknown_node"), (422, "invalid_body"), (422, "no_user_message")]
    assert await client.runs.list(thread_id) == []


async def test_a_run_without_input_from_an_earlier_checkpoint_runs_its_next_step_again(
    client: LangGraphClient, llm: ScriptedLLM
) -> None:
    thread_id = (await client.threads.create())["thread_id"]
    llm.script(text("北京晴。"), text("北京多云。"))
    await client.runs.wait(
        thread_id, "weather", input={"messages": [{"role": "user", "content": "北京"}]}
    )
    history = await client.threads.get_history(thread_id, limit=100)
    [before_reply] = [state for state in history if state["next"] == ["agent"]]

    values = await client.runs.wait(
        thread_id, "weather", checkpoint_id=before_reply["checkpoint"]["checkpoint_id"]
    )

    assert [m["content"] for m in values["messages"]] == ["北京", "北京多云。"]
    state = await client.threads.get_state(thread_id)
    assert [m["content"] for m in state["values"]["messages"]] == ["北京", "北京多云。"]
