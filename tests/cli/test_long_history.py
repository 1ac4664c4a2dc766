"""`react-agent chat --thread ID` on a long thread: its last 20 turns, and how many older
messages it leaves out, in-process and with `--server` (both read the thread a page at a
time, as `GET /api/threads/{id}` serves it)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.cli.conftest import CHAT_PROMPT, Terminal
from tests.doubles.llm import ScriptedLLM, text, tool_call

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

TURNS = 24
# Each turn is six messages: the question, two weather calls with their results, the
# answer. 24 of them are more than a page (100 messages) holds of 20 turns, so the
# terminal reads an older page too.
MESSAGES_PER_TURN = 6
OLDER_TURNS = TURNS - 20


def question(n: int) -> str:
    return f"问题{n:02d}"


@pytest.fixture
def long_thread(server: str, llm: ScriptedLLM) -> str:
    """A thread of TURNS turns, made through the server's `/api/chat`; its id."""
    thread_id = "long-history-thread"
    with httpx.Client(base_url=server, timeout=30) as client:
        for n in range(TURNS):
            llm.script(
                tool_call("get_weather", {"location": "北京"}),
                tool_call("get_weather", {"location": "上海"}),
                text(f"回答{n:02d}"),
            )
            body = {"graph": "weather", "threadId": thread_id, "message": question(n)}
            reply = client.post("/api/chat", json=body)
            assert reply.status_code == 200, reply.text
    return thread_id


def shown_history(term: Terminal) -> str:
    """What the terminal draws of the thread before the line that ends its history."""
    history = term.expect("以上是历史记录")
    term.expect(CHAT_PROMPT)
    return history


def assert_last_twenty_turns(history: str) -> None:
    assert f"（省略了更早的 {OLDER_TURNS * MESSAGES_PER_TURN} 条消息）" in history
    shown = [n for n in range(TURNS) if question(n) in history]
    assert shown == list(range(OLDER_TURNS, TURNS))
    assert f"回答{OLDER_TURNS:02d}" in history and f"回答{TURNS - 1:02d}" in history
    assert history.index("省略了更早的") < history.index(question(OLDER_TURNS))


def test_a_long_thread_opened_in_process_shows_its_last_twenty_turns_and_counts_the_rest(
    cli: Cli, long_thread: str
) -> None:
    term = cli("chat", "weather", "--thread", long_thread)
    assert_last_twenty_turns(shown_history(term))
    term.line("/exit")
    assert term.exit_code() == 0


def test_a_long_thread_opened_through_a_server_shows_its_last_twenty_turns_and_counts_the_rest(
    cli: Cli, server: str, long_thread: str
) -> None:
    term = cli("chat", "weather", "--server", server, "--thread", long_thread)
    assert_last_twenty_turns(shown_history(term))
    term.line("/exit")
    assert term.exit_code() == 0
