"""An interrupt pending when the server is SIGKILLed is resumed by a server restarted on the DB."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import Api, Backend, answer, run_body, server_env
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def test_a_killed_server_leaves_an_interrupt_a_restarted_one_resumes(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path, backend: Backend
) -> None:
    env = server_env(llm, meteo, data_dir, backend=backend)
    first = ServerProcess(env)
    try:
        llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
        asked = Api(first).run("weather", run_body("t-durable", ("u1", "查天气")))
        [pending] = asked.last["outcome"]["interrupts"]
    finally:
        first.kill()
    assert first.process.returncode == -9

    second = ServerProcess(env)
    try:
        api = Api(second)
        view = api.http.get("/api/threads/t-durable").json()
        llm.script(tool_call("get_weather", {"location": "上海"}), text("上海今天晴。"))
        resumed = api.run("weather", run_body("t-durable", resume=[answer(pending["id"], "上海")]))
    finally:
        second.stop()

    assert view["interrupts"] == [pending]
    results = resumed.of("TOOL_CALL_RESULT")
    assert results[0] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": results[0]["messageId"],
        "toolCallId": pending["toolCallId"],
        "content": "用户回答：上海",
        "role": "tool",
        "metadata": {"outcome": "ok"},
    }
    assert "".join(e["delta"] for e in resumed.of("TEXT_MESSAGE_CONTENT")) == "上海今天晴。"
    assert resumed.last["outcome"] == {"type": "success"}
    assert [(r["latitude"], r["longitude"]) for r in meteo.forecast_requests] == [
        ("31.22222", "121.45806")
    ]
