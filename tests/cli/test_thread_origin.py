"""The thread list marks the threads a terminal started: `origin` in `GET /api/threads`.

`react-agent chat` runs as a process, in-process (on the database file) and with
`--server`; a real `react-agent serve` on the same database lists what it started.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cli.conftest import THREAD_ID, run_cli
from tests.doubles.llm import ScriptedLLM, text
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


@pytest.fixture
def serve(cli_env: dict[str, str]) -> Iterator[ServerProcess]:
    """A real `react-agent serve` on the CLI's database."""
    process = ServerProcess(cli_env)
    try:
        yield process
    finally:
        process.stop()


def one_shot(env: dict[str, str], *args: str) -> str:
    """Run `react-agent chat weather -m ... ARGS` to its end; the thread it printed."""
    done = run_cli(env, "chat", "weather", "-m", "北京今天天气怎么样", *args)
    assert done.returncode == 0, done.stderr
    match = THREAD_ID.search(done.stderr)
    assert match is not None, done.stderr
    return match.group(1)


def listed(server: ServerProcess) -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{server.url}/api/threads", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return {entry["threadId"]: entry for entry in answer.json()}


def test_threads_the_terminal_starts_are_listed_as_started_there_and_others_as_api(
    cli_env: dict[str, str], llm: ScriptedLLM, serve: ServerProcess
) -> None:
    llm.script(text("晴。"), text("晴。"), text("晴。"))
    in_process = one_shot(cli_env)
    over_http = one_shot(cli_env, "--server", serve.url)
    page = httpx.post(
        f"{serve.url}/api/chat", json={"graph": "weather", "message": "北京今天天气怎么样"}
    )
    assert page.status_code == 200, page.text

    threads = listed(serve)

    assert threads[in_process]["origin"] == "terminal"
    assert threads[over_http]["origin"] == "terminal"
    assert threads[page.json()["threadId"]]["origin"] == "api"


def test_a_later_run_from_elsewhere_leaves_the_thread_s_origin_as_it_was(
    cli_env: dict[str, str], llm: ScriptedLLM, serve: ServerProcess
) -> None:
    llm.script(text("晴。"), text("明天多云。"))
    thread_id = one_shot(cli_env, "--server", serve.url)

    later = httpx.post(
        f"{serve.url}/api/chat",
        json={"graph": "weather", "threadId": thread_id, "message": "明天呢？"},
    )

    assert later.status_code == 200, later.text
    assert listed(serve)[thread_id]["origin"] == "terminal"


def test_an_origin_the_service_does_not_know_is_refused_with_422(
    serve: ServerProcess, llm: ScriptedLLM
) -> None:
    body = {
        "threadId": "t-unknown-origin",
        "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "你好"}],
        "forwardedProps": {"origin": "fax"},
    }

    refused = httpx.post(f"{serve.url}/api/agents/weather", json=body)

    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_body"
    assert "origin" in refused.json()["detail"]
    assert "t-unknown-origin" not in listed(serve), "nothing recorded"
    assert llm.requests == []
