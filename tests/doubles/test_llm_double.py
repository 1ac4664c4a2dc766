"""ScriptedLLM speaks OpenAI's chat-completions protocol as langchain-openai consumes it."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from tests.doubles.context_limits import WORDINGS, TokenCount
from tests.doubles.llm import (
    OUT_OF_SCRIPT,
    ScriptedLLM,
    Turn,
    call,
    cut_off,
    deepseek,
    error,
    hang,
    honoring_stop,
    ollama_calls,
    paused,
    provider,
    react,
    reasoning,
    text,
    think,
    tool_call,
    tool_calls,
)
from tests.support.llm_client import call_parts, deltas, finish_reasons, model, raw_stream, streamed

ARGS = {"location": "北京", "days": 3, "flags": ["a", "b"]}


async def test_text_reply_arrives_whole_through_ainvoke(llm: ScriptedLLM) -> None:
    llm.script(text("北京今天晴。"))

    reply = await model(llm).ainvoke("天气？")

    assert reply.content == "北京今天晴。"
    assert reply.response_metadata["finish_reason"] == "stop"


async def test_text_reply_streams_in_small_pieces(llm: ScriptedLLM) -> None:
    llm.script(text("abcdefghij", chunk_size=2))

    reply, chunks = await streamed(model(llm))

    assert reply.content == "abcdefghij"
    assert chunks >= 5
    assert llm.last_request["stream"] is True


@pytest.mark.parametrize("split", [True, False], ids=["split", "whole"])
async def test_one_tool_call_aggregates_to_exact_arguments(llm: ScriptedLLM, split: bool) -> None:
    llm.script(tool_call("get_weather", ARGS, id="call_1", split=split))

    reply, _ = await streamed(model(llm))

    assert reply.tool_calls == [
        {"name": "get_weather", "args": ARGS, "id": "call_1", "type": "tool_call"}
    ]
    assert reply.response_metadata["finish_reason"] == "tool_calls"


async def test_tool_call_through_ainvoke_carries_exact_arguments(llm: ScriptedLLM) -> None:
    llm.script(tool_call("get_weather", ARGS, id="call_1"))

    reply = await model(llm).ainvoke("hi")

    assert reply.tool_calls[0]["args"] == ARGS
    assert reply.tool_calls[0]["id"] == "call_1"


async def test_interleaved_parallel_calls_aggregate_per_index(llm: ScriptedLLM) -> None:
    llm.script(
        tool_calls(
            [
                call("get_weather", {"location": "北京"}, id="a"),
                call("get_weather", {"location": "上海浦东新区"}, id="b"),
                call("ask_confirm", {"message": "确认?"}, id="c", split=False),
            ],
            interleave=True,
        )
    )

    reply, _ = await streamed(model(llm))

    assert [(c["id"], c["name"], c["args"]) for c in reply.tool_calls] == [
        ("a", "get_weather", {"location": "北京"}),
        ("b", "get_weather", {"location": "上海浦东新区"}),
        ("c", "ask_confirm", {"message": "确认?"}),
    ]


async def test_text_then_tool_call_keeps_both(llm: ScriptedLLM) -> None:
    llm.script(tool_call("get_weather", {"location": "东京"}, content="我查一下。"))

    reply, _ = await streamed(model(llm))

    assert reply.content == "我查一下。"
    assert reply.tool_calls[0]["args"] == {"location": "东京"}


async def test_usage_chunk_is_sent_when_asked(llm: ScriptedLLM) -> None:
    llm.script(text("hello"))

    reply, _ = await streamed(model(llm, stream_usage=True))

    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] > 0
    assert llm.last_request["stream_options"] == {"include_usage": True}


async def test_raw_stream_has_openai_chunk_shape(llm: ScriptedLLM) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}, id="call_x"))
    body = {"model": "m", "messages": [], "stream": True}

    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", f"{llm.url}/chat/completions", json=body) as response,
    ):
        lines = [line async for line in response.aiter_lines() if line]

    assert response.headers["content-type"].startswith("text/event-stream")
    assert lines[-1] == "data: [DONE]"
    first = httpx.Response(200, content=lines[0].removeprefix("data: ")).json()
    assert first["object"] == "chat.completion.chunk"
    delta = first["choices"][0]["delta"]
    assert delta["role"] == "assistant"
    assert delta["tool_calls"][0] == {
        "index": 0,
        "id": "call_x",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    last = httpx.Response(200, content=lines[-2].removeprefix("data: ")).json()
    assert last["choices"][0]["finish_reason"] == "tool_calls"


async def test_server_error_then_success_is_retried_by_the_client(llm: ScriptedLLM) -> None:
    llm.script(error(500), text("recovered"))

    reply = await model(llm, max_retries=2).ainvoke("hi")

    assert reply.content == "recovered"
    assert len(llm.requests) == 2


async def test_rate_limit_surfaces_when_retries_are_off(llm: ScriptedLLM) -> None:
    llm.script(error(429))

    with pytest.raises(openai.RateLimitError):
        await model(llm, max_retries=0).ainvoke("hi")


async def test_running_out_of_script_fails_loudly_without_retries(llm: ScriptedLLM) -> None:
    with pytest.raises(openai.InternalServerError, match="script ran out"):
        await model(llm, max_retries=3).ainvoke("hi")

    assert len(llm.requests) == 1
    assert OUT_OF_SCRIPT.startswith("ScriptedLLM")


async def test_fallback_answers_when_the_script_is_empty(llm: ScriptedLLM) -> None:
    llm.fallback = lambda body: text(f"{len(body['messages'])} messages")

    reply = await model(llm).ainvoke([HumanMessage("a"), HumanMessage("b")])

    assert reply.content == "2 messages"


async def test_requests_record_what_the_model_saw(llm: ScriptedLLM) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}, id="call_1"), text("晴"))
    chat = model(llm)
    first = await chat.ainvoke([HumanMessage("北京天气")])

    await chat.ainvoke(
        [HumanMessage("北京天气"), first, ToolMessage("晴，25°C", tool_call_id="call_1")]
    )

    tool_messages = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages == [{"role": "tool", "content": "晴，25°C", "tool_call_id": "call_1"}]
    assert llm.request_headers[0]["authorization"] == "Bearer test"


async def test_hang_is_released_by_reset(llm: ScriptedLLM) -> None:
    llm.script(hang(30))
    chat = model(llm, max_retries=0)
    task = asyncio.create_task(chat.ainvoke("hi"))
    await llm.await_requests(1)
    started = time.monotonic()

    llm.reset()

    with pytest.raises(openai.APIStatusError):
        await task
    assert time.monotonic() - started < 5


async def test_streaming_hang_sends_partial_text_then_stalls(llm: ScriptedLLM) -> None:
    llm.script(hang(30, partial="正在"))
    seen: list[str] = []

    async def consume() -> None:
        async for chunk in model(llm).astream("hi"):
            seen.append(str(chunk.content))
            if "".join(seen) == "正在":
                return

    await asyncio.wait_for(consume(), timeout=5)

    assert "".join(seen) == "正在"


async def test_a_paused_stream_sends_the_rest_only_once_released(llm: ScriptedLLM) -> None:
    llm.script(paused(text("北京今天多云，气温适宜。"), after="北京今天"))
    seen: list[str] = []
    stream = model(llm).astream("hi")

    async for chunk in stream:
        seen.append(str(chunk.content))
        if "".join(seen).startswith("北京今天"):
            break
    assert "".join(seen) == "北京今天多云"  # the piece holding the pause's end
    following = asyncio.ensure_future(anext(stream))
    done, _ = await asyncio.wait([following], timeout=0.3)
    assert not done, "nothing more comes while paused"
    llm.release()
    seen.append(str((await following).content))
    async for chunk in stream:
        seen.append(str(chunk.content))

    assert "".join(seen) == "北京今天多云，气温适宜。"


async def test_slow_text_takes_its_delay(llm: ScriptedLLM) -> None:
    llm.script(text("abcd", chunk_size=1, delay_s=0.05))
    started = time.monotonic()

    reply, _ = await streamed(model(llm))

    assert reply.content == "abcd"
    assert time.monotonic() - started >= 0.2


async def test_stopping_the_server_ends_a_hanging_reply() -> None:
    own = ScriptedLLM().start()
    own.script(hang(30))
    task = asyncio.create_task(model(own, max_retries=0).ainvoke("hi"))
    await own.await_requests(1)
    started = time.monotonic()

    await asyncio.to_thread(own.stop)

    with pytest.raises(openai.APIError):
        await task
    assert time.monotonic() - started < 5


# --- provider shapes -----------------------------------------------------------------


PAIR = [call("f", {"a": "xyz"}, id="c0"), call("g", {"b": "uvw"}, id="c1")]


async def test_repeat_shape_sends_id_and_name_in_every_delta(llm: ScriptedLLM) -> None:
    llm.script(provider(tool_calls(PAIR, interleave=False), call_shape="repeat"))
    parts = call_parts(await raw_stream(llm))
    assert len(parts) > 2
    assert all(p["id"] in ("c0", "c1") and p["function"]["name"] in ("f", "g") for p in parts)


async def test_null_id_shape_sends_explicit_nulls_after_the_first_delta(llm: ScriptedLLM) -> None:
    llm.script(provider(tool_call("f", {"a": "xyz"}, id="c0"), call_shape="null_id"))
    first, *later = call_parts(await raw_stream(llm))
    assert first["id"] == "c0" and first["function"]["name"] == "f"
    assert later and all(p["id"] is None and p["function"]["name"] is None for p in later)


async def test_same_index_shape_puts_every_parallel_call_at_index_zero(llm: ScriptedLLM) -> None:
    llm.script(provider(tool_calls(PAIR, interleave=False), call_shape="same_index"))
    parts = call_parts(await raw_stream(llm))
    assert {p["index"] for p in parts} == {0}
    assert [p["id"] for p in parts if "id" in p] == ["c0", "c1"]


async def test_ollama_shape_sends_every_call_whole_in_one_delta_and_finishes_with_stop(
    llm: ScriptedLLM,
) -> None:
    llm.script(ollama_calls(PAIR))
    payloads = await raw_stream(llm)
    [delta] = [d for d in deltas(payloads) if d.get("tool_calls")]
    assert [(p["id"], p["function"]["arguments"]) for p in delta["tool_calls"]] == [
        ("c0", '{"a": "xyz"}'),
        ("c1", '{"b": "uvw"}'),
    ]
    assert finish_reasons(payloads) == ["stop"]


@pytest.mark.parametrize(
    ("how", "finish", "done"), [("end", [None], False), ("length", ["length"], True)]
)
async def test_a_cut_reply_stops_halfway_through_the_last_calls_arguments(
    llm: ScriptedLLM, how: str, finish: list[str | None], done: bool
) -> None:
    llm.script(cut_off(tool_call("f", {"a": "abcdefghij"}, id="c0"), how))
    payloads = await raw_stream(llm)
    arguments = "".join(p["function"].get("arguments", "") for p in call_parts(payloads))
    assert arguments == '{"a": "ab'  # the first half of '{"a": "abcdefghij"}'
    assert finish_reasons(payloads) == finish
    assert (payloads[-1] == "[DONE]") is done


async def test_a_dropped_reply_breaks_the_connection_mid_stream(llm: ScriptedLLM) -> None:
    llm.script(cut_off(tool_call("f", {"a": "abcdefghij"}), "drop"))
    with pytest.raises(openai.APIConnectionError):
        await streamed(model(llm, max_retries=0))


async def test_reasoning_can_come_in_the_reasoning_field(llm: ScriptedLLM) -> None:
    llm.script(provider(reasoning("想", text("答")), reasoning_field="reasoning"))
    assert [d for d in deltas(await raw_stream(llm)) if "reasoning" in d] == [{"reasoning": "想"}]


async def test_the_deepseek_double_answers_400_without_reasoning_echoed(llm: ScriptedLLM) -> None:
    llm.script(deepseek("想", text("答")), deepseek("想", text("答")))
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    body = {"model": "m", "messages": history}
    async with httpx.AsyncClient() as client:
        refused = await client.post(f"{llm.url}/chat/completions", json=body)
        history[1]["reasoning_content"] = "想过"
        accepted = await client.post(f"{llm.url}/chat/completions", json=body)
    assert refused.status_code == 400
    assert "reasoning_content" in refused.json()["error"]["message"]
    assert accepted.status_code == 200
    assert accepted.json()["choices"][0]["message"]["reasoning_content"] == "想"


async def test_a_turn_honoring_stop_cuts_its_content_at_the_stop_sequence(
    llm: ScriptedLLM,
) -> None:
    llm.script(
        honoring_stop(react("想", action="f", args={}, invented="晴")),
        react(answer="x", invented="晴"),
    )
    chat = model(llm)
    honored = await chat.ainvoke("hi", stop=["Observation:"])
    ignored = await chat.ainvoke("hi", stop=["Observation:"])
    assert honored.content == "Thought: 想\nAction: f\nAction Input: {}\n"
    assert ignored.content == "Final Answer: x\nObservation: 晴"


@pytest.mark.parametrize("turn", [think("想", "答")], ids=["think"])
async def test_a_think_reply_opens_its_content_with_the_block(llm: ScriptedLLM, turn: Turn) -> None:
    llm.script(turn)
    reply = await model(llm).ainvoke("hi")
    assert reply.content == "<think>想</think>\n\n答"


@pytest.mark.parametrize("wording", WORDINGS)
async def test_a_window_refuses_a_too_long_prompt_in_the_providers_words_and_keeps_the_turn(
    llm: ScriptedLLM, wording: str
) -> None:
    llm.limit_context(50, wording=wording)
    llm.script(text("短。"))

    with pytest.raises(openai.BadRequestError) as refused:
        await model(llm).ainvoke("长" * 100)
    reply = await model(llm).ainvoke("短")

    assert refused.value.status_code == 400
    said = json.dumps(refused.value.body, ensure_ascii=False)
    assert {
        "openai": "context_length_exceeded",
        "llama.cpp": "exceeds the available context size (50 tokens)",
        "vllm": "maximum context length is 50 tokens",
        "deepseek": "maximum context length is 50 tokens",
        "dashscope": "Range of input length should be [1, 50]",
    }[wording] in said
    assert reply.content == "短。", "the refused request used no turn"
    assert len(llm.refused) == 1
    assert reply.usage_metadata is not None
    assert (
        reply.usage_metadata["input_tokens"]
        == llm.prompt_tokens[-1]
        == TokenCount().prompt(llm.last_request)
    )


async def test_the_window_questions_are_answered_as_each_server_answers_them(
    llm: ScriptedLLM,
) -> None:
    async with httpx.AsyncClient(base_url=llm.url.removesuffix("/v1")) as http:
        assert (await http.get("/props")).status_code == 404
        assert (await http.post("/api/show", json={"model": "m"})).status_code == 404
        llm.serve_props({"default_generation_settings": {"n_ctx": 8192}})
        llm.serve_models(4096)
        llm.serve_ollama_show({"model_info": {"general.architecture": "llama"}})
        props = (await http.get("/props")).json()
        models = (await http.get("/v1/models")).json()
        shown = (await http.post("/api/show", json={"model": "m"})).json()

    assert props["default_generation_settings"]["n_ctx"] == 8192
    assert models["data"][0]["max_model_len"] == 4096
    assert shown["model_info"]["general.architecture"] == "llama"
    assert llm.discovery_requests == [
        "GET /props",
        "POST /api/show",
        "GET /props",
        "GET /v1/models",
        "POST /api/show",
    ]
