"""What a run costs through LangGraph's API beside the same run over AG-UI (issue 30).

    python -m bench.langgraph_cost [--runs 60]

One `react-agent serve` (the bench graph, a fresh SQLite file) and the fake model. The
same one-turn run, on a new thread each time, alternately through
`POST /api/agents/bench` (AG-UI, read to RUN_FINISHED) and
`POST /threads/{id}/runs/stream` with `stream_mode=["values", "messages-tuple"]`
(langgraph-sdk's wire, read to `end`), one at a time, so the server's CPU per run can be
read from /proc around each. Per path: wall ms to the end (p50, p90) and server CPU ms
per run (mean). The log is written once either way; the LangGraph path folds it into
its parts as it sends them, and reads the thread's start state once per stream.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.procs import ROOT, VENV_BIN, Server, spawn, start_fake_model, stop_process
from bench.runner import BENCH_GRAPH_SPEC, free_port, scrubbed_env
from bench.targets import GRAPH_ID


async def agui(client: httpx.AsyncClient, url: str) -> None:
    thread_id = uuid.uuid4().hex
    body = {
        "threadId": thread_id,
        "runId": uuid.uuid4().hex,
        "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": "北京天气"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    async with client.stream("POST", f"{url}/api/agents/{GRAPH_ID}", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data:") and '"RUN_FINISHED"' in line:
                return
    raise RuntimeError("the AG-UI stream ended without RUN_FINISHED")


async def langgraph(client: httpx.AsyncClient, url: str) -> None:
    body = {
        "assistant_id": GRAPH_ID,
        "input": {"messages": [{"role": "user", "content": "北京天气"}]},
        "stream_mode": ["values", "messages-tuple"],
    }
    path = f"{url}/threads/{uuid.uuid4()}/runs/stream"
    async with client.stream("POST", path, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line == "event: end":
                return
    raise RuntimeError("the LangGraph stream ended without `end`")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = await start_fake_model(scrubbed_env("http://127.0.0.1:9"), work / "model.log")
        env = {
            **scrubbed_env(model.url),
            "AGENT_DB": str(work / "agent.sqlite"),
            "AGENT_EXTRA_GRAPHS": BENCH_GRAPH_SPEC,
        }
        port = free_port()
        argv = [str(VENV_BIN / "react-agent"), "serve", "--port", str(port)]
        process = spawn(argv, env=env, cwd=ROOT, log_path=work / "server.log")
        server = Server(
            "ours",
            f"http://127.0.0.1:{port}",
            "/healthz",
            process,
            work / "server.log",
            time.perf_counter(),
        )
        paths = {"agui": agui, "langgraph": langgraph}
        wall: dict[str, list[float]] = {name: [] for name in paths}
        cpu: dict[str, list[float]] = {name: [] for name in paths}
        try:
            async with httpx.AsyncClient(timeout=60) as client:
                await server.wait_healthy(client)
                for run in paths.values():  # warm-up: imports, first reads
                    await run(client, server.url)
                for index in range(runs * 2):
                    name = ("agui", "langgraph")[index % 2]
                    before_cpu, before = server.cpu_s(), time.perf_counter()
                    await paths[name](client, server.url)
                    wall[name].append((time.perf_counter() - before) * 1000)
                    cpu[name].append((server.cpu_s() - before_cpu) * 1000)
        finally:
            await server.stop()
            await stop_process(model.process)
    for name in paths:
        ordered = sorted(wall[name])
        p90 = ordered[int(len(ordered) * 0.9) - 1]
        print(
            f"{name:10s} runs={len(ordered)} wall p50={statistics.median(ordered):.1f} ms "
            f"p90={p90:.1f} ms  server CPU/run={statistics.mean(cpu[name]):.1f} ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60, help="runs per path")
    asyncio.run(main(parser.parse_args().runs))
