"""The tushare agent: A-share single-stock analysis over the Tushare MCP tools.

Tools: whatever the MCP server lists, `resolve_stock`, the ask tools and
`save_report`. They are connected on the first request, not at import, so this
module imports and compiles without a token and without network.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import ToolsProvider, build_react_graph, with_mcp_servers
from graphs.settings import GraphSettings
from tools.ask import ASK_TOOLS
from tools.mcp.toolset import get_tushare_toolset
from tools.report import report_tool

DESCRIPTION = "A 股个股分析：通过 Tushare MCP 查询行情，做量价与月线趋势分析"


def tushare_tools(settings: GraphSettings) -> ToolsProvider:
    """MCP tools + resolve_stock + ask tools + save_report (the same tuple while cached)."""
    local: tuple[BaseTool, ...] = (*ASK_TOOLS, report_tool(settings))

    async def provide() -> Sequence[BaseTool]:
        return (await get_tushare_toolset(settings, local)).tools

    return provide


def agent_tools(settings: GraphSettings) -> ToolsProvider:
    """`tushare_tools` and the configured MCP servers' tools for `tushare`."""
    return with_mcp_servers("tushare", settings, tushare_tools(settings))


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    """The tushare graph on `checkpointer` (none for `langgraph dev`).

    Without `settings` they are read from the environment now.
    """
    settings = settings or GraphSettings()
    builder = build_react_graph(
        prompts=("tushare", "ask"),
        tools=agent_tools(settings),
        settings=settings,
    )
    return builder.compile(checkpointer=checkpointer, name="tushare")


graph = make_graph()
