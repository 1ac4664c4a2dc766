"""Text-mode ReAct (AGENT_TOOL_CALLING=text) through the real AG-UI endpoint.

One `react-agent serve` process in text mode, on the session's LLM and Open-Meteo
doubles and a Tushare MCP double of this module's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.doubles.llm import ScriptedLLM, paused, react, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.doubles.tushare_mcp import TushareMCP
from tests.service.conftest import Api, Backend, Stream, answer, run_body, serving_tushare
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

INVENTED = "晴 40°C"
ANSWER = "北京今天多云，气温适宜。"


@pytest.fixture(scope="module")
def text_server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    mcp: TushareMCP,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    with serving_tushare(
        _llm_server,
        _meteo_server,
        mcp,
        tmp_path_factory.mktemp("text-mode"),
        backend,
        AGENT_TOOL_CALLING="text",
    ) as process:
        yield process


@pytest.fixture
def api(text_server: ServerProcess) -> Iterator[Api]:
    client = Api(text_server)
    yield client
    client.close()


def answer_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


def test_a_text_mode_weather_run_streams_the_answer_and_drops_an_invented_observation(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(
        react(
            "需要查询北京的天气。",
            action="get_weather",
            args={"location": "北京"},
            invented=INVENTED,
        ),
        # The model stops mid-answer: what the client has by then was streamed, not sent whole.
        paused(react("已经拿到结果。", answer=ANSWER), after="北京今天"),
    )
    body = run_body(thread_id, ("u1", "北京今天天气怎么样"))
    shown = api.run("weather", body, until=lambda e: e["type"] == "TEXT_MESSAGE_CONTENT")
    llm.release()
    stream = api.join(thread_id, body["runId"])

    assert stream.last["outcome"] == {"type": "success"}
    first, second = llm.requests
    assert "tools" not in first and "tools" not in second
    assert first["stop"] == ["Observation:"] and second["stop"] == ["Observation:"]
    assert len(meteo.forecast_requests) == 1
    [start] = stream.of("TOOL_CALL_START")
    assert start["toolCallName"] == "get_weather"
    assert json.loads(stream.args_by_call()[start["toolCallId"]]) == {"location": "北京"}
    [result] = stream.of("TOOL_CALL_RESULT")
    assert result["toolCallId"] == start["toolCallId"] and "北京" in result["content"]
    assert answer_text(stream) == ANSWER
    before_the_model_went_on = shown.last["delta"]
    assert ANSWER.startswith(before_the_model_went_on) and before_the_model_went_on != ANSWER
    # Thoughts are reasoning, not answer text; the invented observation is nowhere.
    assert "需要查询" not in answer_text(stream) and "Thought" not in answer_text(stream)
    assert INVENTED not in stream.raw.decode("utf-8")
    assert INVENTED not in json.dumps(second, ensure_ascii=False)
    assert second["messages"][-1] == {
        "role": "user",
        "content": f"Observation: {result['content']}",
    }


def test_text_mode_ask_input_pauses_and_the_resumed_run_finishes(
    api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(react("用户没说城市。", action="ask_input", args={"message": "哪个城市？"}))
    first = api.run("weather", run_body(thread_id, ("u1", "查天气")))

    [start] = first.of("TOOL_CALL_START")
    assert first.last["outcome"]["type"] == "interrupt"
    [pending] = first.last["outcome"]["interrupts"]
    assert pending["reason"] == "input" and pending["message"] == "哪个城市？"
    assert pending["toolCallId"] == start["toolCallId"]

    llm.script(
        react("用户要上海。", action="get_weather", args={"location": "上海"}),
        react(answer="上海今天多云。"),
    )
    second = api.run(
        "weather", run_body(thread_id, ("u1", "查天气"), resume=[answer(pending["id"], "上海")])
    )

    results = second.of("TOOL_CALL_RESULT")
    assert results[0]["toolCallId"] == start["toolCallId"]
    assert results[0]["content"] == "用户回答：上海"
    assert "上海" in results[1]["content"]
    assert answer_text(second) == "上海今天多云。"
    assert second.last["outcome"] == {"type": "success"}
    assert len(meteo.forecast_requests) == 1


def test_text_mode_resolve_stock_asks_to_choose_and_the_resumed_run_finishes(
    api: Api, llm: ScriptedLLM, mcp: TushareMCP, thread_id: str
) -> None:
    llm.script(react("先确定股票。", action="resolve_stock", args={"name": "平安"}))
    first = api.run("tushare", run_body(thread_id, ("u1", "分析一下平安")))

    assert first.last["outcome"]["type"] == "interrupt", first.events
    [pending] = first.last["outcome"]["interrupts"]
    assert pending["reason"] == "select"
    options = pending["metadata"]["payload"]["options"]
    assert [o["value"] for o in options] == ["000001.SZ", "601318.SH"]
    assert "tools" not in llm.requests[0]
    assert "### resolve_stock" in llm.requests[0]["messages"][0]["content"]

    llm.script(react("用户选了平安银行。", answer="平安银行（000001.SZ）。"))
    second = api.run(
        "tushare",
        run_body(thread_id, ("u1", "分析一下平安"), resume=[answer(pending["id"], "000001.SZ")]),
    )

    [result] = second.of("TOOL_CALL_RESULT")
    assert json.loads(result["content"]) == {"ts_code": "000001.SZ", "name": "平安银行"}
    assert answer_text(second) == "平安银行（000001.SZ）。"
    assert second.last["outcome"] == {"type": "success"}


def test_a_reply_that_does_not_parse_is_retried_without_reaching_the_user(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("北京今天晴。"), react("按格式回答。", answer="北京今天晴。"))
    stream = api.run("weather", run_body(thread_id, ("u1", "北京天气")))

    assert answer_text(stream) == "北京今天晴。"
    assert len(stream.of("TEXT_MESSAGE_START")) == 1
    assert llm.requests[1]["messages"][-1]["content"].startswith("Observation: 格式错误")
    assert stream.last["outcome"] == {"type": "success"}
