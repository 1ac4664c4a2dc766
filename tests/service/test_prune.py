"""`react-agent prune` as a process, on the database a running `react-agent serve` writes
(each backend), and the server's own periodic prune (AGENT_PRUNE_EVERY_S).

After each prune the server still serves what stayed: the same messages, a pending
question that can be answered, a rollback of a run that was going during the prune.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cli.conftest import run_cli
from tests.doubles.llm import ScriptedLLM, hang, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, answer, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def env(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> dict[str, str]:
    """The environment of the module's server and of every prune: one database."""
    data_dir = tmp_path_factory.mktemp("prune")
    return server_env(_llm_server, _meteo_server, data_dir, backend=backend)


@pytest.fixture(scope="module")
def server(env: dict[str, str]) -> Iterator[ServerProcess]:
    process = ServerProcess(env)
    yield process
    process.stop()


def prune(env: dict[str, str], *args: str) -> dict[str, int]:
    """Run `react-agent prune ARGS`; its counts by label (it must succeed)."""
    done = run_cli(env, "prune", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return {
        label: int(count)
        for label, count in re.findall(r"^([a-z ()]+): (\d+)$", done.stdout, re.MULTILINE)
    }


def checkpoints(env: dict[str, str], thread_id: str) -> int:
    """How many checkpoints the thread has in the database."""
    db = env["AGENT_DB"]
    if db.startswith("postgresql://"):
        with psycopg.connect(db) as pg:
            found = pg.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = %s", (thread_id,)
            ).fetchone()
    else:
        with sqlite3.connect(Path(db).absolute().as_uri() + "?mode=ro", uri=True) as lite:
            found = lite.execute(
                "SELECT COUNT(*) FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).fetchone()
    assert found is not None
    return int(found[0])


def view(api: Api, thread_id: str) -> dict[str, Any]:
    response = api.http.get(f"/api/threads/{thread_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def new_thread() -> str:
    return f"t-{time.monotonic_ns()}"


def test_prune_keeps_the_latest_checkpoints_and_the_thread_reads_and_goes_on_the_same(
    api: Api, llm: ScriptedLLM, env: dict[str, str]
) -> None:
    thread_id = new_thread()
    for n in range(3):
        llm.script(text(f"回答{n}。"))
        api.chat(graph="weather", threadId=thread_id, message=f"问题{n}")
    before = view(api, thread_id)
    stored = checkpoints(env, thread_id)

    dry = prune(env, "--keep", "2", "--dry-run")
    assert checkpoints(env, thread_id) == stored
    counts = prune(env, "--keep", "2")

    assert counts["checkpoints removed"] == dry["checkpoints to remove"] >= stored - 2
    assert counts["threads removed (idle)"] == 0
    assert checkpoints(env, thread_id) == 2
    assert view(api, thread_id) == before
    llm.script(text("回答3。"))
    went_on = api.chat(graph="weather", threadId=thread_id, message="问题3").json()
    assert went_on["status"] == "done"
    sent = [(m["role"], m["content"]) for m in llm.last_request["messages"][1:]]
    assert sent == [
        ("user", "问题0"),
        ("assistant", "回答0。"),
        ("user", "问题1"),
        ("assistant", "回答1。"),
        ("user", "问题2"),
        ("assistant", "回答2。"),
        ("user", "问题3"),
    ]


def test_a_pending_question_can_still_be_answered_after_a_prune(
    api: Api, llm: ScriptedLLM, env: dict[str, str]
) -> None:
    thread_id = new_thread()
    llm.script(text("你好。"))
    api.chat(graph="weather", threadId=thread_id, message="你好")
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    asked = api.chat(graph="weather", threadId=thread_id, message="查天气").json()
    [pending] = asked["interrupts"]
    before = view(api, thread_id)

    prune(env, "--keep", "1")

    assert checkpoints(env, thread_id) == 1
    assert view(api, thread_id) == before
    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
    done = api.chat(graph="weather", threadId=thread_id, resume=[answer(pending["id"], "上海")])
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "done"
    assert done.json()["messages"][-1]["content"] == "上海今天晴。"


def test_a_thread_with_a_run_going_is_left_alone_and_can_still_roll_it_back(
    api: Api, llm: ScriptedLLM, env: dict[str, str]
) -> None:
    thread_id = new_thread()
    llm.script(text("早上好。"))
    api.run("weather", run_body(thread_id, ("u0", "早")))
    llm.script(hang(30, partial="我想"), text("回滚后的回答。"))
    slow = run_body(thread_id, ("u0", "早"), ("u1", "慢问题"))
    api.run("weather", slow, until=lambda e: e["type"] == "TEXT_MESSAGE_CONTENT")
    stored = checkpoints(env, thread_id)

    counts = prune(env, "--keep", "1", "--idle-days", "0.000001")

    assert counts["threads skipped (a run in progress)"] >= 1
    assert checkpoints(env, thread_id) == stored
    rolled = api.run(
        "weather", run_body(thread_id, ("u0", "早"), ("u2", "新问题"), multitaskStrategy="rollback")
    )
    assert rolled.last["outcome"] == {"type": "success"}
    assert [(m["role"], m.get("content")) for m in view(api, thread_id)["messages"]] == [
        ("user", "早"),
        ("assistant", "早上好。"),
        ("user", "新问题"),
        ("assistant", "回滚后的回答。"),
    ]


def test_a_thread_idle_for_longer_than_the_age_goes_with_its_runs(
    api: Api, llm: ScriptedLLM, env: dict[str, str]
) -> None:
    idle = new_thread()
    llm.script(text("你好。"))
    api.chat(graph="weather", threadId=idle, message="你好")
    busy = new_thread()
    llm.script(hang(30, partial="我"))
    going = run_body(busy, ("u1", "慢"))
    api.run("weather", going, until=lambda e: e["type"] == "TEXT_MESSAGE_CONTENT")
    age_days = "0.00001"  # 0.864 s: the idle thread's last run ended before that

    deadline = time.monotonic() + DEADLINE_S
    while checkpoints(env, idle):  # each try is a process: its start-up lets the age pass
        assert time.monotonic() < deadline, "the idle thread was never removed"
        prune(env, "--idle-days", age_days)

    assert api.http.get(f"/api/threads/{idle}").status_code == 404
    assert api.http.get(f"/api/threads/{idle}/runs").status_code == 404
    listed = {t["threadId"] for t in api.http.get("/api/threads").json()}
    assert idle not in listed and busy in listed
    assert checkpoints(env, busy) > 0
    api.http.post(f"/api/threads/{busy}/runs/{going['runId']}/cancel")


def test_the_server_prunes_by_itself_every_agent_prune_every_s(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, backend: Backend, tmp_path: Path
) -> None:
    periodic = server_env(
        llm, meteo, tmp_path, backend=backend, AGENT_PRUNE_EVERY_S="0.1", AGENT_PRUNE_KEEP="1"
    )
    process = ServerProcess(periodic)
    api = Api(process)
    try:
        thread_id = new_thread()
        for n in range(2):
            llm.script(text(f"回答{n}。"))
            api.chat(graph="weather", threadId=thread_id, message=f"问题{n}")
        before = view(api, thread_id)

        deadline = time.monotonic() + DEADLINE_S
        while checkpoints(periodic, thread_id) > 1:
            assert time.monotonic() < deadline, "the server never pruned the thread"
            time.sleep(0.05)  # polling the database file, not a wait for a result

        assert view(api, thread_id) == before
        assert "pruned:" in process.logged("pruned:")
    finally:
        api.close()
        process.stop()


def _sqlite_pages(db: str) -> tuple[int, int]:
    """(the database file's size, its free pages) as another process sees them."""
    with closing(sqlite3.connect(Path(db).absolute().as_uri() + "?mode=ro", uri=True)) as lite:
        (free,) = lite.execute("PRAGMA freelist_count").fetchone()
    return Path(db).stat().st_size, int(free)


def _vacuums(db: str) -> int:
    """How many times PostgreSQL's VACUUM (not autovacuum) ran on the checkpoints table."""
    with psycopg.connect(db, autocommit=True) as pg:
        found = pg.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'checkpoints'"
        ).fetchone()
    assert found is not None
    return int(found[0])


def test_prune_compacts_the_database_so_deleted_threads_no_longer_take_space_in_it(
    api: Api, llm: ScriptedLLM, env: dict[str, str]
) -> None:
    db = env["AGENT_DB"]
    long_text = "长" * 6000  # each checkpoint of the thread holds it again: many pages
    for _ in range(3):
        thread_id = new_thread()
        llm.script(text(long_text))
        api.chat(graph="weather", threadId=thread_id, message=long_text)
        assert api.http.delete(f"/api/threads/{thread_id}").status_code == 204
    if db.startswith("postgresql://"):
        vacuums = _vacuums(db)
    else:
        size, free = _sqlite_pages(db)
        assert free > 0  # the deleted threads' pages, kept in the file for reuse

    prune(env)

    if db.startswith("postgresql://"):
        deadline = time.monotonic() + DEADLINE_S
        while _vacuums(db) <= vacuums:  # the statistics follow the VACUUM, not with it
            assert time.monotonic() < deadline, "prune never vacuumed the checkpoints"
            time.sleep(0.05)  # polling PostgreSQL's statistics, not a wait for a result
    else:
        after, free_after = _sqlite_pages(db)
        assert free_after == 0
        assert after < size
