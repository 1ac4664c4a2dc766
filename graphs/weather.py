"""The weather agent: Open-Meteo through get_weather, plus the ask tools."""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import build_react_graph
from graphs.settings import GraphSettings
from tools.ask import ASK_TOOLS
from tools.weather import weather_tool

DESCRIPTION = "天气助手：按城市查询实时天气和未来三天预报（Open-Meteo）"


def make_graph(
    checkpointer: Checkpointer = None, settings: GraphSettings | None = None
) -> CompiledStateGraph:
    """The weather graph on `checkpointer` (none for `langgraph dev`).

    Without `settings` they are read from the environment now.
    """
    settings = settings or GraphSettings()
    builder = build_react_graph(
        prompts=("weather", "ask"),
        tools=[weather_tool(settings), *ASK_TOOLS],
        settings=settings,
    )
    return builder.compile(checkpointer=checkpointer, name="weather")


graph = make_graph()
