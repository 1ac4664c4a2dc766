"""What AGENT_MCP_CONFIG costs an agent's run (issue 31).

    python -m bench.mcp_cost [--lookups 20000] [--calls 10] [--serve 100]

- `lookups`: an agent's tools are had at every model turn and every tool call (the
  graph's tools provider). Timed per lookup for the weather agent without a config and
  with one giving it PyPI's `mcp-server-time` (its tools listed once, then kept), in
  alternating batches so both share the machine's noise.
- `calls`: one call of that server's `get_current_time` through the agent's tool, as the
  tools node makes it: langchain-mcp-adapters opens a session per call, so for a stdio
  server each call starts the program. Wall milliseconds per call.
- `serve`: the bench graph (one tool call, then the answer; the fake model at 0 ms)
  served by `react-agent serve`, run that many times through `POST /api/chat` and as
  many through `/mcp` (`tools/call` of the agent's tool, one MCP session, a progress
  token), alternating; server CPU and client wall time per run, medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

BATCHES = 10


def _config(directory: Path) -> Path:
    path = directory / "mcp.json"
    command = str(Path(sys.executable).with_name("mcp-server-time"))
    servers = {"time": {"command": command, "agents": ["weather"], "timeout_s": 60}}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


async def _per_lookup_us(provide: Callable[[], Awaitable[Sequence[BaseTool]]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await provide()
    return (time.perf_counter() - start) / n * 1e6


async def measure(lookups: int, calls: int) -> dict[str, Any]:
    from graphs.settings import GraphSettings
    from graphs.weather import agent_tools

    with tempfile.TemporaryDirectory() as scratch:
        os.environ["AGENT_MCP_CONFIG"] = str(_config(Path(scratch)))
        configured = GraphSettings()
        del os.environ["AGENT_MCP_CONFIG"]
        plain = GraphSettings()
        without, with_mcp = agent_tools(plain), agent_tools(configured)
        tools = {tool.name: tool for tool in await with_mcp()}  # lists the server's tools
        per = max(1, lookups // BATCHES)
        off: list[float] = []
        on: list[float] = []
        for _ in range(BATCHES):
            off.append(await _per_lookup_us(without, per))
            on.append(await _per_lookup_us(with_mcp, per))
        walls: list[float] = []
        call = {"name": "get_current_time", "args": {"timezone": "UTC"}, "type": "tool_call"}
        for n in range(calls):
            start = time.perf_counter()
            answer = await tools["get_current_time"].ainvoke({**call, "id": f"c{n}"})
            walls.append((time.perf_counter() - start) * 1000)
            if '"timezone": "UTC"' not in str(answer.content):  # a failure is no figure
                raise RuntimeError(f"get_current_time did not answer: {answer.content!r}")
    return {
        "lookup_us_without": statistics.median(off),
        "lookup_us_with": statistics.median(on),
        "stdio_call_ms_median": statistics.median(walls) if walls else None,
        "stdio_call_ms_max": max(walls) if walls else None,
    }


async def serve_cost(runs: int) -> dict[str, Any]:
    """Per run through /api/chat and through /mcp: server CPU ms and wall ms (medians)."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from bench.procs import VENV_BIN, Server, spawn, start_fake_model, stop_process
    from bench.runner import BENCH_GRAPH_SPEC, GRAPH_ID, free_port, scrubbed_env

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        model = await start_fake_model(dict(os.environ), tmp / "model.log")
        env = {
            **scrubbed_env(model.url),
            "AGENT_DB": str(tmp / "agent.sqlite"),
            "AGENT_EXTRA_GRAPHS": BENCH_GRAPH_SPEC,
        }
        port = free_port()
        argv = [str(VENV_BIN / "react-agent"), "serve", "--port", str(port)]
        process = spawn(argv, env=env, cwd=tmp, log_path=tmp / "serve.log")
        server = Server(
            "ours",
            f"http://127.0.0.1:{port}",
            "/healthz",
            process,
            tmp / "serve.log",
            time.perf_counter(),
        )
        cpu: dict[str, list[float]] = {"chat": [], "mcp": []}
        wall: dict[str, list[float]] = {"chat": [], "mcp": []}
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                await server.wait_healthy(client)
                async with (
                    streamable_http_client(f"{server.url}/mcp", http_client=client) as (r, w, _),
                    ClientSession(r, w) as session,
                ):
                    await session.initialize()

                    async def progress(
                        progress: float, total: float | None, message: str | None
                    ) -> None:
                        pass

                    async def by_chat() -> None:
                        body = {"graph": GRAPH_ID, "message": "bench"}
                        (await client.post(f"{server.url}/api/chat", json=body)).raise_for_status()

                    async def by_mcp() -> None:
                        result = await session.call_tool(
                            GRAPH_ID, {"message": "bench"}, progress_callback=progress
                        )
                        if result.isError:
                            raise RuntimeError(f"/mcp call failed: {result.content}")

                    for n in range(2 * runs + 2):  # the first of each warms up
                        kind, run = ("chat", by_chat) if n % 2 == 0 else ("mcp", by_mcp)
                        before, start = server.cpu_s(), time.perf_counter()
                        await run()
                        elapsed = time.perf_counter() - start
                        await asyncio.sleep(0.02)  # the run's end is recorded after its answer
                        if n >= 2:
                            wall[kind].append(elapsed * 1000)
                            cpu[kind].append((server.cpu_s() - before) * 1000)
        finally:
            await stop_process(process)
            await stop_process(model.process)
    return {
        f"{kind}_{what}_ms": statistics.median(values[kind])
        for kind in ("chat", "mcp")
        for what, values in (("cpu", cpu), ("wall", wall))
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_cost")
    parser.add_argument("--lookups", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--serve", type=int, default=0, metavar="RUNS")
    args = parser.parse_args(argv)
    found = asyncio.run(measure(args.lookups, args.calls))
    if args.serve:
        found |= asyncio.run(serve_cost(args.serve))
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
