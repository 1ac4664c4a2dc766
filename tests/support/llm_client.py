"""Clients of the scripted LLM (`tests.doubles.llm`): langchain-openai's, as the app
calls it, and a raw one that returns the SSE payloads as sent, to check their shapes."""

from __future__ import annotations

import json
from typing import Any

import httpx
from langchain_core.messages import AIMessageChunk
from langchain_openai import ChatOpenAI

from tests.doubles.llm import ScriptedLLM


def model(llm: ScriptedLLM, **kwargs: Any) -> ChatOpenAI:
    """A ChatOpenAI on `llm` (`kwargs`: its own options, e.g. `max_retries`)."""
    return ChatOpenAI(base_url=llm.url, api_key="test", model="test-model", **kwargs)


async def streamed(chat: ChatOpenAI, prompt: str = "hi") -> tuple[AIMessageChunk, int]:
    """The streamed reply to `prompt`, its chunks added up, and how many chunks came."""
    total: AIMessageChunk | None = None
    chunks = 0
    async for chunk in chat.astream(prompt):
        chunks += 1
        total = chunk if total is None else total + chunk
    assert total is not None, "the stream ended without a chunk"
    return total, chunks


async def raw_stream(llm: ScriptedLLM, **body: Any) -> list[str]:
    """The SSE `data:` payloads of one streamed request, as sent."""
    request = {"model": "m", "messages": [], "stream": True, **body}
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", f"{llm.url}/chat/completions", json=request) as response,
    ):
        return [
            line.removeprefix("data: ")
            async for line in response.aiter_lines()
            if line.startswith("data: ")
        ]


def deltas(payloads: list[str]) -> list[dict[str, Any]]:
    """The `delta` of each chunk's first choice (chunks without a choice left out)."""
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def call_parts(payloads: list[str]) -> list[dict[str, Any]]:
    """Every tool-call fragment of the stream, in the order sent."""
    return [part for delta in deltas(payloads) for part in delta.get("tool_calls", [])]


def finish_reasons(payloads: list[str]) -> list[str]:
    """The last chunk's finish reason, as a list of one (empty without a choice)."""
    chunks = [json.loads(p) for p in payloads if p != "[DONE]"]
    return [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1:]
