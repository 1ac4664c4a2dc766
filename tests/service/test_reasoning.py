"""Reasoning as its own stream: REASONING_* events, never in the answer, kept in the thread."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, deepseek, react, reasoning, text, think, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, Stream, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

VERIFIER = Path(__file__).with_name("verify_agui.cjs")
THOUGHT = "用户问北京天气，先查天气再回答。"


def reasoning_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("REASONING_MESSAGE_CONTENT"))


def answer_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


def assert_verified(stream: Stream) -> None:
    result = subprocess.run(
        ["node", str(VERIFIER)], input=stream.raw, capture_output=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(lambda: reasoning(THOUGHT, text("北京晴。")), id="reasoning_content"),
        pytest.param(lambda: think(THOUGHT, "北京晴。"), id="think-block"),
    ],
)
def test_reasoning_streams_as_reasoning_events_before_the_answer_and_stays_out_of_it(
    api: Api, llm: ScriptedLLM, thread_id: str, shape: Any
) -> None:
    llm.script(shape())

    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert reasoning_text(stream) == THOUGHT
    assert answer_text(stream) == "北京晴。"
    kinds = [t for t in stream.types if t.startswith(("REASONING", "TEXT_MESSAGE"))]
    assert kinds[:2] == ["REASONING_START", "REASONING_MESSAGE_START"]
    assert kinds.index("REASONING_END") < kinds.index("TEXT_MESSAGE_START")
    assert_verified(stream)
    view = api.http.get(f"/api/threads/{thread_id}").json()
    roles = [(m["role"], m.get("content")) for m in view["messages"]]
    assert roles == [("user", "北京天气"), ("reasoning", THOUGHT), ("assistant", "北京晴。")]


def test_deepseek_thinking_with_two_tool_calls_completes_and_the_answer_holds_no_reasoning(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(
        deepseek("先查北京。", tool_call("get_weather", {"location": "北京"})),
        deepseek("再查上海。", tool_call("get_weather", {"location": "上海"})),
        deepseek("两地都有了。", text("北京晴，上海多云。")),
    )

    stream = api.run("weather", run_body(thread_id, ("u1", "北京和上海天气")))

    assert stream.last["outcome"] == {"type": "success"}, stream.last
    assert reasoning_text(stream) == "先查北京。再查上海。两地都有了。"
    assert answer_text(stream) == "北京晴，上海多云。"
    assert len(stream.of("TOOL_CALL_RESULT")) == 2
    assert len(meteo.forecast_requests) == 2
    assert_verified(stream)


def test_a_whole_reply_from_chat_keeps_its_reasoning_apart(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(reasoning(THOUGHT, text("北京晴。")))

    reply = api.chat(graph="weather", threadId=thread_id, message="北京天气").json()

    assert [(m["role"], m["content"]) for m in reply["messages"]] == [
        ("reasoning", THOUGHT),
        ("assistant", "北京晴。"),
    ]


def test_a_text_mode_thought_streams_as_reasoning(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, thread_id: str, backend: Backend
) -> None:
    env = server_env(llm, meteo, tmp_path, backend=backend, AGENT_TOOL_CALLING="text")
    server = ServerProcess(env)
    api = Api(server)
    try:
        llm.script(react("直接回答即可。", answer="你好！"))
        stream = api.run("weather", run_body(thread_id, ("u1", "你好")))
    finally:
        api.close()
        server.stop()

    assert "直接回答即可。" in reasoning_text(stream)
    assert answer_text(stream) == "你好！"
    assert_verified(stream)
