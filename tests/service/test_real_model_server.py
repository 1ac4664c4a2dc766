"""The service against a real OpenAI-compatible server: llama.cpp's llama-server.

`react-agent serve` as a process whose model is llama-server with Gemma 3 270M, a base
model: its words are noise, so these tests check the protocol, never the content. The
servers come from `tests/support/llama.py`; what the service asked and what the server
answered is read from the server's tap and its own `/slots`.

The services keep their state on SQLite only: what is tested here is the model
server, which no storage backend changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import SQLITE, Api, Stream, run_body, serving, wait_until
from tests.support.llama import LlamaServer, LlamaServers

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# The codes a run may end with when the model's noise is no usable reply.
NOISE_CODES = {"model_error", "recursion_limit"}
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}
SLOT_FREED_S = 5.0
# A real model on shared cores reads a long prompt slowly: the doubles' 20 s is too short.
MODEL_S = 120


@contextmanager
def service(
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    llama: LlamaServer,
    *,
    direct: bool = False,
    **extra: str,
) -> Iterator[Api]:
    """`react-agent serve` on `llama` (a few steps per run at most), and a client of it
    that waits as long as the service waits for the model."""
    env = {
        **llama.service_env(direct=direct),
        "AGENT_MAX_STEPS": "2",
        "OPENAI_TIMEOUT": str(MODEL_S),
        # The service sends its own reply cap, which the server obeys over its `-n`.
        "OPENAI_MAX_TOKENS": str(llama.max_reply),
        **extra,
    }
    with serving(llm, meteo, data_dir, SQLITE, **env) as process:
        api = Api(process)
        api.http.timeout = httpx.Timeout(MODEL_S * 2)
        try:
            yield api
        finally:
            api.close()


def ended_cleanly(stream: Stream) -> None:
    """A 200 event stream that started and ended as AG-UI says: success, a question, or
    a RUN_ERROR with a code."""
    assert stream.status == 200, stream.body
    assert stream.types[0] == "RUN_STARTED"
    assert [t for t in stream.types if t in TERMINAL] == [stream.last["type"]]
    if stream.last["type"] == "RUN_ERROR":
        assert stream.last["code"] in NOISE_CODES, stream.last
    else:
        assert stream.last["outcome"]["type"] in ("success", "interrupt")


def writing(llama: LlamaServer) -> dict[str, Any] | None:
    """The slot while the server writes a reply (past reading the prompt, which a
    disconnect does not interrupt), else None."""
    [slot] = llama.slots()
    return slot if slot["is_processing"] and slot["next_token"][0]["n_decoded"] > 0 else None


def test_a_weather_run_on_a_real_model_server_answers_over_chat_and_over_agui(
    llama_server: LlamaServers,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    thread_id: str,
) -> None:
    llama = llama_server()
    with service(llm, meteo, data_dir, llama) as api:
        chat = api.chat(graph="weather", threadId=thread_id, message="北京今天天气怎么样？")
        stream = api.run("weather", run_body(f"{thread_id}-agui", ("u1", "上海呢？")))

    assert chat.status_code in (200, 502), chat.text
    if chat.status_code == 200:
        assert chat.json()["status"] in ("done", "interrupted")
    else:
        assert chat.json()["code"] in NOISE_CODES
    ended_cleanly(stream)
    exchanges = llama.completions()
    assert exchanges, "the service never asked the model server"
    assert all(e.status == 200 and e.finished for e in exchanges), exchanges
    assert all(e.request["model"] == "gemma-3-270m" and e.request["tools"] for e in exchanges)
    assert all(e.request["max_tokens"] == llama.max_reply for e in exchanges)
    assert all(e.usage.completion <= llama.max_reply for e in exchanges if e.usage)


def test_in_text_mode_every_request_stops_at_observation_and_the_server_stops_there(
    llama_server: LlamaServers,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    thread_id: str,
) -> None:
    llama = llama_server()
    # A pattern to go on with: a base model continues it up to the next "Observation:".
    message = "\n".join(
        f'Action: get_weather\nAction Input: {{"location": "{city}"}}\nObservation: 晴\n'
        for city in ("北京", "上海")
    )
    with service(llm, meteo, data_dir, llama, AGENT_TOOL_CALLING="text") as api:
        stream = api.run("weather", run_body(thread_id, ("u1", message)))

    ended_cleanly(stream)
    exchanges = llama.completions()
    assert exchanges
    assert all(e.request["stop"] == ["Observation:"] for e in exchanges)
    assert all("tools" not in e.request for e in exchanges)
    # As the server itself read them, and why it stopped.
    assert all(e.verbose["generation_settings"]["stop"] == ["Observation:"] for e in exchanges)
    stopped = [e for e in exchanges if e.verbose["stop_type"] == "word"]
    assert stopped, [(e.verbose["stop_type"], e.content) for e in exchanges]
    assert all(e.verbose["stopping_word"] == "Observation:" for e in stopped)
    assert all(e.finish_reason == "stop" and "Observation:" not in e.content for e in stopped)


def test_cancelling_a_run_while_the_model_writes_frees_the_server_slot(
    llama_server: LlamaServers,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    thread_id: str,
) -> None:
    llama = llama_server(max_reply=2000)
    body = run_body(thread_id, ("u1", "写一篇很长的关于北京天气的文章。"))
    with (
        service(llm, meteo, data_dir, llama, direct=True) as api,
        ThreadPoolExecutor(1) as background,
    ):
        streaming: Future[Stream] = background.submit(api.run, "weather", body)
        slot = wait_until("the server to write the reply", lambda: writing(llama), timeout=60)
        cancel = api.http.post(f"/api/threads/{thread_id}/runs/{body['runId']}/cancel")
        llama.wait_idle(within_s=SLOT_FREED_S)
        stream = streaming.result(timeout=30)

    assert cancel.status_code == 202
    assert stream.last["type"] == "RUN_ERROR" and stream.last["code"] == "cancelled"
    # Freed because the service hung up, not because the reply ended: the server says so.
    assert slot["next_token"][0]["n_remain"] > 0
    assert slot["id_task"] in llama.cancelled_tasks


# A real model reads about 1,500 tokens a turn here and may write 512, on two shared cores.
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "told",
    [
        pytest.param({"AGENT_CONTEXT_TOKENS": "2048", "OPENAI_MAX_TOKENS": "64"}, id="told"),
        # Neither set: the window from the server's `/props`, the cap a quarter of it.
        pytest.param({"OPENAI_MAX_TOKENS": ""}, id="learned-from-the-server"),
    ],
)
def test_four_long_turns_in_a_2048_token_window_all_answer_and_none_exceeds_it(
    llama_server: LlamaServers,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    thread_id: str,
    told: dict[str, str],
) -> None:
    """Each turn alone takes about half the window: without a budget the third request
    is refused (`exceed_context_size_error`) and so is every one after it. With the
    budget the service sends what fits, whether it is told the window or asks the
    server (`GET /props`), and the thread keeps every turn."""
    llama = llama_server(window=2048)
    long_turn = "今天北京的天气怎么样，明天会下雨吗？" * 60
    assert llama.tokens(long_turn) * 3 > llama.window  # three turns cannot fit
    turns = 4
    with service(llm, meteo, data_dir, llama, AGENT_MAX_STEPS="1", **told) as api:
        answers = [
            api.chat(graph="weather", threadId=thread_id, message=f"{n}. {long_turn}")
            for n in range(turns)
        ]
        thread = api.http.get(f"/api/threads/{thread_id}", params={"limit": 1000})

    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] in ("done", "interrupted"), answer.json()
    exchanges = llama.completions()
    assert llama.refusals() == []
    assert len(exchanges) >= turns
    assert all(e.status == 200 and e.finished and e.usage for e in exchanges), exchanges
    assert all(e.usage.prompt + e.usage.completion <= llama.window for e in exchanges if e.usage)
    cap = int(told["OPENAI_MAX_TOKENS"] or llama.window // 4)
    agent_calls = [e for e in exchanges if e.request.get("tools")]  # the summary's have none
    assert len(agent_calls) >= turns
    assert all(e.request["max_tokens"] == cap for e in agent_calls)
    assert thread.status_code == 200, thread.text
    asked = [m["content"] for m in thread.json()["messages"] if m["role"] == "user"]
    assert asked == [f"{n}. {long_turn}" for n in range(turns)]


def test_openai_max_tokens_caps_each_reply_where_the_server_would_write_more(
    llama_server: LlamaServers,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
    thread_id: str,
) -> None:
    llama = llama_server(max_reply=2000)  # the server alone would write up to 2,000 tokens
    with service(llm, meteo, data_dir, llama, OPENAI_MAX_TOKENS="8") as api:
        stream = api.run("weather", run_body(thread_id, ("u1", "写一篇很长的关于北京天气的文章。")))

    ended_cleanly(stream)
    exchanges = llama.completions()
    assert exchanges
    assert all(e.request["max_tokens"] == 8 for e in exchanges)
    assert all(e.usage and 0 < e.usage.completion <= 8 for e in exchanges), exchanges
    # The server itself stopped at the cap, as its own record says.
    assert all(e.verbose["generation_settings"]["n_predict"] == 8 for e in exchanges)
    assert any(e.verbose["stop_type"] == "limit" for e in exchanges)
