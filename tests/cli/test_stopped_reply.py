"""Ctrl-C during a streamed answer: what was shown stays in the thread as a stopped reply."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.conftest import CHAT_PROMPT, CTRL_C, Terminal
from tests.doubles.llm import ScriptedLLM, hang, text

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]


def test_a_half_answer_stopped_with_ctrl_c_is_kept_as_the_assistants_reply(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(hang(60, partial="从前有座山，"))
    term = cli("chat", "weather")
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("讲个长故事")
    term.expect("从前有座山，")
    term.send(CTRL_C)
    term.expect("已停止")
    term.expect(CHAT_PROMPT)
    llm.script(text("山里有座庙。"))
    term.line("接着讲")
    term.expect("山里有座庙。")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    turns = [(m["role"], m["content"]) for m in llm.requests[1]["messages"][1:]]
    assert turns == [("user", "讲个长故事"), ("assistant", "从前有座山，"), ("user", "接着讲")]

    resumed = cli("chat", "weather", "--thread", thread_id)
    resumed.expect("从前有座山，")  # the history shows it too
    resumed.expect("已停止")  # with the notice it had live, before the next turn
    resumed.expect("接着讲")
    resumed.expect(CHAT_PROMPT)
    resumed.line("/exit")
    assert resumed.exit_code() == 0


def test_leaving_right_after_a_stop_still_keeps_the_half_answer(cli: Cli, llm: ScriptedLLM) -> None:
    llm.script(hang(60, partial="很久很久以前，"))
    term = cli("chat", "weather")
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("讲个故事")
    term.expect("很久很久以前，")
    term.send(CTRL_C)
    term.expect(CHAT_PROMPT)
    term.line("/exit")  # the store closes only once the stopped reply is written
    assert term.exit_code() == 0

    resumed = cli("chat", "weather", "--thread", thread_id)
    resumed.expect("很久很久以前，")
    resumed.expect(CHAT_PROMPT)
    resumed.line("/exit")
    assert resumed.exit_code() == 0


def test_a_reply_stopped_through_a_server_says_so_when_its_thread_is_reopened(
    cli: Cli, server: str, llm: ScriptedLLM
) -> None:
    llm.script(hang(60, partial="山里有座庙，"))
    term = cli("chat", "weather", "--server", server)
    thread_id = term.thread_id()
    term.expect(CHAT_PROMPT)
    term.line("讲个故事")
    term.expect("山里有座庙，")
    term.send(CTRL_C)
    term.expect("已停止")
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    # The thread view the server gives (its `stopped` mark) draws the notice again.
    resumed = cli("chat", "weather", "--server", server, "--thread", thread_id)
    resumed.expect("山里有座庙，")
    resumed.expect("已停止")
    resumed.expect(CHAT_PROMPT)
    resumed.line("/exit")
    assert resumed.exit_code() == 0
