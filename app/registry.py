"""The agents the service offers: graph id -> module exporting `DESCRIPTION` and `make_graph`."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from types import ModuleType

from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from app.settings import get_settings

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


def _graph_modules() -> dict[str, str]:
    # AGENT_EXTRA_GRAPHS adds graphs (the benchmark's) after the product agents, never over one.
    pairs = (item.partition("=") for item in get_settings().agent_extra_graphs.split(","))
    extra = {key.strip(): value.strip() for key, _, value in pairs if key.strip() and value}
    return GRAPH_MODULES | {key: value for key, value in extra.items() if key not in GRAPH_MODULES}


def available_graphs() -> dict[str, ModuleType]:
    """Graph id -> its module, for every agent whose module is present."""
    found: dict[str, ModuleType] = {}
    for graph_id, module_name in _graph_modules().items():
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
    modules: dict[str, ModuleType], checkpointer: Checkpointer
) -> dict[str, CompiledStateGraph]:
    """Every agent compiled with `checkpointer` (done once, at start-up)."""
    return {graph_id: module.make_graph(checkpointer) for graph_id, module in modules.items()}
