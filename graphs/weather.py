"""The weather agent: Open-Meteo through get_weather, plus the ask tools."""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import ToolsProvider, build_react_graph, static_tools, with_mcp_servers
from graphs.settings import GraphSettings
from tools.ask import ASK_TOOLS
from tools.weather import weather_tool

DESCRIPTION = "天气助手：按城市查询实时天气和未来三天预报（Open-Meteo）"


def agent_tools(settings: GraphSettings) -> ToolsProvider:
    """get_weather, the ask tools, and the configured MCP servers' tools for `weather`."""
    own = static_tools([weather_tool(settings), *ASK_TOOLS])
    return with_mcp_servers("weather", settings, own)


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    """The weather graph on `checkpointer` (none for `langgraph dev`).

    Without `settings` they are read from the environment now.
    """
    settings = settings or GraphSettings()
    builder = build_react_graph(
        prompts=("weather", "ask"),
        tools=agent_tools(settings),
        settings=settings,
    )
    return builder.compile(checkpointer=checkpointer, name="weather")


graph = make_graph()
