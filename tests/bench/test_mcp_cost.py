"""`python -m bench.mcp_cost`: an agent's tools lookup with and without AGENT_MCP_CONFIG,
and a call of PyPI's mcp-server-time through the agent's tool."""

from __future__ import annotations

import pytest

from bench.mcp_cost import measure

pytestmark = pytest.mark.processes  # the stdio server is a child process


async def test_the_figures_come_from_lookups_and_calls_that_answered() -> None:
    found = await measure(lookups=200, calls=1)

    assert found["lookup_us_without"] > 0
    # With a server the lookup reads its kept list: dearer than none, never a new listing.
    assert found["lookup_us_with"] > found["lookup_us_without"]
    assert found["lookup_us_with"] < 5_000
    assert found["stdio_call_ms_median"] > 0
