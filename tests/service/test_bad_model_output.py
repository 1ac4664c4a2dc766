"""Bad model output ends the same way on both ways of running a thread: the AG-UI stream
(the model streams) and `/api/chat` (the model answers whole)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, Turn, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, run_body

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

MALFORMED = '{"location": "北京", }'  # a trailing comma: not JSON


def tool_results(api: Api, thread_id: str) -> list[dict[str, Any]]:
    thread = api.http.get(f"/api/threads/{thread_id}")
    assert thread.status_code == 200, thread.text
    return [m for m in thread.json()["messages"] if m["role"] == "tool"]


def run_streamed(api: Api, thread_id: str) -> dict[str, Any]:
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))
    return {"ended": stream.last["type"], "answer": stream.of("TEXT_MESSAGE_CONTENT")}


def run_whole(api: Api, thread_id: str) -> dict[str, Any]:
    chat = api.chat(graph="weather", threadId=thread_id, message="北京天气")
    assert chat.status_code == 200, chat.text
    return {"ended": chat.json()["status"], "answer": chat.json()["messages"][-1]["content"]}


@pytest.mark.parametrize("run", [run_streamed, run_whole], ids=["stream", "chat"])
def test_malformed_tool_call_arguments_are_an_invalid_args_result_the_model_reads(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str, run: Any
) -> None:
    llm.script(
        tool_call("get_weather", MALFORMED),
        tool_call("get_weather", {"location": "北京"}),
        text("北京晴。"),
    )
    outcome = run(api, thread_id)

    assert outcome["ended"] in ("RUN_FINISHED", "done"), outcome
    first, second = tool_results(api, thread_id)
    assert first["metadata"]["outcome"] == "invalid_args"
    assert "get_weather" in first["content"] and "JSON" in first["content"]
    assert second["metadata"]["outcome"] == "ok"
    assert len(meteo.forecast_requests) == 1  # only the call that parsed ran
    # The model was told: its second request carries the refusal as the call's result.
    retry = llm.requests[1]["messages"]
    assert any(m["role"] == "tool" and "JSON" in m["content"] for m in retry)


GARBAGE = {
    "html": "<html><body>502 Bad Gateway</body></html>",
    "json-but-no-completion": '{"unexpected": true}',
}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "chat"])
@pytest.mark.parametrize("garbage", list(GARBAGE))
def test_an_unreadable_reply_is_a_model_error_with_its_hint_on_both_paths(
    api: Api, llm: ScriptedLLM, thread_id: str, stream: bool, garbage: str
) -> None:
    llm.script(Turn(garbage=GARBAGE[garbage]))
    if stream:
        events = api.run("weather", run_body(thread_id, ("u1", "北京天气")))
        code, message = events.last["code"], events.last["message"]
    else:
        chat = api.chat(graph="weather", threadId=thread_id, message="北京天气")
        assert chat.status_code == 502, chat.text
        code, message = chat.json()["code"], chat.json()["detail"]

    assert code == "model_error"
    assert "OPENAI_BASE_URL" in message
