"""A reply's reasoning on the terminal: dimmed before the answer, live and in a resumed
thread's history, never on piped stdout, and left out with `--hide-reasoning`."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

import httpx
import pexpect
import pytest

from tests.cli.conftest import ANSI, CHAT_PROMPT, Terminal, on_screen, run_cli
from tests.doubles.llm import ScriptedLLM, reasoning, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Cli = Callable[..., Terminal]

THOUGHT = "用户问北京天气，先查天气再回答。"
ANSWER = "北京今天晴，气温 12°C，适合出门。"
LOOK_FIRST = "先查一下北京的天气。"
THEN_ANSWER = "查到了，可以回答了。"
TITLE = "思考过程"
# Dim on (SGR 2, alone or with other attributes), the text, then the attributes reset.
DIM = r"\x1b\[(?:[0-9;]*;)?2(?:;[0-9;]*)?m"


@pytest.fixture
def cli_env(cli_env: dict[str, str]) -> dict[str, str]:
    """A patient forecast: it hangs until a test releases it, after a second CLI started."""
    return {**cli_env, "OPEN_METEO_TIMEOUT": "60"}


def dimmed(text: str) -> re.Pattern[str]:
    """`text` drawn dim: the dim attribute set right before it and reset right after."""
    return re.compile(DIM + re.escape(text) + r"\x1b\[0?m")


def raw_until(term: Terminal, text: str) -> str:
    """Everything the terminal received before `text` showed, escape sequences kept."""
    term.child.expect(on_screen(text))
    return term.child.before or ""


def plain(raw: str) -> str:
    return ANSI.sub("", raw)


def test_the_reasoning_streams_dimmed_before_the_answer_which_is_not_dimmed(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(reasoning(THOUGHT, text(ANSWER)))
    term = cli("chat", "weather")
    term.expect(CHAT_PROMPT)
    term.line("北京天气")

    before = raw_until(term, ANSWER)

    assert dimmed(TITLE).search(before), repr(before)
    assert dimmed(THOUGHT).search(before), repr(before)
    # The answer comes after the thought, in the normal style.
    assert not re.search(DIM + r"(?:\x1b\[[0-9;]*m)*$", before), repr(before[-80:])
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0


def test_hide_reasoning_leaves_the_reasoning_out_and_still_shows_the_answer(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(reasoning(THOUGHT, text(ANSWER)))
    term = cli("chat", "weather", "--hide-reasoning")
    term.expect(CHAT_PROMPT)
    term.line("北京天气")

    screen = plain(raw_until(term, ANSWER)) + term.expect(CHAT_PROMPT)

    assert THOUGHT not in screen
    assert TITLE not in screen
    term.line("/exit")
    assert term.exit_code() == 0


def test_a_resumed_threads_history_shows_each_reasoning_dimmed_before_its_reply_unless_hidden(
    cli: Cli, llm: ScriptedLLM
) -> None:
    llm.script(
        reasoning(LOOK_FIRST, tool_call("get_weather", {"location": "北京"})),
        reasoning(THEN_ANSWER, text(ANSWER)),
    )
    first = cli("chat", "weather")
    thread_id = first.thread_id()
    first.expect(CHAT_PROMPT)
    first.line("北京天气")
    first.expect(ANSWER)
    first.expect(CHAT_PROMPT)
    first.line("/exit")
    assert first.exit_code() == 0

    term = cli("chat", "weather", "--thread", thread_id)
    history = raw_until(term, "以上是历史记录")
    assert dimmed(LOOK_FIRST).search(history), repr(history)
    assert dimmed(THEN_ANSWER).search(history), repr(history)
    shown = plain(history)
    # In the order they happened: thought, tool result, thought, answer.
    positions = [
        shown.index(LOOK_FIRST),
        shown.index("查询天气(location=北京)"),
        shown.index(THEN_ANSWER),
        shown.index(ANSWER),
    ]
    assert positions == sorted(positions), shown
    term.expect(CHAT_PROMPT)
    term.line("/exit")
    assert term.exit_code() == 0

    hidden = cli("chat", "weather", "--thread", thread_id, "--hide-reasoning")
    shown = plain(raw_until(hidden, "以上是历史记录"))
    assert ANSWER in shown
    assert LOOK_FIRST not in shown
    assert THEN_ANSWER not in shown
    assert TITLE not in shown
    hidden.expect(CHAT_PROMPT)
    hidden.line("/exit")
    assert hidden.exit_code() == 0


def test_a_one_shot_keeps_the_reasoning_off_stdout_and_writes_it_to_stderr(
    cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(reasoning(THOUGHT, text(ANSWER)))
    done = run_cli(cli_env, "chat", "weather", "-m", "北京天气")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER  # piped stdout carries the answer alone
    assert THOUGHT in done.stderr
    assert "\x1b[" not in done.stderr  # not a terminal: no escape sequences

    llm.script(reasoning(THOUGHT, text(ANSWER)))
    hidden = run_cli(cli_env, "chat", "weather", "-m", "北京天气", "--hide-reasoning")
    assert hidden.returncode == 0, hidden.stderr
    assert hidden.stdout.strip() == ANSWER
    assert THOUGHT not in hidden.stderr


def test_joining_a_run_under_way_shows_its_earlier_reasoning_once(
    cli: Cli, server: str, llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    llm.script(
        reasoning(LOOK_FIRST, tool_call("get_weather", {"location": "北京"})),
        reasoning(THEN_ANSWER, text(ANSWER)),
    )
    meteo.hang_forecast()
    first = cli("chat", "weather", "--server", server)
    thread_id = first.thread_id()
    first.expect(CHAT_PROMPT)
    first.line("北京天气怎么样")
    first.expect("正在执行 查询天气...")
    first.child.kill(signal.SIGKILL)  # the run goes on on the server
    first.child.expect(pexpect.EOF)
    [running] = httpx.get(f"{server}/api/threads/{thread_id}/runs", timeout=10).json()
    assert running["status"] == "running"

    term = cli("chat", "weather", "--server", server, "--thread", thread_id)
    before = raw_until(term, "正在执行 查询天气...")  # joined while the tool runs
    meteo.reset()  # the forecast answers now
    after = raw_until(term, ANSWER)
    term.expect(CHAT_PROMPT)

    # The history drew the first thought; the replayed run does not draw it again.
    assert dimmed(LOOK_FIRST).search(before), repr(before)
    assert plain(before + after).count(LOOK_FIRST) == 1
    assert dimmed(THEN_ANSWER).search(after), repr(after)
    term.line("/exit")
    assert term.exit_code() == 0
