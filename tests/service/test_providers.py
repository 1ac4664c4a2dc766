"""Provider conformance through the real AG-UI endpoint (`POST /api/agents/weather`).

Each fixture of tests/doubles/llm.py streams the way one kind of endpoint does; the run
must show the right TOOL_CALL_* events, the tools' real results, and an answer with no
reasoning in it.
"""

from __future__ import annotations

import json

import pytest

from tests.doubles.llm import (
    CALL_SHAPES,
    ScriptedLLM,
    Turn,
    call,
    cut_off,
    deepseek,
    ollama_calls,
    provider,
    reasoning,
    text,
    think,
    tool_call,
    tool_calls,
)
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Stream, run_body

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

CITIES = [call("get_weather", {"location": "北京"}), call("get_weather", {"location": "上海"})]


def calls_of(stream: Stream) -> list[tuple[str, dict[str, object]]]:
    """(name, parsed arguments) per TOOL_CALL_START, its ARGS deltas joined."""
    args = stream.args_by_call()
    return [
        (start["toolCallName"], json.loads(args[start["toolCallId"]]))
        for start in stream.of("TOOL_CALL_START")
    ]


def assert_well_formed(stream: Stream) -> None:
    """Every call starts once, ends once, and gets exactly one result."""
    started = [e["toolCallId"] for e in stream.of("TOOL_CALL_START")]
    assert len(set(started)) == len(started) and all(started)
    assert sorted(e["toolCallId"] for e in stream.of("TOOL_CALL_END")) == sorted(started)
    assert sorted(e["toolCallId"] for e in stream.of("TOOL_CALL_RESULT")) == sorted(started)


def answer_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


SHAPED = {
    **{
        f"{shape}": provider(tool_calls(CITIES, interleave=shape != "same_index"), call_shape=shape)
        for shape in CALL_SHAPES
    },
    "ollama-stop": ollama_calls(CITIES),
    "vllm-interleaved": tool_calls(CITIES, interleave=True, chunk_size=1),
    "deepseek-reasoning-then-calls": reasoning("先分别查两个城市。", tool_calls(CITIES)),
}


@pytest.mark.parametrize("turn", SHAPED.values(), ids=SHAPED.keys())
def test_every_provider_shape_gives_the_right_tool_call_events_and_results(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str, turn: Turn
) -> None:
    llm.script(turn, text("北京和上海的天气如上。"))
    stream = api.run("weather", run_body(thread_id, ("u1", "北京和上海天气")))

    assert stream.last["outcome"] == {"type": "success"}, stream.events
    assert calls_of(stream) == [
        ("get_weather", {"location": "北京"}),
        ("get_weather", {"location": "上海"}),
    ]
    assert_well_formed(stream)
    ids = [e["toolCallId"] for e in stream.of("TOOL_CALL_START")]
    results = {e["toolCallId"]: e["content"] for e in stream.of("TOOL_CALL_RESULT")}
    assert "北京" in results[ids[0]] and "上海" in results[ids[1]]
    assert len(meteo.forecast_requests) == 2
    assert answer_text(stream) == "北京和上海的天气如上。"
    assert "先分别查" not in json.dumps(stream.of("TEXT_MESSAGE_CONTENT"), ensure_ascii=False)


def test_deepseek_thinking_with_two_tool_calls_completes_and_keeps_reasoning_out_of_the_answer(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(
        deepseek("思考一：先查北京。", tool_call("get_weather", {"location": "北京"})),
        deepseek("思考二：再查上海。", tool_call("get_weather", {"location": "上海"})),
        deepseek("思考三：都有了。", text("北京小雨，上海多云。")),
    )
    stream = api.run("weather", run_body(thread_id, ("u1", "北京和上海天气")))

    assert stream.last["outcome"] == {"type": "success"}, stream.events
    assert [name for name, _ in calls_of(stream)] == ["get_weather", "get_weather"]
    assert_well_formed(stream)
    assert len(meteo.forecast_requests) == 2
    assert answer_text(stream) == "北京小雨，上海多云。"
    texts = json.dumps(stream.of("TEXT_MESSAGE_CONTENT"), ensure_ascii=False)
    assert "思考" not in texts
    sent_back = [
        m.get("reasoning_content") for m in llm.requests[2]["messages"] if m["role"] == "assistant"
    ]
    assert sent_back == ["思考一：先查北京。", "思考二：再查上海。"]


@pytest.mark.parametrize(
    "turn",
    [
        think("先想想北京。", "北京晴。", chunk_size=2),
        provider(reasoning("先想想北京。", text("北京晴。")), reasoning_field="reasoning"),
    ],
    ids=["think-tags", "reasoning-field"],
)
def test_reasoning_never_reaches_the_answer_text(
    api: Api, llm: ScriptedLLM, thread_id: str, turn: Turn
) -> None:
    llm.script(turn)
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))
    assert answer_text(stream) == "北京晴。"
    assert "先想想" not in json.dumps(stream.of("TEXT_MESSAGE_CONTENT"), ensure_ascii=False)
    assert "<think>" not in stream.raw.decode("utf-8")


@pytest.mark.parametrize(
    ("how", "words"), [("end", "中途中断"), ("length", "长度上限"), ("drop", "中途断开")]
)
def test_a_reply_cut_inside_a_tool_call_ends_in_a_readable_error_and_runs_nothing(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str, how: str, words: str
) -> None:
    llm.script(cut_off(tool_call("get_weather", {"location": "北京市海淀区"}), how))
    stream = api.run("weather", run_body(thread_id, ("u1", "海淀天气")))

    assert stream.last["type"] == "RUN_ERROR"
    assert stream.last["code"] == "model_error" and words in stream.last["message"]
    assert stream.of("TOOL_CALL_RESULT") == []
    assert [e["toolCallId"] for e in stream.of("TOOL_CALL_END")] == [
        e["toolCallId"] for e in stream.of("TOOL_CALL_START")
    ]
    assert meteo.forecast_requests == []

    llm.script(text("我在。"))
    again = api.run("weather", run_body(thread_id, ("u2", "还在吗")))
    assert answer_text(again) == "我在。"
