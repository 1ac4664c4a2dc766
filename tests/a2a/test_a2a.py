"""The agents over A2A, driven by the a2a-sdk's own client against `react-agent serve` on
a real socket, on both storage backends: a question is the task's `input-required` state,
the next message on the task answers it, and the run is an ordinary record."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_message_text, new_text_message
from a2a.types import CancelTaskRequest, GetTaskRequest, Role, SendMessageRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Api, Backend, serving
from tests.support.processes import ServerProcess
from tests.support.user_keys import add_user

pytestmark = pytest.mark.processes

CITY_QUESTION = "请问要查询哪个城市的天气？"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("a2a")


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


async def send(client: Any, message: Any) -> Any:
    """The task as the last response of one message/send says it."""
    last = None
    async for response in client.send_message(SendMessageRequest(message=message)):
        last = response
    return last


async def test_a_question_is_input_required_and_the_next_message_answers_it(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_input", {"message": CITY_QUESTION}),
        tool_call("get_weather", {"location": "北京"}),
        text("北京今天晴。"),
    )
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        card = (await http.get(f"{server.url}/.well-known/agent-card.json")).json()
        client = await create_client(
            server.url, client_config=ClientConfig(streaming=False, httpx_client=http)
        )
        asked = await send(client, new_text_message("查天气", role=Role.ROLE_USER))
        task = asked.task
        done = await send(
            client,
            new_text_message(
                "北京", role=Role.ROLE_USER, task_id=task.id, context_id=task.context_id
            ),
        )
        got = await client.get_task(GetTaskRequest(id=task.id))

    assert [skill["id"] for skill in card["skills"]] == ["weather", "tushare"]
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    question = get_message_text(task.status.message)
    assert CITY_QUESTION in question and "在这个任务里回复" in question
    assert done.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.task.status.message) == "北京今天晴。"
    assert got.status.state == TaskState.TASK_STATE_COMPLETED
    thread = api.http.get(f"/api/threads/{task.context_id}").json()
    assert thread["graphId"] == "weather" and thread["interrupts"] == []


async def test_a2a_0_3_clients_send_and_read_tasks_by_the_old_method_names_with_the_key(
    server: ServerProcess, api: Api, llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("ask_choice", {"message": "哪个城市？", "options": ["北京", "上海"]}),
        tool_call("get_weather", {"location": "上海"}),
        text("上海多云。"),
    )

    def message(text: str, **ids: str) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": text,
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "role": "user",
                    "messageId": f"m-{text}",
                    "parts": [{"kind": "text", "text": text}],
                    **ids,
                }
            },
        }

    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        refused = await http.post("/a2a", json=message("查天气"))
        asked = (await http.post("/a2a", json=message("查天气"), headers=headers)).json()
        task = asked["result"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        done = (await http.post("/a2a", json=message("2", **ids), headers=headers)).json()
        get = {"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": {"id": task["id"]}}
        got = (await http.post("/a2a", json=get, headers=headers)).json()

    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    assert task["status"]["state"] == "input-required"
    question = task["status"]["message"]["parts"][0]["text"]
    assert "哪个城市？" in question and "2. 上海" in question
    assert done["result"]["status"]["state"] == "completed"
    assert done["result"]["status"]["message"]["parts"][0]["text"] == "上海多云。"
    assert got["result"]["status"]["state"] == "completed"
    runs = api.http.get(f"/api/threads/{task['contextId']}/runs").json()
    assert [run["status"] for run in runs] == ["success", "interrupted"]


async def test_a_streamed_message_ends_completed_with_the_answer(
    server: ServerProcess, llm: ScriptedLLM
) -> None:
    llm.script(text("你好，我是天气助手。"))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await create_client(
            server.url, client_config=ClientConfig(streaming=True, httpx_client=http)
        )
        request = SendMessageRequest(message=new_text_message("你好", role=Role.ROLE_USER))
        responses = [response async for response in client.send_message(request)]

    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert TaskState.TASK_STATE_WORKING in states
    last = responses[-1].status_update.status.message
    assert get_message_text(last) == "你好，我是天气助手。"


async def test_cancelling_a_task_during_a_slow_tool_cancels_its_run(
    server: ServerProcess, api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(tool_call("get_weather", {"location": "超时城市"}), text("不会走到这里。"))
    headers = {"Authorization": f"Bearer {API_KEY}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await create_client(
            server.url, client_config=ClientConfig(streaming=True, httpx_client=http)
        )
        request = SendMessageRequest(message=new_text_message("超时城市天气", role=Role.ROLE_USER))
        stream = client.send_message(request)
        task = None
        async for response in stream:
            if response.HasField("status_update") and (
                response.status_update.status.state == TaskState.TASK_STATE_WORKING
            ):
                task = response.status_update
                break
        assert task is not None
        thread_id = task.context_id
        deadline = asyncio.get_running_loop().time() + 30
        while not meteo.geocoding_requests:  # the tool has asked and waits for its answer
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)  # polling another process's request, not a result
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.task_id))
        await stream.aclose()

    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        runs = api.http.get(f"/api/threads/{thread_id}/runs").json()
        if runs and runs[0]["status"] != "running":
            break
        assert asyncio.get_running_loop().time() < deadline, runs
        await asyncio.sleep(0.05)  # polling another process's record
    assert [run["status"] for run in runs] == ["cancelled"]


async def test_another_users_context_is_unknown_and_their_tasks_are_not_shown(
    server: ServerProcess, api: Api, llm: ScriptedLLM, backend: Backend, data_dir: Path
) -> None:
    agent_db = backend.agent_db(data_dir)
    keys = {name: add_user(agent_db, f"a2a-{name}") for name in ("alice", "bob")}
    llm.script(tool_call("ask_input", {"message": CITY_QUESTION}))

    async def client_of(name: str, http: httpx.AsyncClient) -> Any:
        http.headers["Authorization"] = f"Bearer {keys[name]}"
        return await create_client(
            server.url, client_config=ClientConfig(streaming=False, httpx_client=http)
        )

    async with httpx.AsyncClient(timeout=30) as a, httpx.AsyncClient(timeout=30) as b:
        alice, bob = await client_of("alice", a), await client_of("bob", b)
        asked = (await send(alice, new_text_message("查天气", role=Role.ROLE_USER))).task
        requests = len(llm.requests)
        taken = await send(
            bob, new_text_message("北京", role=Role.ROLE_USER, context_id=asked.context_id)
        )
        with pytest.raises(TaskNotFoundError):  # tasks are kept per user
            await bob.get_task(GetTaskRequest(id=asked.id))

    assert taken.task.status.state == TaskState.TASK_STATE_FAILED
    assert get_message_text(taken.task.status.message) == (f"thread {asked.context_id} not found")
    assert len(llm.requests) == requests  # Bob's message reached no model
    thread = api.http.get(f"/api/threads/{asked.context_id}").json()
    assert len(thread["interrupts"]) == 1  # Alice's question still waits for Alice
