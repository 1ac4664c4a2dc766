"""The bench graph with a question: its `lookup` tool asks the user before it answers.

Served as graph id `ask` by `bench/langgraph_compare.py` (to ours through
`AGENT_EXTRA_GRAPHS`, to Aegra through its `aegra.json`): the fake model calls `lookup`
first, the tool pauses the run with an interrupt (the project's `input` question), and a
`Command(resume=...)` answers it; then the model streams its fixed answer.
"""

from __future__ import annotations

from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from tools.interrupts import ask, input_payload

DESCRIPTION = "benchmark agent whose tool asks a question (bench/, never a product agent)"
QUESTION = "which one?"


@tool
async def lookup(query: str) -> str:
    """Look something up, once the user said which one."""
    which = ask(input_payload(QUESTION, placeholder="bench"))
    return f"lookup result: {which}"


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    """The asking bench graph on `checkpointer` (none for Aegra, which injects its own)."""
    settings = settings or GraphSettings()
    builder = build_react_graph(prompts=("ask",), tools=[lookup], settings=settings)
    return builder.compile(checkpointer=checkpointer, name="ask")


graph = make_graph()
