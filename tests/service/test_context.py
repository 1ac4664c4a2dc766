"""The context budget through `react-agent serve`: long threads on a small window, over AG-UI.

Each test starts its own server, since a server remembers the window it learns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, Turn, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.graphs.support import is_summary_request
from tests.service.conftest import Api, Backend, Stream, run_body, serving

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

SUMMARY = "摘要要点：用户问过多个城市的天气。"


class Replies:
    """The answer to each question, and a summary (recognisable text) to a summary request."""

    def __init__(self) -> None:
        self.summaries = 0

    def __call__(self, body: dict[str, Any]) -> Turn:
        if is_summary_request(body):
            self.summaries += 1
            return text(SUMMARY)
        question = str(body["messages"][-1]["content"])
        return text(f"答：{question}。" + "晴" * 300, chunk_size=40)


def answer_of(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


def streamed_text(stream: Stream) -> str:
    kinds = ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT")
    return "".join(e["delta"] for e in stream.events if e["type"] in kinds)


def ask(api: Api, thread_id: str, n: int) -> Stream:
    stream = api.run("weather", run_body(thread_id, (f"u{n}", f"第{n}个问题")))
    assert stream.last["type"] == "RUN_FINISHED", stream.last
    return stream


def test_a_summary_of_the_earlier_turns_never_streams_into_an_answer(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, backend: Backend, thread_id: str
) -> None:
    llm.limit_context(2048, wording="llama.cpp")
    replies = llm.fallback = Replies()

    with serving(llm, meteo, tmp_path, backend, AGENT_CONTEXT_TOKENS="2048") as server:
        api = Api(server)
        streams = [ask(api, thread_id, n) for n in range(1, 9)]
        api.close()

    assert replies.summaries >= 1
    assert llm.refused == []
    for n, stream in enumerate(streams, start=1):
        assert answer_of(stream) == f"答：第{n}个问题。" + "晴" * 300
        assert SUMMARY not in streamed_text(stream)
    carried = [b for b in llm.requests if not is_summary_request(b)][-1]
    assert SUMMARY in carried["messages"][0]["content"], "the summary reached the model"
    assert all(
        body["stream_options"] == {"include_usage": True}
        for body in llm.requests
        if not is_summary_request(body)
    ), "streamed requests ask for usage"


def test_a_thread_refused_as_too_long_is_answered_and_keeps_answering(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, backend: Backend, thread_id: str
) -> None:
    llm.limit_context(100_000, wording="deepseek")
    llm.fallback = Replies()

    with serving(llm, meteo, tmp_path, backend) as server:
        api = Api(server)
        for n in range(1, 6):  # the default window (32,768) holds all of it
            ask(api, thread_id, n)
        llm.limit_context(2048, wording="deepseek")
        later = [ask(api, thread_id, n) for n in range(6, 9)]
        view = api.http.get(f"/api/threads/{thread_id}").json()
        api.close()

    assert len(llm.refused) == 1, "the first request over the window, then never again"
    assert [answer_of(s)[:8] for s in later] == [
        "答：第6个问题。",
        "答：第7个问题。",
        "答：第8个问题。",
    ]
    assert [m["role"] for m in view["messages"]] == ["user", "assistant"] * 8
