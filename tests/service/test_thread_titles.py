"""A thread's title from its first exchange, written by the model in the background.

Over HTTP against `react-agent serve` with `AGENT_THREAD_TITLES` on (the suite's default
is off, `tests/support/env.py`), on SQLite and PostgreSQL. The LLM double answers the
run's requests and then the title request, told apart by the title prompt it carries.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.storage.postgres.runs import SCHEMA_VERSION
from tests.doubles.llm import ScriptedLLM, error, held, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import (
    Api,
    Backend,
    Stream,
    answer,
    run_body,
    server_env,
    wait_until,
)
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

SERVER_ENV = {"AGENT_THREAD_TITLES": "true"}
# A line of prompts/thread_title.md: what makes a request the title request.
TITLE_PROMPT = "为对话起一个标题"
TITLED = "titled by the model"
USER_WINS = "keeps the title its user gave it"
TITLE_FAILED = "the model's title failed"
DEADLINE_S = 30.0


def title_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in requests if TITLE_PROMPT in str(r["messages"][0]["content"])]


def entry(api: Api, thread_id: str) -> dict[str, Any]:
    answer_ = api.http.get("/api/threads", params={"limit": 200})
    assert answer_.status_code == 200, answer_.text
    [found] = [e for e in answer_.json() if e["threadId"] == thread_id]
    return dict(found)


def rename(api: Api, thread_id: str, title: str) -> httpx.Response:
    return api.http.patch(f"/api/threads/{thread_id}", json={"title": title})


def streamed_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


def logged_for(server: ServerProcess, thread_id: str, needle: str) -> list[str]:
    return [line for line in list(server.log) if thread_id in line and needle in line]


def test_the_model_titles_a_thread_after_its_first_exchange_while_the_run_does_not_wait(
    api: Api, llm: ScriptedLLM, server: ServerProcess, thread_id: str
) -> None:
    llm.script(
        tool_call("ask_input", {"message": "请问要查询哪个城市？"}),
        text("北京明天晴，最高 13 度。"),
        held(text("“北京明天天气”\n这是标题。")),  # answered once the test releases it
    )
    asked = api.run("weather", run_body(thread_id, ("u1", "查天气")))
    [interrupt] = asked.last["outcome"]["interrupts"]
    answered = api.run("weather", run_body(thread_id, resume=[answer(interrupt["id"], "北京")]))

    # The run has ended, and its client has everything, while the title call is held.
    assert answered.last["type"] == "RUN_FINISHED"
    assert answered.last["outcome"]["type"] == "success"
    [asking] = title_requests(llm.wait_for_requests(3))
    assert entry(api, thread_id)["title"] == "查天气", "the first message until then"
    llm.release()
    wait_until("the model's title", lambda: entry(api, thread_id)["title"] != "查天气")

    assert entry(api, thread_id)["title"] == "北京明天天气"
    assert len(llm.requests) == 3, "a pending question is no exchange: one title request"
    prompt = asking["messages"][0]["content"]
    assert "\n查天气\n" in prompt and "\n北京明天晴，最高 13 度。" in prompt
    assert asking["max_tokens"] <= 64
    replayed = api.join(thread_id, answered.events[0]["runId"])
    assert "北京明天晴" in streamed_text(replayed)
    assert "北京明天天气" not in replayed.raw.decode(), "the title is in no run's events"
    server.logged(f"thread {thread_id} {TITLED}")
    # Later exchanges leave the title alone: only the first one asks.
    llm.script(text("后天多云。"))
    assert api.chat(graph="weather", threadId=thread_id, message="后天呢？").status_code == 200
    assert entry(api, thread_id)["title"] == "北京明天天气"
    assert len(title_requests(llm.requests)) == 1


def test_a_rename_while_the_title_call_is_under_way_wins(
    api: Api, llm: ScriptedLLM, server: ServerProcess, thread_id: str
) -> None:
    llm.script(text("上海今天小雨。"), held(text("上海今日天气")))
    ran = api.run("weather", run_body(thread_id, ("u1", "上海今天天气怎么样")))
    assert ran.last["type"] == "RUN_FINISHED"
    llm.wait_for_requests(2)  # the title call is under way

    renamed = rename(api, thread_id, "我的上海行程")
    llm.release()

    assert renamed.status_code == 200, renamed.text
    server.logged(f"thread {thread_id} {USER_WINS}")
    assert entry(api, thread_id)["title"] == "我的上海行程"
    assert len(title_requests(llm.requests)) == 1


def test_a_thread_renamed_before_its_first_exchange_ends_is_never_titled_by_the_model(
    api: Api, llm: ScriptedLLM, thread_id: str, background: ThreadPoolExecutor
) -> None:
    llm.script(held(text("广州明天有雷阵雨。")), text("后天转晴。"))
    body = run_body(thread_id, ("u1", "广州明天天气"))
    running: Future[Stream] = background.submit(api.run, "weather", body)
    llm.wait_for_requests(1)

    renamed = rename(api, thread_id, "广州出差")
    llm.release()
    ran = running.result(DEADLINE_S)
    assert api.chat(graph="weather", threadId=thread_id, message="后天呢？").status_code == 200
    # A thread nobody renamed, after it: it is titled, the renamed one was not.
    other = f"{thread_id}-other"
    llm.script(text("成都今天阴。"), text("成都今日天气"))
    assert api.chat(graph="weather", threadId=other, message="成都今天天气").status_code == 200
    wait_until("the other thread's title", lambda: entry(api, other)["title"] == "成都今日天气")

    assert renamed.status_code == 200, renamed.text
    assert ran.last["outcome"]["type"] == "success"
    assert entry(api, thread_id)["title"] == "广州出差"
    [asked] = title_requests(llm.requests)
    assert "成都今天天气" in asked["messages"][0]["content"], "the only title asked for"


def test_a_failed_title_call_keeps_the_first_message_and_is_logged_once(
    api: Api, llm: ScriptedLLM, server: ServerProcess, thread_id: str
) -> None:
    llm.script(text("深圳今天多云。"), error(500))
    ran = api.run("weather", run_body(thread_id, ("u1", "深圳今天天气")))

    failed = server.logged(f"thread {thread_id} keeps its first message")
    [run] = api.http.get(f"/api/threads/{thread_id}/runs").json()

    assert ran.last["type"] == "RUN_FINISHED" and ran.last["outcome"]["type"] == "success"
    assert run["status"] == "success" and run["error"] is None
    assert TITLE_FAILED in failed and "500" in failed
    assert entry(api, thread_id)["title"] == "深圳今天天气"
    assert len(logged_for(server, thread_id, TITLE_FAILED)) == 1
    assert len(title_requests(llm.requests)) == 1, "one try: no retry"
    # The next exchange is not a first one: no second try.
    llm.script(text("明天晴。"))
    assert api.chat(graph="weather", threadId=thread_id, message="明天呢？").status_code == 200
    assert entry(api, thread_id)["title"] == "深圳今天天气"
    assert len(title_requests(llm.requests)) == 1


@pytest.fixture
def background() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield pool


def test_a_database_from_before_titles_keeps_the_titles_its_users_gave(
    llm: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path, backend: Backend
) -> None:
    env = server_env(llm, _meteo_server, tmp_path, backend=backend, **SERVER_ENV)
    renamed, untouched = "t-renamed-before", "t-untouched-before"
    asked: dict[str, str] = {}
    old = Api(ServerProcess(env))
    for thread_id in (renamed, untouched):  # each waits for an answer: no exchange yet
        llm.script(tool_call("ask_input", {"message": "哪个城市？"}))
        stream = old.run("weather", run_body(thread_id, ("u1", "查天气")))
        asked[thread_id] = stream.last["outcome"]["interrupts"][0]["id"]
    assert rename(old, renamed, "我起的名字").status_code == 200
    old.close()
    old.server.stop()
    # The database as a version from before titles left it: no title_by, no origin.
    for column in ("title_by", "origin"):
        backend.execute(tmp_path, f"ALTER TABLE agent_threads DROP COLUMN {column}")
    if backend.name == "postgres":  # which said so in its schema version
        backend.execute(tmp_path, f"UPDATE agent_schema SET version = {SCHEMA_VERSION - 1}")

    upgraded = Api(ServerProcess(env))
    try:
        # Only the untouched thread's run is followed by a title request.
        for thread_id, turns in (
            (renamed, [text("西安今天晴。")]),
            (untouched, [text("南京今天晴。"), text("南京今日天气")]),
        ):
            llm.script(*turns)
            resume = [answer(asked[thread_id], "城市")]
            assert upgraded.run("weather", run_body(thread_id, resume=resume)).last["type"] == (
                "RUN_FINISHED"
            )
        wait_until("the title", lambda: entry(upgraded, untouched)["title"] == "南京今日天气")
        entries = {e: entry(upgraded, e) for e in (renamed, untouched)}
    finally:
        upgraded.close()
        upgraded.server.stop()

    assert {e: entries[e]["title"] for e in entries} == {
        renamed: "我起的名字",
        untouched: "南京今日天气",
    }
    assert {entries[e]["origin"] for e in entries} == {"api"}
