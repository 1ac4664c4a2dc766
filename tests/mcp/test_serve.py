"""Serve: the agents as MCP tools at /mcp, driven by the MCP python-sdk's own client
(`ClientSession` over streamable HTTP) against `react-agent serve` on a real socket, on
both storage backends (each call is an ordinary run record)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.context import RequestContext

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Api, Backend, serving
from tests.support.processes import ServerProcess
from tests.support.user_keys import add_user

pytestmark = pytest.mark.processes

CITY_QUESTION = "请问要查询哪个城市的天气？"
SLOW_CITY = "超时城市"  # the Open-Meteo double does not answer for it
WAIT_S = 30.0


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-serve")


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM, _meteo_server: Any, data_dir: Path, backend: Backend
) -> Iterator[ServerProcess]:
    # The double's slow city stays unanswered for longer than the test waits.
    with serving(_llm_server, _meteo_server, data_dir, backend, OPEN_METEO_TIMEOUT="60") as proc:
        yield proc


@pytest.fixture
def api(server: ServerProcess) -> Iterator[Api]:
    client = Api(server)
    yield client
    client.close()


Elicit = Any  # the session's elicitation callback


@asynccontextmanager
async def mcp_session(
    server: ServerProcess, *, elicit: Elicit | None = None, key: str = API_KEY
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on the server's /mcp, with a bearer key (the
    admin's unless `key`)."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(WAIT_S)) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        yield session


def answering(*replies: types.ElicitResult) -> tuple[Elicit, list[types.ElicitRequestParams]]:
    """An elicitation callback giving `replies` in turn, and the requests it got."""
    asked: list[types.ElicitRequestParams] = []
    left = list(replies)

    async def elicit(
        context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.append(params)
        return left.pop(0)

    return elicit, asked


def city_then_weather(llm: ScriptedLLM, *after: Any) -> None:
    llm.script(tool_call("ask_input", {"message": CITY_QUESTION, "placeholder": "北京"}), *after)


async def test_tools_are_the_agents_named_by_graph_id(server: ServerProcess) -> None:
    async with mcp_session(server) as session:
        listed = await session.list_tools()

    by_name = {tool.name: tool for tool in listed.tools}
    assert set(by_name) == {"weather", "tushare"}
    schema = by_name["weather"].inputSchema
    assert schema["required"] == ["message"]
    assert set(schema["properties"]) == {"message", "thread_id"}


async def test_a_question_arrives_as_elicitation_and_the_answer_finishes_the_run(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    city_then_weather(llm, tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))
    elicit, asked = answering(types.ElicitResult(action="accept", content={"value": "北京"}))
    reported: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(message)

    async with mcp_session(server, elicit=elicit) as session:
        result = await session.call_tool(
            "weather", {"message": "查天气"}, progress_callback=on_progress
        )

    assert not result.isError, result.content
    [question] = asked
    assert question.message == CITY_QUESTION
    assert isinstance(question, types.ElicitRequestFormParams)
    field = question.requestedSchema["properties"]["value"]
    assert field["type"] == "string" and question.requestedSchema["required"] == ["value"]
    structured = result.structuredContent or {}
    assert structured["status"] == "done" and structured["answer"] == "北京今天晴。"
    thread_id = structured["thread_id"]
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    assert texts == ["北京今天晴。", f"thread_id: {thread_id}"]
    assert "调用工具 ask_input" in reported and "调用工具 get_weather" in reported
    # The tool result the model read is the geocoded Beijing's weather.
    thread = api.http.get(f"/api/threads/{thread_id}").json()
    tool_texts = [m["content"] for m in thread["messages"] if m["role"] == "tool"]
    assert tool_texts[0] == "用户回答：北京" and "北京" in tool_texts[1]
    assert thread["interrupts"] == []
    runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
    assert [run["status"] for run in runs] == ["success", "interrupted"]
    listed = api.http.get("/api/threads").json()
    assert thread_id in [summary["threadId"] for summary in listed]


async def test_a_declined_question_ends_the_run_cleanly(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    city_then_weather(llm, text("好的，不查了。"))
    elicit, asked = answering(types.ElicitResult(action="decline"))

    async with mcp_session(server, elicit=elicit) as session:
        result = await session.call_tool("weather", {"message": "查天气"})

    assert not result.isError, result.content
    assert len(asked) == 1
    structured = result.structuredContent or {}
    assert structured["status"] == "done" and structured["answer"] == "好的，不查了。"
    thread = api.http.get(f"/api/threads/{structured['thread_id']}").json()
    tool_message = next(m for m in thread["messages"] if m["role"] == "tool")
    assert tool_message["content"] == "用户取消了操作"
    assert thread["interrupts"] == []
    # The model read the cancel and answered; it was not asked about the weather.
    assert len(llm.requests) == 2


async def test_a_client_without_elicitation_gets_the_question_and_answers_with_the_thread_id(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    city_then_weather(llm, tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))

    async with mcp_session(server) as session:
        asked = await session.call_tool("weather", {"message": "查天气"})
        structured = asked.structuredContent or {}
        thread_id = structured["thread_id"]
        [block] = asked.content
        assert isinstance(block, types.TextContent)

        assert not asked.isError
        assert structured["status"] == "interrupted"
        assert structured["question"]["type"] == "input"
        assert structured["question"]["message"] == CITY_QUESTION
        assert CITY_QUESTION in block.text and thread_id in block.text
        assert "再次调用工具 weather" in block.text
        assert len(api.http.get(f"/api/threads/{thread_id}").json()["interrupts"]) == 1

        done = await session.call_tool("weather", {"message": "北京", "thread_id": thread_id})

    assert not done.isError, done.content
    assert (done.structuredContent or {})["answer"] == "北京今天晴。"
    assert (done.structuredContent or {})["thread_id"] == thread_id
    thread = api.http.get(f"/api/threads/{thread_id}").json()
    assert next(m["content"] for m in thread["messages"] if m["role"] == "tool") == "用户回答：北京"


async def test_cancelling_the_call_during_a_slow_tool_cancels_the_run(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": SLOW_CITY}), text("不会走到这里。"))
    thread_id = "t-mcp-cancel"
    tool_started = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        if message == "调用工具 get_weather":
            tool_started.set()

    async with mcp_session(server) as session:
        # The python-sdk numbers a session's requests from 0: initialize was 0, this is 1.
        call = asyncio.create_task(
            session.call_tool(
                "weather",
                {"message": "超时城市天气", "thread_id": thread_id},
                progress_callback=on_progress,
            )
        )
        await asyncio.wait_for(tool_started.wait(), WAIT_S)
        await session.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=1, reason="user stopped")
                )
            )
        )
        with pytest.raises(Exception, match="Request cancelled"):
            await asyncio.wait_for(call, WAIT_S)

    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
        if runs and runs[0]["status"] != "running":
            break
        assert asyncio.get_running_loop().time() < deadline, runs
        await asyncio.sleep(0.05)  # polling another process's record, not waiting a result
    assert [run["status"] for run in runs] == ["cancelled"]
    assert runs[0]["error"]["code"] == "cancelled"
    thread = api.http.get(f"/api/threads/{thread_id}")
    assert thread.status_code == 200
    assert thread.json()["messages"][0]["content"] == "超时城市天气"
    assert len(llm.requests) == 1  # the model was not asked again


async def test_mcp_needs_the_same_bearer_key_as_the_api(server: ServerProcess) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=server.url) as http:
        refused = await http.post("/mcp", json=initialize, headers=accept)
        wrong = await http.post(
            "/mcp", json=initialize, headers={**accept, "Authorization": "Bearer nope"}
        )
        allowed = await http.post(
            "/mcp", json=initialize, headers={**accept, "Authorization": f"Bearer {API_KEY}"}
        )

    assert refused.status_code == 401 and wrong.status_code == 401
    assert refused.json()["code"] == "unauthorized"
    assert refused.headers["www-authenticate"] == "Bearer"
    assert allowed.status_code == 200


async def test_choices_several_choices_and_yes_no_are_asked_with_their_schemas(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_choice", {"message": "哪个城市？", "options": ["北京", "上海"]}),
        tool_call("ask_multi_choice", {"message": "看哪些？", "options": ["温度", "湿度", "风"]}),
        tool_call("ask_confirm", {"message": "要查吗？"}),
        text("好的。"),
    )
    elicit, asked = answering(
        types.ElicitResult(action="accept", content={"value": "上海"}),
        types.ElicitResult(action="accept", content={"value": ["风"]}),
        types.ElicitResult(action="accept", content={"value": True}),
    )

    async with mcp_session(server, elicit=elicit) as session:
        result = await session.call_tool("weather", {"message": "查天气"})

    assert not result.isError, result.content
    choice, several, yes_no = (params.requestedSchema["properties"]["value"] for params in asked)
    assert choice["type"] == "string" and choice["enum"] == ["北京", "上海"]
    assert several["type"] == "array" and several["items"]["enum"] == ["温度", "湿度", "风"]
    assert several["minItems"] == 1
    assert yes_no["type"] == "boolean"
    thread = api.http.get(f"/api/threads/{(result.structuredContent or {})['thread_id']}").json()
    answers = [m["content"] for m in thread["messages"] if m["role"] == "tool"]
    assert "上海" in answers[0] and "风" in answers[1] and len(answers) == 3


async def test_a_wrong_answer_is_asked_again_with_the_reason(
    server: ServerProcess, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_choice", {"message": "哪个城市？", "options": ["北京", "上海"]}),
        text("好的。"),
    )
    elicit, asked = answering(
        types.ElicitResult(action="accept", content={"value": "广州"}),
        types.ElicitResult(action="accept", content={"value": "北京"}),
    )

    async with mcp_session(server, elicit=elicit) as session:
        result = await session.call_tool("weather", {"message": "查天气"})

    assert not result.isError, result.content
    first, second = asked
    assert first.message == "哪个城市？"
    assert second.message.startswith("哪个城市？\n") and "广州" in second.message
    assert (result.structuredContent or {})["answer"] == "好的。"


async def test_a_call_on_a_thread_busy_with_another_run_is_refused_by_its_rule(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": SLOW_CITY}), text("不会走到这里。"))
    thread_id = "t-mcp-busy"
    tool_started = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        tool_started.set()

    async with mcp_session(server) as first, mcp_session(server) as second:
        call = asyncio.create_task(
            first.call_tool(
                "weather", {"message": "慢", "thread_id": thread_id}, progress_callback=on_progress
            )
        )
        await asyncio.wait_for(tool_started.wait(), WAIT_S)
        refused = await second.call_tool("weather", {"message": "快", "thread_id": thread_id})
        [run] = api.http.get(f"/api/threads/{thread_id}/runs").json()
        api.http.post(f"/api/threads/{thread_id}/runs/{run['runId']}/cancel")
        stopped = await asyncio.wait_for(call, WAIT_S)

    assert refused.isError
    [block] = refused.content
    assert isinstance(block, types.TextContent) and "already has a run in progress" in block.text
    assert stopped.isError
    [block] = stopped.content
    assert isinstance(block, types.TextContent) and "cancelled" in block.text


async def test_a_client_that_ends_its_session_mid_call_cancels_the_run(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(tool_call("get_weather", {"location": SLOW_CITY}), text("不会走到这里。"))
    thread_id = "t-mcp-left"
    tool_started = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        tool_started.set()

    async with mcp_session(server) as session:
        call = asyncio.create_task(
            session.call_tool(
                "weather", {"message": "慢", "thread_id": thread_id}, progress_callback=on_progress
            )
        )
        await asyncio.wait_for(tool_started.wait(), WAIT_S)
        call.cancel()  # the client gives up; leaving the block ends the session (DELETE)

    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
        if runs and runs[0]["status"] != "running":
            break
        assert asyncio.get_running_loop().time() < deadline, runs
        await asyncio.sleep(0.05)  # polling another process's record, not waiting a result
    assert [run["status"] for run in runs] == ["cancelled"]


INSPECTOR = Path(__file__).with_name("inspector") / "node_modules" / ".bin" / "mcp-inspector"


def inspector(server: ServerProcess, *args: str) -> dict[str, Any]:
    """One `mcp-inspector --cli` call on the server's /mcp (npm's MCP Inspector); its JSON."""
    done = subprocess.run(
        [
            str(INSPECTOR),
            "--cli",
            f"{server.url}/mcp",
            "--header",
            f"Authorization: Bearer {API_KEY}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 2,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_the_mcp_inspector_cli_asks_an_agent_and_answers_its_question(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    city_then_weather(llm, tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))

    listed = inspector(server, "--method", "tools/list")
    asked = inspector(
        server, "--method", "tools/call", "--tool-name", "weather", "--tool-arg", "message=查天气"
    )
    thread_id = asked["structuredContent"]["thread_id"]
    done = inspector(
        server,
        "--method",
        "tools/call",
        "--tool-name",
        "weather",
        "--tool-arg",
        "message=北京",
        f"thread_id={thread_id}",
    )

    assert [tool["name"] for tool in listed["tools"]] == ["weather", "tushare"]
    assert asked["structuredContent"]["status"] == "interrupted"
    assert CITY_QUESTION in asked["content"][0]["text"]
    assert done["structuredContent"] == {
        "status": "done",
        "thread_id": thread_id,
        "run_id": done["structuredContent"]["run_id"],
        "answer": "北京今天晴。",
    }
    assert api.http.get(f"/api/threads/{thread_id}").json()["interrupts"] == []


async def test_a_shutdown_mid_call_leaves_the_run_to_the_next_start_not_cancelled(
    _llm_server: ScriptedLLM,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    tmp_path: Path,
    backend: Backend,
) -> None:
    meteo.hang_forecast(30)
    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海多云。"))
    thread_id = "t-mcp-shutdown"
    tool_started = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        tool_started.set()

    with serving(llm, meteo, tmp_path, backend, AGENT_SHUTDOWN_GRACE_S="1") as first:
        async with mcp_session(first) as session:
            call = asyncio.create_task(
                session.call_tool(
                    "weather",
                    {"message": "上海天气", "thread_id": thread_id},
                    progress_callback=on_progress,
                )
            )
            await asyncio.wait_for(tool_started.wait(), WAIT_S)
            first.process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(first.process.wait, 15)
            call.cancel()
    meteo.reset()

    with serving(llm, meteo, tmp_path, backend) as again:
        api = Api(again)
        try:
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while True:
                runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
                if runs and runs[0]["status"] not in ("running", "queued"):
                    break
                assert asyncio.get_running_loop().time() < deadline, runs
                await asyncio.sleep(0.05)  # polling another process's record
            thread = api.http.get(f"/api/threads/{thread_id}").json()
        finally:
            api.close()

    assert [run["status"] for run in runs] == ["success"]
    assert thread["messages"][-1]["content"] == "上海多云。"


async def test_another_users_thread_is_unknown_over_mcp_and_a_users_runs_are_their_own(
    server: ServerProcess, llm: ScriptedLLM, backend: Backend, data_dir: Path, api: Api
) -> None:
    agent_db = backend.agent_db(data_dir)
    alice, bob = add_user(agent_db, "mcp-alice"), add_user(agent_db, "mcp-bob")
    city_then_weather(llm)
    async with mcp_session(server, key=alice) as session:  # no elicitation: asked back
        asked = await session.call_tool("weather", {"message": "查天气"})
    thread_id = (asked.structuredContent or {})["thread_id"]
    requests = len(llm.requests)

    async with mcp_session(server, key=bob) as session:
        taken = await session.call_tool("weather", {"message": "北京", "thread_id": thread_id})

    assert taken.isError
    [block] = taken.content
    assert isinstance(block, types.TextContent)
    assert block.text == f"thread {thread_id} not found"  # as a thread there is not
    assert len(llm.requests) == requests  # Bob's call reached no model
    owners = {t["threadId"]: t["owner"] for t in api.http.get("/api/threads").json()}
    assert owners[thread_id] == "mcp-alice"
    pending = api.http.get(f"/api/threads/{thread_id}").json()["interrupts"]
    assert len(pending) == 1  # Alice's question still waits for Alice
