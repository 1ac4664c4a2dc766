"""The server's thread list: `GET /api/threads` and `PATCH /api/threads/{threadId}`.

Over HTTP against real `react-agent serve` processes on the LLM and Open-Meteo doubles:
the module's server for most tests, servers of their own (on one database file, one
after the other) for the restarts. The tushare agent runs without a token here: it
answers with a hint and no model call, which is all a thread of another agent needs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

SETTLE_S = 10.0
POLL_S = 0.05
FINISHED = {"interrupted", "success", "error", "cancelled"}


def new_thread() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def listed(api: Api, **params: Any) -> list[dict[str, Any]]:
    answer = api.http.get("/api/threads", params=params)
    assert answer.status_code == 200, answer.text
    body: list[dict[str, Any]] = answer.json()
    return body


def settled(
    api: Api, ids: list[str], ready: Callable[[dict[str, Any]], bool] | None = None, **params: Any
) -> list[dict[str, Any]]:
    """The list once every thread of `ids` is in it with its latest run ended (and `ready`).

    A run's end is recorded just after its last event is sent, so a client that has read
    the whole stream may list a moment before it.
    """
    deadline = time.monotonic() + SETTLE_S
    while True:
        found = listed(api, **params)
        mine = {entry["threadId"]: entry for entry in found if entry["threadId"] in ids}
        if len(mine) == len(ids) and all(
            entry["status"] in FINISHED and (ready is None or ready(entry))
            for entry in mine.values()
        ):
            return found
        assert time.monotonic() < deadline, f"never settled: {found}"
        time.sleep(POLL_S)  # polling interval, not a wait for a result


def chat(api: Api, llm: ScriptedLLM, thread_id: str, message: str, reply: str = "好的。") -> None:
    llm.script(text(reply))
    answer = api.chat(graph="weather", threadId=thread_id, message=message)
    assert answer.status_code == 200, answer.text


def rename(api: Api, thread_id: str, body: Any) -> httpx.Response:
    return api.http.patch(f"/api/threads/{thread_id}", json=body)


def ids_of(entries: list[dict[str, Any]], among: list[str]) -> list[str]:
    return [entry["threadId"] for entry in entries if entry["threadId"] in among]


def test_threads_are_listed_newest_activity_first_with_their_latest_status(
    api: Api, llm: ScriptedLLM
) -> None:
    first, second, third = new_thread(), new_thread(), new_thread()
    chat(api, llm, first, "第一个")
    chat(api, llm, second, "第二个")
    llm.script(tool_call("ask_input", {"message": "哪个城市？"}))
    asked = api.run("weather", run_body(third, ("u1", "查天气")))
    assert asked.last["outcome"]["type"] == "interrupt"

    before = settled(api, [first, second, third], graph="weather")

    assert ids_of(before, [first, second, third]) == [third, second, first]
    by_id = {entry["threadId"]: entry for entry in before}
    assert by_id[third] == {
        "threadId": third,
        "graphId": "weather",
        "title": "查天气",
        "updatedAt": by_id[third]["updatedAt"],
        "status": "interrupted",
        "origin": "api",
        "owner": "admin",  # AGENT_API_KEY's user
    }
    assert by_id[first]["status"] == by_id[second]["status"] == "success"
    [latest_run] = api.http.get(f"/api/threads/{first}/runs").json()
    assert by_id[first]["updatedAt"] == latest_run["finishedAt"], "when its latest run ended"
    times = [datetime.fromisoformat(entry["updatedAt"]) for entry in before]
    assert all(t.tzinfo == UTC for t in times)
    assert times == sorted(times, reverse=True)

    chat(api, llm, first, "第一个，再说一次")
    after = settled(
        api,
        [first],
        lambda entry: entry["updatedAt"] > by_id[first]["updatedAt"],
        graph="weather",
    )

    assert ids_of(after, [first, second, third]) == [first, third, second]


def test_the_graph_filter_and_the_limit_choose_what_is_listed(api: Api, llm: ScriptedLLM) -> None:
    weather, tushare = new_thread(), new_thread()
    chat(api, llm, weather, "天气")
    hint = api.run("tushare", run_body(tushare, ("u1", "分析一下平安银行")))
    assert hint.last["type"] == "RUN_FINISHED"
    everything = settled(api, [weather, tushare], limit=200)

    weather_list = listed(api, graph="weather", limit=200)
    tushare_list = listed(api, graph="tushare", limit=200)
    two = listed(api, limit=2)

    assert weather in ids_of(weather_list, [weather, tushare])
    assert tushare not in ids_of(weather_list, [weather, tushare])
    assert ids_of(tushare_list, [weather, tushare]) == [tushare]
    assert {entry["graphId"] for entry in weather_list} == {"weather"}
    assert {entry["graphId"] for entry in tushare_list} == {"tushare"}
    assert ids_of(everything, [weather, tushare]) == [tushare, weather]
    assert len(everything) >= 3, "the module's other threads are listed too"
    assert two == everything[:2]
    assert len(listed(api)) == min(len(everything), 50), "50 when no limit is given"


def test_a_thread_is_titled_by_its_first_message_collapsed_and_cut_to_40_characters(
    api: Api, llm: ScriptedLLM
) -> None:
    long, short, blank = new_thread(), new_thread(), new_thread()
    words = "请帮我\n\n  查一下   北京\t明天的天气，" + "顺便说说适合穿什么衣服" * 5
    chat(api, llm, long, words)
    chat(api, llm, short, "  你好  ")
    chat(api, llm, blank, " \n\t ")
    chat(api, llm, short, "这一句不会成为标题")

    titles = {
        entry["threadId"]: entry["title"] for entry in settled(api, [long, short, blank], limit=200)
    }

    collapsed = " ".join(words.split())
    assert len(collapsed) > 40
    assert titles[long] == collapsed[:40] + "…"
    assert titles[short] == "你好"
    assert titles[blank] == "新对话"


def test_a_renamed_thread_keeps_its_title_after_another_run(api: Api, llm: ScriptedLLM) -> None:
    thread_id = new_thread()
    chat(api, llm, thread_id, "原来的标题")
    [before] = [e for e in settled(api, [thread_id], limit=200) if e["threadId"] == thread_id]

    renamed = rename(api, thread_id, {"title": "  北京出行  "})

    assert renamed.status_code == 200, renamed.text
    assert renamed.json() == {**before, "title": "北京出行"}
    chat(api, llm, thread_id, "再问一句")
    after = settled(api, [thread_id], lambda e: e["updatedAt"] > before["updatedAt"], limit=200)
    [entry] = [e for e in after if e["threadId"] == thread_id]
    assert entry["title"] == "北京出行"
    assert rename(api, thread_id, {"title": "标" * 200}).json()["title"] == "标" * 200


def test_a_title_loses_its_bidirectional_controls_whether_renamed_or_from_the_first_message(
    api: Api, llm: ScriptedLLM
) -> None:
    # U+202E makes "txt.exe" read as "exe.txt"; the others isolate, embed or mark direction.
    spoof = "\u202e发票\u2066.exe\u2069\u200f"
    first, renamed = new_thread(), new_thread()
    chat(api, llm, first, spoof)
    chat(api, llm, renamed, "原来的标题")
    settled(api, [first, renamed], limit=200)

    answer = rename(api, renamed, {"title": f"  {spoof} 报表 "})
    only_controls = rename(api, renamed, {"title": "\u202e\u2066\u2069"})
    titles = {entry["threadId"]: entry["title"] for entry in listed(api, limit=200)}

    assert answer.status_code == 200, answer.text
    assert answer.json()["title"] == "发票.exe 报表"
    assert titles[renamed] == "发票.exe 报表"
    assert titles[first] == "发票.exe"
    assert only_controls.status_code == 422 and only_controls.json()["code"] == "bad_title"


def test_renaming_refuses_a_bad_title_an_unknown_thread_and_a_bad_body(
    api: Api, llm: ScriptedLLM
) -> None:
    thread_id = new_thread()
    chat(api, llm, thread_id, "会被拒绝改名的会话")
    settled(api, [thread_id], limit=200)

    for title in ("", "   \n ", "长" * 201):
        refused = rename(api, thread_id, {"title": title})
        assert refused.status_code == 422, title
        assert refused.json()["code"] == "bad_title"
        assert "1-200 characters" in refused.json()["detail"]
    for body in ({}, {"title": 5}, {"title": "好", "color": "red"}, ["好"]):
        wrong = rename(api, thread_id, body)
        assert wrong.status_code == 422, body
        assert wrong.json()["code"] == "invalid_body"
    broken = api.http.patch(
        f"/api/threads/{thread_id}", content=b"{", headers={"Content-Type": "application/json"}
    )
    unknown = rename(api, "t-never-seen", {"title": "好"})
    bad_id = rename(api, "bad id", {"title": "好"})
    keyless = httpx.patch(f"{api.server.url}/api/threads/{thread_id}", json={"title": "好"})

    assert broken.status_code == 400 and broken.json()["code"] == "malformed_json"
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "thread t-never-seen not found", "code": "unknown_thread"}
    assert bad_id.status_code == 422 and bad_id.json()["code"] == "bad_thread_id"
    assert keyless.status_code == 401
    [entry] = [e for e in listed(api, limit=200) if e["threadId"] == thread_id]
    assert entry["title"] == "会被拒绝改名的会话", "a refused rename changes nothing"


def test_listing_refuses_an_unknown_graph_and_a_limit_out_of_range(api: Api) -> None:
    unknown = api.http.get("/api/threads", params={"graph": "nope"})

    assert unknown.status_code == 404
    assert unknown.json()["code"] == "unknown_graph"
    assert "'nope'" in unknown.json()["detail"] and "weather" in unknown.json()["detail"]
    for limit in ("0", "201", "-1", "many"):
        refused = api.http.get("/api/threads", params={"limit": limit})
        assert refused.status_code == 422, limit
        assert refused.json()["code"] == "invalid_request"
        assert "limit" in refused.json()["detail"]
    assert httpx.get(f"{api.server.url}/api/threads").status_code == 401


def test_a_forgotten_thread_leaves_the_list(api: Api, llm: ScriptedLLM) -> None:
    kept, forgotten = new_thread(), new_thread()
    chat(api, llm, kept, "留下")
    chat(api, llm, forgotten, "删掉")
    settled(api, [kept, forgotten], limit=200)

    assert api.http.delete(f"/api/threads/{forgotten}").status_code == 204

    remaining = ids_of(listed(api, limit=200), [kept, forgotten])
    assert remaining == [kept]
    assert rename(api, forgotten, {"title": "还在吗"}).status_code == 404


# --- one database, several server processes ---------------------------------------------


@pytest.fixture
def database(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path, backend: Backend
) -> Iterator[Callable[[], Api]]:
    """Start a server on this test's database (again after each `stop`)."""
    clients: list[Api] = []

    def start() -> Api:
        for client in clients:
            client.server.stop()
        env = server_env(_llm_server, _meteo_server, tmp_path, backend=backend)
        client = Api(ServerProcess(env))
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()
        client.server.stop()


