"""The weather agent: Open-Meteo through get_weather, plus the ask tools."""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from graphs.react import build_react_graph
from tools.ask import ASK_TOOLS
from tools.weather import get_weather

DESCRIPTION = "天气助手：按城市查询实时天气和未来三天预报（Open-Meteo）"

builder = build_react_graph(
    name="weather", prompts=("weather", "ask"), tools=[get_weather, *ASK_TOOLS]
)


def make_graph(checkpointer: Checkpointer = None) -> CompiledStateGraph:
    """The weather graph, compiled with `checkpointer` (none for `langgraph dev`)."""
    return builder.compile(checkpointer=checkpointer, name="weather")


graph = make_graph()
