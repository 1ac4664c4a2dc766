"""The context budget over the wire: what each request carries, against a double with a window.

The double counts every prompt with its own tokenizer and refuses a too long request the
way the named provider does (`tests/doubles/context_limits.py`), so a request that does
not fit fails the run instead of passing unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from ag_ui.core import (
    EventType,
    ReasoningMessageContentEvent,
    TextMessageContentEvent,
)
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph.state import CompiledStateGraph

from app.core.runs.events import stream_run
from graphs.budget import ContextTooLong
from graphs.model import make_model
from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from graphs.transcript import TRANSCRIPT_KEY
from graphs.window import forget_context_windows, known_window
from prompts import render_template
from tests.doubles.chat_model import Reply, ScriptedChatModel, text_reply
from tests.doubles.context_limits import WORDINGS, TokenCount
from tests.doubles.llm import Fallback, ScriptedLLM, Turn, deepseek, react, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.graphs.support import SUMMARY_HEAD, config, is_summary_request, say
from tools.ask import ASK_TOOLS
from tools.weather import weather_tool

SUMMARY_LABEL = render_template("earlier_summary", summary="").splitlines()[0]
MARKER = re.compile(r"省略了后面 (\d+) 个字符")
BIG_RESULT = "行情数据：" + "开盘 10.5 收盘 10.8 成交量 123456；" * 2000


@tool(response_format="content_and_artifact")
def market_data(code: str) -> tuple[str, dict[str, Any]]:
    """Daily bars of one stock (a long table)."""
    return BIG_RESULT, {"kind": "bars", "code": code, "rows": 2000}


class Conversation:
    """Answers each request by what it ends with; a summary request with a numbered summary.

    A user message mentioning 天气 gets a `call_tool` call first (after `call_text`), a
    tool result (or anything else) the answer, `answer_chars` characters long.
    """

    def __init__(
        self, answer_chars: int = 200, *, call_tool: str | None = None, call_text: str = ""
    ) -> None:
        self.answer_chars = answer_chars
        self.call_tool = call_tool
        self.call_text = call_text
        self.summaries: list[dict[str, Any]] = []
        self.answers: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Turn:
        if is_summary_request(body):
            self.summaries.append(body)
            return text(f"摘要{len(self.summaries)}：用户问过北京的天气，助手都答了。")
        last = body["messages"][-1]
        if self.call_tool and last["role"] == "user" and "天气" in str(last["content"]):
            return tool_call(self.call_tool, {"location": "北京"}, content=self.call_text)
        self.answers.append(body)
        return text(f"回答{len(self.answers)}：" + "晴" * self.answer_chars, chunk_size=50)


def agent_requests(llm: ScriptedLLM) -> list[dict[str, Any]]:
    return [body for body in llm.requests if not is_summary_request(body)]


def user_texts(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "user"]


def system_text(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def graph_of(saver: AsyncSqliteSaver, tools: Sequence[BaseTool] = ()) -> CompiledStateGraph:
    """The loop over get_weather, the ask tools and `tools`, configured by the environment."""
    settings = GraphSettings()
    builder = build_react_graph(
        prompts=("ask",),
        tools=[weather_tool(settings), *ASK_TOOLS, *tools],
        settings=settings,
    )
    return builder.compile(checkpointer=saver, name="test")


async def chat(graph: CompiledStateGraph, turns: int, *, start: int = 1) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for n in range(start, start + turns):
        result = await say(graph, f"问题{n}：北京天气怎么样")
    return result


@pytest.fixture
def window(monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM) -> int:
    """A 2,048-token window, configured and enforced by the double (llama.cpp's refusal)."""
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "2048")
    llm.limit_context(2048, wording="llama.cpp")
    return 2048


# --- what is sent ------------------------------------------------------------------------


