"""Model streams that end before the server says the reply is over, through the real
AG-UI endpoint: a fragment is never taken for the answer; a stream that showed nothing
is asked again, as a dropped connection is (`OPENAI_MAX_RETRIES`)."""

from __future__ import annotations

import pytest

from tests.doubles.llm import ScriptedLLM, Turn, cut_off, text
from tests.service.conftest import Api, Stream, run_body

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


SERVER_ENV = {"OPENAI_MAX_RETRIES": "2"}  # the default; the suite's other servers have none


def answer_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


@pytest.mark.parametrize("how", ["end", "drop"])
def test_a_text_reply_cut_before_its_end_is_a_model_error_and_the_thread_keeps_no_fragment(
    api: Api, llm: ScriptedLLM, thread_id: str, how: str
) -> None:
    # One chunk of text, then the body ends with no finish_reason and no [DONE] ("end"),
    # or the connection breaks ("drop"): what came is a fragment, not the answer.
    llm.script(cut_off(text("北京今天晴，最高气温二十五度。", chunk_size=4), how))
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert stream.last["type"] == "RUN_ERROR", stream.last
    assert stream.last["code"] == "model_error"
    assert len(llm.requests) == 1  # part of it was shown: asking again would show it twice

    llm.script(text("我在。"))
    again = api.run("weather", run_body(thread_id, ("u2", "还在吗")))
    assert answer_text(again) == "我在。"
    thread = api.http.get(f"/api/threads/{thread_id}").json()
    said = [m["content"] for m in thread["messages"] if m["role"] == "assistant"]
    assert said == ["我在。"]


EMPTY_STREAM = (
    'data: {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m", '
    '"choices": []}\n\n'
    "data: [DONE]\n\n"
)


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(Turn(garbage=EMPTY_STREAM), id="no-choices-at-all"),
        pytest.param(cut_off(text(""), "end"), id="cut-before-any-text"),
    ],
)
def test_a_stream_that_ends_before_saying_anything_is_asked_again(
    api: Api, llm: ScriptedLLM, thread_id: str, broken: Turn
) -> None:
    llm.script(broken, text("北京晴。"))
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert stream.last["type"] == "RUN_FINISHED", stream.last
    assert answer_text(stream) == "北京晴。"
    assert len(llm.requests) == 2


def test_a_stream_that_never_says_anything_is_a_model_error_after_the_retries(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(*[Turn(garbage=EMPTY_STREAM)] * 3)  # OPENAI_MAX_RETRIES=2: three asks
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert stream.last["type"] == "RUN_ERROR" and stream.last["code"] == "model_error"
    assert "finish_reason" in stream.last["message"]
    assert len(llm.requests) == 3
