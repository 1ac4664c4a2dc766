"""Helpers of the graph tests: a thread's config and one user turn."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph


def config(thread: str = "t1") -> RunnableConfig:
    return {"configurable": {"thread_id": thread}}


async def say(graph: CompiledStateGraph, message: str, thread: str = "t1") -> dict[str, Any]:
    """Send one user message on `thread` and return the graph's final state."""
    return await graph.ainvoke({"messages": [HumanMessage(message)]}, config(thread))
