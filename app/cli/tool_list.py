"""`react-agent tools`: every agent's tools, with where each comes from and its risk.

The tools are had as a run has them (the configured MCP servers started, the Tushare
server connected): a server that cannot be reached is said on stderr, and its agent is
listed with the tools it does have.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.registry import available_graphs
from app.settings import Settings
from graphs.react import ToolsProvider
from tools.errors import ToolsetUnavailable
from tools.mcp.config import SERVER_PROBLEM
from tools.mcp.servers import ServerUnavailable, server_tools, source_of
from tools.risk import risk_of

UNAVAILABLE = "{graph}: tools unavailable: {reason}"


@dataclass(frozen=True)
class ToolLine:
    graph: str
    name: str
    source: str
    risk: str


async def _lines(settings: Settings) -> tuple[list[ToolLine], list[str]]:
    lines: list[ToolLine] = []
    config = settings.agent_mcp_config
    problems = list(config.problems)
    for server in {server.name: server for server in config.servers if server.agents}.values():
        try:  # started here to say why one fails; the agents' listings reuse them
            await server_tools(server, settings)
        except ServerUnavailable as exc:
            problems.append(SERVER_PROBLEM.format(path=config.path, name=server.name, reason=exc))
    for graph_id, module in available_graphs(settings).items():
        provider: ToolsProvider | None = getattr(module, "agent_tools", lambda _: None)(settings)
        if provider is None:
            continue
        try:
            tools = await provider()
        except ToolsetUnavailable as exc:
            problems.append(UNAVAILABLE.format(graph=graph_id, reason=exc))
            continue
        lines += [ToolLine(graph_id, t.name, source_of(t), risk_of(t)) for t in tools]
    return lines, problems


def table(lines: Sequence[ToolLine]) -> list[str]:
    """The lines as aligned columns: agent, tool, source, risk."""
    header = ToolLine("AGENT", "TOOL", "SOURCE", "RISK")
    rows = [header, *lines]
    widths = [max(len(getattr(row, f)) for row in rows) for f in ("graph", "name", "source")]
    return [
        f"{row.graph:<{widths[0]}}  {row.name:<{widths[1]}}  {row.source:<{widths[2]}}  {row.risk}"
        for row in rows
    ]


def run(settings: Settings) -> int:
    """List the tools on stdout, problems on stderr; 0 even when a server is down."""
    lines, problems = asyncio.run(_lines(settings))
    for problem in problems:
        sys.stderr.write(problem + "\n")
    for line in table(lines):
        sys.stdout.write(line + "\n")
    return 0