async def test_a_long_thread_sends_the_newest_whole_turns_and_keeps_its_whole_history(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    llm.fallback = Conversation()
    graph = graph_of(saver)

    result = await chat(graph, 12)

    assert llm.refused == []
    assert len(result["messages"]) == 24, "the thread keeps every message"
    last = agent_requests(llm)[-1]
    sent = user_texts(last)
    assert sent[-1] == "问题12：北京天气怎么样"
    assert 1 <= len(sent) < 12
    assert sent == [f"问题{n}：北京天气怎么样" for n in range(13 - len(sent), 13)]
    assert last["messages"][1]["role"] == "user", "history starts at a turn's first message"
    assert all(count <= window for count in llm.prompt_tokens)


@pytest.mark.parametrize(
    ("answer", "before_call"),
    [
        pytest.param(150, "", id="long-answers"),
        pytest.param(10, "让我查一下。" * 40, id="long-calls"),
    ],
)
async def test_a_tool_call_is_never_sent_without_its_result_nor_a_turn_in_part(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, answer: int, before_call: str, window: int
) -> None:
    @tool
    def lookup(location: str) -> str:
        """Look a place up."""
        return f"{location}：晴"

    llm.fallback = Conversation(answer, call_tool="lookup", call_text=before_call)

    await chat(graph_of(saver, [lookup]), 14)

    assert llm.refused == []
    for body in agent_requests(llm):
        called = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        answered = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        assert called == answered
        assert body["messages"][1]["role"] == "user", "history starts at a turn's first message"
    assert len(user_texts(agent_requests(llm)[-1])) < 14, "older turns were cut"


async def test_the_current_run_is_never_dropped_and_its_oldest_results_are_shortened(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    @tool
    def report(part: int) -> str:
        """One part of a long report."""
        return f"第{part}部分：" + "数" * 250

    llm.script(
        tool_call("report", {"part": 1}),
        tool_call("report", {"part": 2}),
        tool_call("report", {"part": 3}),
        text("三部分都读完了。"),
    )

    result = await say(graph_of(saver, [report]), "把报告的三部分都读一遍")

    assert llm.refused == []
    assert result["messages"][-1].content == "三部分都读完了。"
    last = llm.requests[-1]["messages"]
    assert user_texts(llm.requests[-1]) == ["把报告的三部分都读一遍"]
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert len(results) == 3, "no part of the current run is dropped"
    assert MARKER.search(results[0]), "the oldest result is shortened, saying so"
    assert results[2] == f"第3部分：{'数' * 250}", "the newest result is sent whole"
    kept = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [len(m.text) for m in kept] == [255, 255, 255], "the thread keeps the results whole"


async def test_a_huge_tool_result_takes_at_most_a_quarter_of_the_window_and_says_how_much_was_cut(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    llm.script(tool_call("market_data", {"code": "600519.SH"}), text("数据很长，已看过开头。"))

    result = await say(graph_of(saver, [market_data]), "看看茅台的日线")

    assert llm.refused == []
    [sent] = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert TokenCount().text(sent) <= window / 4
    omitted = MARKER.search(sent)
    assert omitted is not None
    assert sent.startswith(BIG_RESULT[:100])
    assert len(sent) - len(omitted.group(0)) < len(BIG_RESULT)
    assert int(omitted.group(1)) == len(BIG_RESULT) - sent.index("\n…")
    [kept] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert kept.text == BIG_RESULT, "the thread keeps the result whole"
    assert kept.artifact == {"kind": "bars", "code": "600519.SH", "rows": 2000}


async def test_every_request_carries_the_reply_cap_as_max_tokens(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    llm.fallback = Conversation()
    await chat(graph_of(saver), 6)

    agent = agent_requests(llm)
    assert [body.get("max_tokens") for body in agent] == [512] * len(agent), "min(4096, 2048/4)"
    assert all("max_completion_tokens" not in body for body in llm.requests)
    assert [body["max_tokens"] for body in llm.requests if is_summary_request(body)] == [128] * len(
        llm.fallback.summaries
    ), "a summary is capped at a sixteenth of the window"


async def test_openai_max_tokens_sets_the_reply_cap(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MAX_TOKENS", "300")
    llm.script(text("好。"))

    await say(graph_of(saver), "你好")

    assert llm.last_request["max_tokens"] == 300


@pytest.mark.parametrize(
    ("base_url", "name"),
    [
        (None, "max_completion_tokens"),
        ("https://api.openai.com/v1", "max_completion_tokens"),
        ("https://example.openai.azure.com/openai/v1", "max_completion_tokens"),
        ("https://api.deepseek.com", "max_tokens"),
        ("https://dashscope.aliyuncs.com/compatible-mode/v1", "max_tokens"),
        ("http://127.0.0.1:8080/v1", "max_tokens"),
    ],
)
def test_the_reply_cap_goes_by_the_name_the_endpoint_reads(base_url: str | None, name: str) -> None:
    # OpenAI's own API cannot be reached from a test: this reads the request body the
    # model would send it.
    settings = GraphSettings(openai_base_url=base_url, openai_api_key="k", openai_model="m")
    payload = make_model(settings)._get_request_payload([HumanMessage("你好")], max_tokens=300)
    other = "max_tokens" if name == "max_completion_tokens" else "max_completion_tokens"
    assert payload[name] == 300
    assert other not in payload


# --- the summary ----------------------------------------------------------------------


async def test_the_summary_is_made_once_per_cut_and_carried_by_the_requests_between(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    conversation = llm.fallback = Conversation()

    await chat(graph_of(saver), 16)

    assert llm.refused == []
    made = len(conversation.summaries)
    carried = [s for body in agent_requests(llm) if SUMMARY_LABEL in (s := system_text(body))]
    assert 2 <= made <= 16 / 3, "a summary every several turns, not every turn"
    assert len(carried) > made, "the requests between two cuts carry the same summary"
    kinds = {re.search(r"摘要(\d+)：", s).group(1) for s in carried}  # type: ignore[union-attr]
    assert kinds == {str(n) for n in range(1, made + 1)}
    # Each summary folds in the one before it.
    for n, body in enumerate(conversation.summaries[1:], start=1):
        assert f"摘要{n}：" in body["messages"][0]["content"]


async def test_the_summary_is_kept_in_state_and_sent_labelled_as_the_earlier_conversation(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int
) -> None:
    conversation = llm.fallback = Conversation()
    graph = graph_of(saver)

    await chat(graph, 6)

    state = (await graph.aget_state(config())).values
    summary = state["summary"]
    assert summary["text"] == f"摘要{len(conversation.summaries)}：用户问过北京的天气，助手都答了。"
    ids = [m.id for m in state["messages"]]
    covered = ids[: ids.index(summary["through"]) + 1]
    last = agent_requests(llm)[-1]
    assert summary["text"] in system_text(last)
    assert SUMMARY_LABEL in system_text(last)
    sent_users = user_texts(last)
    first_kept = next(m for m in state["messages"] if m.id not in covered)
    assert isinstance(first_kept, HumanMessage) and sent_users[0] == first_kept.text


async def test_without_history_summary_dropped_turns_are_left_out_unsummarised(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_HISTORY_SUMMARY", "false")
    conversation = llm.fallback = Conversation()
    graph = graph_of(saver)

    await chat(graph, 12)

    assert llm.refused == []
    assert conversation.summaries == []
    assert all(SUMMARY_LABEL not in system_text(body) for body in llm.requests)
    assert len(user_texts(llm.requests[-1])) < 12
    assert "summary" not in (await graph.aget_state(config())).values


async def test_a_hundred_turns_cost_a_summary_every_several_turns(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "8192")
    llm.limit_context(8192, wording="llama.cpp")
    conversation = llm.fallback = Conversation(400)

    await chat(graph_of(saver), 100)

    assert llm.refused == []
    summaries = len(conversation.summaries)
    assert len(agent_requests(llm)) == 100
    assert 5 <= summaries <= 100 / 4
    counted = dict(zip(map(id, llm.requests), llm.prompt_tokens, strict=True))
    summary_tokens = sum(counted[id(body)] for body in conversation.summaries)
    assert summary_tokens <= summaries * 8192


async def test_the_summary_call_streams_nothing_into_the_runs_events(
    llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "1024")

    def reply(messages: list[BaseMessage]) -> Reply:
        if str(messages[0].content).startswith(SUMMARY_HEAD):
            return text_reply("摘要内容：用户问过天气。", chunks=4)
        return text_reply("晴天。" + "好" * 120, chunks=6)

    model = ScriptedChatModel(replies=[], fallback=reply)
    monkeypatch.setattr("graphs.react.shared_model", lambda settings: model)
    graph = build_react_graph(prompts=("ask",), tools=[], settings=GraphSettings()).compile(
        checkpointer=InMemorySaver()
    )
    streamed: list[str] = []
    for n in range(1, 9):
        async for event in stream_run(
            graph,
            thread_id="t1",
            run_id=f"run-{n}",
            input_or_command={"messages": [HumanMessage(f"问题{n}")]},
            config=config(),
        ):
            assert event.type != EventType.RUN_ERROR, event
            if isinstance(event, TextMessageContentEvent | ReasoningMessageContentEvent):
                streamed.append(event.delta)

    made = [m for m in model.calls if str(m[0].content).startswith(SUMMARY_HEAD)]
    assert made, "older turns were folded into a summary"
    assert "摘要" not in "".join(streamed)
    assert "".join(streamed) == ("晴天。" + "好" * 120) * 8


# --- the working state: what the model can still be sent -------------------------------


class Kept:
    """A transcript in this process: what the graph handed over, once each, in order."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.messages: list[BaseMessage] = []
        self.failure = failure

    async def keep(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        if self.failure is not None:
            raise self.failure
        held = {message.id for message in self.messages}
        self.messages += [message for message in messages if message.id not in held]


async def chat_with(graph: CompiledStateGraph, kept: Kept, turns: int) -> list[BaseMessage]:
    """`turns` questions on one thread whose runs hand what leaves the state to `kept`."""
    run_config = {"configurable": {"thread_id": "t1", TRANSCRIPT_KEY: kept}}
    for n in range(1, turns + 1):
        question = HumanMessage(f"问题{n}：北京天气怎么样")
        result = await graph.ainvoke({"messages": [question]}, run_config)
    return list(result["messages"])


@pytest.mark.parametrize("summarize", ["true", "false"])
async def test_what_the_model_will_not_be_sent_again_leaves_the_state_for_the_transcript(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    window: int,
    monkeypatch: pytest.MonkeyPatch,
    summarize: str,
) -> None:
    monkeypatch.setenv("AGENT_HISTORY_SUMMARY", summarize)
    conversation = llm.fallback = Conversation()
    kept = Kept()

    state = await chat_with(graph_of(saver), kept, 12)

    assert llm.refused == []
    thread = [*kept.messages, *state]
    assert [m.text for m in thread if isinstance(m, HumanMessage)] == [
        f"问题{n}：北京天气怎么样" for n in range(1, 13)
    ], "every message is in the transcript or the state, once, in order"
    assert len(thread) == 24 and len(state) < 12
    last = agent_requests(llm)[-1]
    sent = user_texts(last)
    assert [m.text for m in state if isinstance(m, HumanMessage)] == sent[-len(sent) :]
    if summarize == "true":
        summary = (await graph_of(saver).aget_state(config())).values["summary"]
        assert summary["through"] == kept.messages[-1].id, "the transcript ends where it does"
        assert summary["text"] in system_text(last), "and the summary is still carried"
        assert len(conversation.summaries) >= 2


async def test_a_transcript_that_fails_leaves_the_messages_in_the_state_and_the_run_answers(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, window: int, caplog: pytest.LogCaptureFixture
) -> None:
    llm.fallback = Conversation()
    kept = Kept(OSError("disk full"))

    state = await chat_with(graph_of(saver), kept, 8)

    assert len(state) == 16, "nothing left the state"
    assert state[-1].text.startswith("回答8：")
    assert "stay in the working state" in caplog.text


# --- refusals and the window ------------------------------------------------------------


@pytest.mark.parametrize("wording", WORDINGS)
async def test_a_request_refused_as_too_long_is_cut_to_the_named_window_and_sent_once_more(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, wording: str
) -> None:
    conversation = llm.fallback = Conversation(300)
    graph = graph_of(saver)
    llm.limit_context(100_000, wording=wording)  # counted, as a real server counts
    await chat(graph, 6)  # the default window (32,768) holds all of it
    assert conversation.summaries == []
    llm.limit_context(2048, wording=wording)

    result = await say(graph, "问题7：北京天气怎么样")

    assert len(llm.refused) == 1, "one refusal, then the request fits"
    assert result["messages"][-1].content.startswith("回答7：")
    retry = agent_requests(llm)[-1]
    assert user_texts(retry)[-1] == "问题7：北京天气怎么样"
    # DashScope limits the prompt alone; the others the prompt and the reply together.
    reply = 0 if wording == "dashscope" else retry["max_tokens"]
    assert llm.prompt_tokens[-1] + reply <= 2048
    settings = GraphSettings()
    learned = known_window(settings)
    assert learned is not None and learned.source == "refusal"
    assert (learned.input_limit if wording == "dashscope" else learned.tokens) == 2048

    await chat(graph, 3, start=8)

    assert len(llm.refused) == 1, "the learned window holds for the next requests"
    assert len(conversation.answers) == 10


async def test_a_message_too_long_for_the_window_ends_the_run_with_a_readable_error(
    saver: AsyncSqliteSaver, llm: ScriptedLLM
) -> None:
    llm.limit_context(1024, wording="vllm")
    llm.fallback = Conversation()

    with pytest.raises(ContextTooLong, match="上下文窗口"):
        await say(graph_of(saver), "请读这段：" + "长" * 3000)

    assert len(llm.refused) == 2, "refused, cut to the named window, refused again: no more"


@pytest.mark.parametrize(
    ("serve", "window"),
    [
        pytest.param(
            lambda llm: llm.serve_props({"default_generation_settings": {"n_ctx": 6000}}),
            6000,
            id="llama.cpp-props",
        ),
        pytest.param(lambda llm: llm.serve_props({"n_ctx": 5000}), 5000, id="llama.cpp-root"),
        pytest.param(lambda llm: llm.serve_models(7000), 7000, id="vllm-models"),
        pytest.param(
            lambda llm: llm.serve_ollama_show(
                {"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 9000}}
            ),
            9000,
            id="ollama-context-length",
        ),
        pytest.param(
            lambda llm: llm.serve_ollama_show(
                {
                    "parameters": "stop <|im_end|>\nnum_ctx 4000",
                    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
                }
            ),
            4000,
            id="ollama-num-ctx",
        ),
    ],
)
async def test_the_window_is_asked_of_the_server_once(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, serve: Any, window: int
) -> None:
    serve(llm)
    llm.script(text("好。"), text("好的。"))
    graph = graph_of(saver)

    await say(graph, "你好")
    await say(graph, "再见")

    assert [body["max_tokens"] for body in llm.requests] == [window // 4] * 2
    asked = llm.discovery_requests
    assert sorted(asked) == ["GET /props", "GET /v1/models", "POST /api/show"], "once each"
    found = known_window(GraphSettings())
    assert found is not None and found.tokens == window


@pytest.mark.parametrize(
    ("model", "tokens", "source"),
    [
        ("gpt-4-0613", 8_192, "model table"),
        ("llama3:8b", 8_192, "model table"),
        ("meta-llama/Llama-3.1-8B-Instruct", 131_072, "model table"),
        ("deepseek-chat", 131_072, "model table"),
        ("test-model", 32_768, "default"),
    ],
)
async def test_a_server_that_says_nothing_leaves_the_window_to_the_model_table(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    tokens: int,
    source: str,
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", model)
    llm.script(text("好。"))

    await say(graph_of(saver), "你好")

    assert llm.last_request["max_tokens"] == min(4096, tokens // 4)
    found = known_window(GraphSettings())
    assert found is not None and (found.tokens, found.source) == (tokens, source)


async def test_an_unreachable_window_question_never_fails_the_run(
    saver: AsyncSqliteSaver, llm: ScriptedLLM
) -> None:
    llm.serve_props({"default_generation_settings": {"n_ctx": "not a number"}})
    llm.serve_ollama_show({"model_info": "garbage"})
    llm.script(text("好。"))

    result = await say(graph_of(saver), "你好")

    assert result["messages"][-1].content == "好。"
    found = known_window(GraphSettings())
    assert found is not None and found.source == "default"


async def test_the_providers_count_of_earlier_prompts_keeps_requests_within_a_heavier_tokenizer(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This tokenizer counts CJK text at 1.6 times the estimate: uncalibrated, a full
    # request would be over the window.
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "3000")
    llm.limit_context(3000, wording="openai", count=TokenCount(cjk=1.6, chars_per_token=2.0))
    llm.fallback = Conversation(250)

    await chat(graph_of(saver), 14)

    assert llm.refused == []
    assert max(llm.prompt_tokens) > 3000 * 0.5, "the requests did fill the window"


# --- both tool-calling modes ------------------------------------------------------------


async def test_text_mode_requests_stay_within_the_window_with_whole_turns(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    window: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_TOOL_CALLING", "text")
    summaries: list[dict[str, Any]] = []

    def reply(body: dict[str, Any]) -> Turn:
        if is_summary_request(body):
            summaries.append(body)
            return text("摘要：问过几次北京天气。")
        if str(body["messages"][-1]["content"]).startswith("Observation:"):
            return react("查到了。", answer="北京晴。" + "好" * 150)
        return react("先查天气。", action="get_weather", args={"location": "北京"})

    llm.fallback = reply

    await chat(graph_of(saver), 8)

    assert llm.refused == []
    assert summaries, "older turns were folded into a summary"
    for body in agent_requests(llm):
        assert "tools" not in body
        assert body["max_tokens"] == 512, "the reply cap rides on text-mode requests too"
        turns = [str(m["content"]) for m in body["messages"][1:]]
        actions = [t for t in turns if "Action: get_weather" in t]
        observations = [t for t in turns if t.startswith("Observation:")]
        assert len(actions) == len(observations), "every Action goes with its Observation"
        assert turns[0].startswith("问题"), "history starts at a turn's first message"


def tool_turns(mode: str) -> Fallback:
    """Each question answered through one get_weather call: natively, natively with
    DeepSeek's reasoning (sent back with each call), or as text."""

    def reply(body: dict[str, Any]) -> Turn:
        last = body["messages"][-1]
        observed = last["role"] == "tool" or str(last["content"]).startswith("Observation:")
        if mode == "text":
            if observed:
                return react("查到了。", answer="北京晴。" + "好" * 300)
            return react("先查天气。", action="get_weather", args={"location": "北京"})
        if observed:
            return text("北京晴。" + "好" * 300, chunk_size=50)
        call = tool_call("get_weather", {"location": "北京"})
        return deepseek("想" * 300, call) if mode == "deepseek" else call

    return reply


@pytest.mark.parametrize("mode", ["native", "deepseek", "text"])
async def test_a_first_request_before_any_count_from_the_provider_fits_what_is_really_sent(
    saver: AsyncSqliteSaver,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    # Tools travel as schemas natively and as prompt text in text mode, DeepSeek's
    # reasoning with each call: the estimate must count them all, or a full request
    # overflows before the provider's first count arrives.
    monkeypatch.setenv("AGENT_TOOL_CALLING", "text" if mode == "text" else "native")
    monkeypatch.setenv("AGENT_HISTORY_SUMMARY", "false")  # the cut fills the window
    exact = TokenCount(cjk=1.0, chars_per_token=3.0)
    llm.limit_context(100_000, wording="openai", count=exact)
    llm.fallback = tool_turns(mode)
    await chat(graph_of(saver), 10)
    forget_context_windows()  # a process that starts now has no count of this model yet
    monkeypatch.setenv("AGENT_CONTEXT_TOKENS", "3072")
    llm.limit_context(3072, wording="openai", count=exact)

    await say(graph_of(saver), "问题11：北京天气怎么样")

    assert llm.refused == []
    assert llm.prompt_tokens[-1] > 3072 * 0.4, "the request did fill the window"


async def test_a_deepseek_reasoning_echo_travels_with_its_turn(
    saver: AsyncSqliteSaver, llm: ScriptedLLM, meteo: FakeOpenMeteo, window: int
) -> None:
    def reply(body: dict[str, Any]) -> Turn:
        if is_summary_request(body):
            return text("摘要：问过几次北京天气。")
        if body["messages"][-1]["role"] == "tool":
            return deepseek("想" * 100, text("北京晴。" + "好" * 150))
        return deepseek("先查。" * 20, tool_call("get_weather", {"location": "北京"}))

    llm.fallback = reply

    await chat(graph_of(saver), 8)

    assert llm.refused == []
    assert len(user_texts(agent_requests(llm)[-1])) < 8, "older turns were cut"
    for body in agent_requests(llm):
        for message in body["messages"]:
            if message["role"] == "assistant" and message.get("tool_calls"):
                assert message["reasoning_content"] == "先查。" * 20
