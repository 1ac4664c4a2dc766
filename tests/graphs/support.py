"""Helpers of the graph tests: a thread's config, one user turn, a summary request."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from prompts import render_template

# The first line of the summarizer's prompt (prompts/summarize.md).
SUMMARY_HEAD = render_template("summarize", previous="", conversation="").splitlines()[0]


def config(thread: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


async def say(graph: CompiledStateGraph, message: str, thread: str = "t1") -> dict[str, Any]:
    """Send one user message on `thread` and return the graph's final state."""
    return await graph.ainvoke({"messages": [HumanMessage(message)]}, config(thread))


def is_summary_request(body: dict[str, Any]) -> bool:
    """Whether a chat-completions request body is the context budget's summary call."""
    messages = body["messages"]
    return len(messages) == 1 and str(messages[0]["content"]).startswith(SUMMARY_HEAD)
