"""`react-agent serve` on both backends (tests/service/conftest.py's fixtures), and
langgraph-sdk's own client pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from tests.doubles.llm import Turn, text
from tests.graphs.support import is_summary_request
from tests.langgraph_api.people import clients, served  # noqa: F401
from tests.service.conftest import API_KEY, Api, api, backend, mcp, server, thread_id  # noqa: F401
from tests.support.processes import ServerProcess

WEATHER_ASSISTANT = "5fb44052-6611-57fc-99b4-527b0d62f788"


@pytest.fixture
async def client(server: ServerProcess) -> AsyncIterator[LangGraphClient]:  # noqa: F811
    """langgraph-sdk's client, as a script would make it: the server's own address."""
    sdk = get_client(url=server.url, headers={"Authorization": f"Bearer {API_KEY}"})
    yield sdk
    await sdk.aclose()


async def collect(parts: AsyncIterator[Any]) -> list[tuple[str, Any, str | None]]:
    """(event, data, id) of every part of a stream, to its end."""
    return [(part.event, part.data, part.id) async for part in parts]


def said(content: str) -> dict[str, Any]:
    """A run's input: one user message."""
    return {"messages": [{"role": "user", "content": content}]}


def contents(values: dict[str, Any]) -> list[str]:
    """The contents of a state's messages, in order."""
    return [m["content"] for m in values["messages"]]


class LongReplies:
    """A long answer to each question (so older turns leave the working state), and a
    short summary to a summary request."""

    def __call__(self, body: dict[str, Any]) -> Turn:
        if is_summary_request(body):
            return text("摘要：问过几个城市。")
        question = str(body["messages"][-1]["content"])
        return text(f"答：{question}。" + "晴" * 300, chunk_size=40)
