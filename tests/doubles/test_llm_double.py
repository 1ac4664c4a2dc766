"""ScriptedLLM speaks OpenAI's chat-completions protocol as langchain-openai consumes it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import openai
import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

from tests.doubles.llm import (
    OUT_OF_SCRIPT,
    ScriptedLLM,
    call,
    error,
    hang,
    text,
    tool_call,
    tool_calls,
)

ARGS = {"location": "北京", "days": 3, "flags": ["a", "b"]}


def model(llm: ScriptedLLM, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(base_url=llm.url, api_key="test", model="test-model", **kwargs)


async def streamed(chat: ChatOpenAI, prompt: str = "hi") -> tuple[AIMessageChunk, int]:
    total: AIMessageChunk | None = None
    chunks = 0
    async for chunk in chat.astream(prompt):
        chunks += 1
        total = chunk if total is None else total + chunk
    assert total is not None
    return total, chunks


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
