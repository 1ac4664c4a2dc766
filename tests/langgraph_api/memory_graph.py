"""A test agent whose tools use the graph's store, as a node of any agent could: served
by the test's server as graph `memo` (AGENT_EXTRA_GRAPHS=memo=tests.langgraph_api.memory_graph).

`recall` answers the admin's note at `("notes",)`/`today` as the store API shows it;
`remember` writes one there.
"""

from __future__ import annotations

import json

from langchain_core.tools import tool
from langgraph.config import get_store
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from app.http.langgraph.store import user_namespace
from graphs.react import build_react_graph
from graphs.settings import GraphSettings

DESCRIPTION = "test agent: recalls and remembers through the graph's store"
NOTES = user_namespace("admin", "notes")
KEY = "today"


@tool
async def recall() -> str:
    """Read today's note."""
    item = await get_store().aget(NOTES, KEY)
    return json.dumps(item.value if item is not None else None, ensure_ascii=False)


@tool
async def remember(note: str) -> str:
    """Keep a note for today."""
    await get_store().aput(NOTES, KEY, {"note": note, "by": "graph"})
    return "kept"


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    settings = settings or GraphSettings()
    builder = build_react_graph(prompts=("ask",), tools=[recall, remember], settings=settings)
    return builder.compile(checkpointer=checkpointer, name="memo")
