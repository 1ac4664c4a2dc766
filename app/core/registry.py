"""The agents the service offers: graph id -> module exporting `DESCRIPTION` and `make_graph`.

A graph module's `make_graph(checkpointer, settings)` builds its agent; the service
passes its own settings, so every graph and tool runs as the service was configured.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from app.settings import Settings
from tools.mcp.servers import configured_tools

logger = logging.getLogger(__name__)

GRAPH_MODULES: dict[str, str] = {
    "weather": "graphs.weather",
    "tushare": "graphs.tushare",
}


@dataclass(frozen=True, slots=True)
class GraphInfo:
    """One agent as `GET /api/graphs` lists it."""

    id: str
    description: str


def _load(module_name: str) -> ModuleType | None:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # the module exists but something it needs is missing: a real error
        logger.warning("graph module %s is not installed; its agent is not offered", module_name)
        return None


def _graph_modules(settings: Settings) -> dict[str, str]:
    # AGENT_EXTRA_GRAPHS adds graphs (the benchmark's) after the product agents, never over one.
    pairs = (item.partition("=") for item in settings.agent_extra_graphs.split(","))
    extra = {key.strip(): value.strip() for key, _, value in pairs if key.strip() and value}
    return GRAPH_MODULES | {key: value for key, value in extra.items() if key not in GRAPH_MODULES}


def available_graphs(settings: Settings, only: str | None = None) -> dict[str, ModuleType]:
    """Graph id -> its module, for every agent whose module is present (or just `only`)."""
    found: dict[str, ModuleType] = {}
    for graph_id, module_name in _graph_modules(settings).items():
        if only is not None and graph_id != only:
            continue
        module = _load(module_name)
        if module is not None:
            found[graph_id] = module
    return found


def describe(modules: dict[str, ModuleType]) -> list[GraphInfo]:
    """The listing of `modules` (as from `available_graphs()`)."""
    return [
        GraphInfo(id=graph_id, description=str(getattr(module, "DESCRIPTION", graph_id)))
        for graph_id, module in modules.items()
    ]


def compile_graphs(
    modules: dict[str, ModuleType], checkpointer: Checkpointer, settings: Settings
) -> dict[str, CompiledStateGraph]:
    """Every agent compiled with `checkpointer` and `settings` (done once, at start-up)."""
    return {
        graph_id: module.make_graph(checkpointer, settings) for graph_id, module in modules.items()
    }


MCP_UNKNOWN_AGENT = (
    "AGENT_MCP_CONFIG {path}: server {name!r}: unknown agent {agent!r} (agents: {known})"
)


async def start_mcp_servers(settings: Settings, graph_ids: Sequence[str]) -> None:
    """Say at start-up what is wrong in AGENT_MCP_CONFIG, one line each, and start the
    servers it gives the agents, so one that fails is said now (by `tools.mcp.servers`)
    rather than at the first request. Nothing here stops the service."""
    config = settings.agent_mcp_config
    for problem in config.problems:
        logger.warning("%s", problem)
    known = ", ".join(graph_ids)
    for server in config.servers:
        for agent in server.agents:
            if agent not in graph_ids:
                line = MCP_UNKNOWN_AGENT.format(
                    path=config.path, name=server.name, agent=agent, known=known
                )
                logger.warning("%s", line)
    await asyncio.gather(
        *(configured_tools(graph_id, settings) for graph_id in graph_ids), return_exceptions=True
    )
