"""Failures named for what happened: an unreadable model reply is a model error."""

from __future__ import annotations

from tests.doubles.llm import ScriptedLLM, garbage, text
from tests.service.conftest import Api, run_body


def test_a_model_endpoint_answering_garbage_is_a_model_error_not_an_internal_one(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(garbage())
    streamed = api.run("weather", run_body(thread_id, ("u1", "你好")))
    llm.script(garbage())
    whole = api.chat(graph="weather", threadId=f"{thread_id}-chat", message="你好")

    assert (streamed.last["type"], streamed.last["code"]) == ("RUN_ERROR", "model_error")
    assert "OPENAI_BASE_URL" in streamed.last["message"]
    assert (whole.status_code, whole.json()["code"]) == (502, "model_error")

    llm.script(text("好了。"))
    again = api.run("weather", run_body(thread_id, ("u1", "你好"), ("u2", "再试")))
    assert again.last["outcome"] == {"type": "success"}