def test_the_list_is_the_same_after_a_restart(
    database: Callable[[], Api], llm: ScriptedLLM
) -> None:
    api = database()
    first, second = new_thread(), new_thread()
    chat(api, llm, first, "重启前的第一个会话")
    chat(api, llm, second, "重启前的第二个会话")
    assert rename(api, second, {"title": "改过名"}).status_code == 200
    before = settled(api, [first, second], ready=lambda e: e["status"] == "success")

    again = database()

    assert listed(again) == before
    assert [(e["threadId"], e["title"]) for e in before] == [
        (second, "改过名"),
        (first, "重启前的第一个会话"),
    ]


def test_threads_recorded_before_the_list_existed_are_listed_from_their_runs(
    database: Callable[[], Api], llm: ScriptedLLM, tmp_path: Path, backend: Backend
) -> None:
    api = database()
    old, older = new_thread(), new_thread()
    chat(api, llm, older, "更早的会话")
    chat(api, llm, old, "早先的会话")
    chat(api, llm, older, "更早的会话的第二句")
    settled(api, [old, older])
    runs = api.http.get(f"/api/threads/{older}/runs").json()
    api.server.stop()
    # The database as a server from before the thread list left it: runs, no thread table.
    backend.execute(tmp_path, "DROP TABLE agent_threads")

    upgraded = database()

    entries = listed(upgraded)
    assert [(e["threadId"], e["title"], e["status"]) for e in entries] == [
        (older, "更早的会话", "success"),
        (old, "早先的会话", "success"),
    ]
    assert entries[0]["updatedAt"] == runs[0]["finishedAt"]
    chat(upgraded, llm, old, "升级之后")
    later = settled(upgraded, [old], lambda e: e["updatedAt"] > entries[0]["updatedAt"])
    assert [(e["threadId"], e["title"]) for e in later] == [
        (old, "早先的会话"),
        (older, "更早的会话"),
    ]


def test_a_wrong_method_on_a_thread_names_every_method_the_thread_answers(api: Api) -> None:
    response = api.http.request("OPTIONS", f"/api/threads/{new_thread()}")

    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert {"GET", "PATCH", "DELETE"} <= allowed
    assert "POST" not in allowed
