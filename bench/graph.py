"""The benchmark's agent: the project's ReAct loop with one constant-time tool.

Every target serves this same graph: in-process (the floor), under `react-agent serve`
(registered as graph id `bench`) and under `langgraph dev` (`bench.graph:graph`).
"""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import build_react_graph

DESCRIPTION = "benchmark agent: one constant-time tool (bench/, never a product agent)"
TOOL_RESULT = "lookup result: 42"


@tool
async def lookup(query: str) -> str:
    """Look something up (the benchmark's tool: answers at once, the same every time)."""
    return TOOL_RESULT


builder = build_react_graph(name="bench", prompts=("ask",), tools=[lookup])


def make_graph(checkpointer: Checkpointer = None) -> CompiledStateGraph:
    """The bench graph, compiled with `checkpointer` (none for `langgraph dev`)."""
    return builder.compile(checkpointer=checkpointer, name="bench")


graph = make_graph()
