"""The benchmark's agent: the project's ReAct loop with one constant-time tool.

Every target serves this same graph: in-process (the floor), under `react-agent serve`
(registered as graph id `bench`) and under `langgraph dev` (`bench.graph:graph`).
"""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import build_react_graph
from graphs.settings import GraphSettings

DESCRIPTION = "benchmark agent: one constant-time tool (bench/, never a product agent)"
TOOL_RESULT = "lookup result: 42"


@tool
async def lookup(query: str) -> str:
    """Look something up (the benchmark's tool: answers at once, the same every time)."""
    return TOOL_RESULT


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    """The bench graph on `checkpointer` (none for `langgraph dev`)."""
    settings = settings or GraphSettings()
    builder = build_react_graph(prompts=("ask",), tools=[lookup], settings=settings)
    return builder.compile(checkpointer=checkpointer, name="bench")


graph = make_graph()
