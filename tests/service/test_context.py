"""The context budget through `react-agent serve`: long threads on a small window, over AG-UI.

Each test starts its own server, since a server remembers the window it learns.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

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


# --- the working state: what the model can see; the thread: everything ---------------------


def checkpoint_messages(backend: Backend, data_dir: Path, thread_id: str) -> list[BaseMessage]:
    """The messages of the thread's latest checkpoint, read through LangGraph's own saver."""

    async def read() -> list[BaseMessage]:
        probe: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        database = backend.agent_db(data_dir)
        saver: Any
        if backend.name == "sqlite":
            async with AsyncSqliteSaver.from_conn_string(database) as saver:
                saved = await saver.aget_tuple(probe)
        else:
            async with AsyncPostgresSaver.from_conn_string(database) as saver:
                saved = await saver.aget_tuple(probe)
        assert saved is not None, "the thread has a checkpoint"
        return list(saved.checkpoint["channel_values"].get("messages", []))

    return asyncio.run(read())


def ask_as_a_client_does(api: Api, thread_id: str, n: int) -> Stream:
    """Question n, sent with every earlier user message as `@ag-ui/client` resends them."""
    history = [(f"u{k}", f"第{k}个问题") for k in range(1, n + 1)]
    stream = api.run("weather", run_body(thread_id, *history))
    assert stream.last["type"] == "RUN_FINISHED", stream.last
    return stream


def whole_view(api: Api, thread_id: str, limit: int) -> list[dict[str, Any]]:
    """Every message of the thread, read back page by page (`limit` a page) through `before`."""
    pages: list[list[dict[str, Any]]] = []
    before: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"before": before} if before else {})}
        page = api.http.get(f"/api/threads/{thread_id}", params=params).json()
        pages.insert(0, page["messages"])
        if page["older"] is None:
            return [message for messages in pages for message in messages]
        before = page["older"]["before"]


@pytest.mark.parametrize("summary", ["true", "false"])
def test_a_long_thread_s_state_holds_what_the_model_can_see_and_its_view_every_message(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    tmp_path: Path,
    backend: Backend,
    thread_id: str,
    summary: str,
) -> None:
    llm.limit_context(2048, wording="llama.cpp")
    replies = llm.fallback = Replies()
    env = {"AGENT_CONTEXT_TOKENS": "2048", "AGENT_HISTORY_SUMMARY": summary}

    with serving(llm, meteo, tmp_path, backend, **env) as server:
        api = Api(server)
        streams = [ask_as_a_client_does(api, thread_id, n) for n in range(1, 13)]
        paged = whole_view(api, thread_id, limit=5)
        state = checkpoint_messages(backend, tmp_path, thread_id)
        api.close()

    assert llm.refused == []
    assert [answer_of(s)[:9] for s in streams[-2:]] == ["答：第11个问题。", "答：第12个问题。"]
    # Every question ran once, though each request resent all the ones before it.
    agent_requests = [b for b in llm.requests if not is_summary_request(b)]
    assert len(agent_requests) == 12
    # The thread's view is every message in order, across the pages and the state's edge.
    assert [m["role"] for m in paged] == ["user", "assistant"] * 12
    assert [m["content"] for m in paged if m["role"] == "user"] == [
        f"第{n}个问题" for n in range(1, 13)
    ]
    # The checkpoint holds what the last request could carry, not the thread.
    sent = [m["content"] for m in agent_requests[-1]["messages"] if m["role"] == "user"]
    kept = [m.content for m in state if isinstance(m, HumanMessage)]
    assert len(state) < 12, f"the state holds {len(state)} of 24 messages"
    assert kept == sent[-len(kept) :] and kept[-1] == "第12个问题"
    if summary == "true":
        assert replies.summaries >= 1
        assert SUMMARY in agent_requests[-1]["messages"][0]["content"], "still carried"


def test_deleting_a_long_thread_deletes_the_messages_its_state_had_let_go(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, backend: Backend, thread_id: str
) -> None:
    llm.limit_context(2048, wording="llama.cpp")
    llm.fallback = Replies()

    with serving(llm, meteo, tmp_path, backend, AGENT_CONTEXT_TOKENS="2048") as server:
        api = Api(server)
        for n in range(1, 9):
            ask(api, thread_id, n)
        count = f"SELECT count(*) FROM agent_messages WHERE thread_id = '{thread_id}'"
        before = backend.query(tmp_path, count)[0][0]
        deleted = api.http.delete(f"/api/threads/{thread_id}")
        after = backend.query(tmp_path, count)[0][0]
        gone = api.http.get(f"/api/threads/{thread_id}")
        api.close()

    assert before > 0, "the thread had let messages go"
    assert deleted.status_code == 204
    assert after == 0
    assert gone.status_code == 404
