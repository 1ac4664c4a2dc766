"""Profile `react-agent serve` under the benchmark's load with py-spy, and summarise it.

    python -m bench.profile [--endpoint agui|chat] [--clients 10] [--seconds 20]
                            [--latency-ms 0] [--rate 250]

Starts the fake model and a fresh server, keeps `--clients` clients running the bench
run against it, samples the server with `py-spy record --nonblocking` (the server is
never paused), then prints the hottest functions and files: "self" is time spent in
the function itself, "total" includes what it calls. Stacks are kept in
`bench/raw/profile-<stamp>.txt` (collapsed format, for flamegraph tools).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from bench.measure import throughput
from bench.plan import RAW_DIR, Plan
from bench.procs import ROOT, VENV_BIN
from bench.runner import log, stack
from bench.targets import HttpTarget, OursAgui, OursChat

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")
PROJECT = f"{ROOT}/"
SITE = re.compile(r".*/(site-packages|lib/python3\.\d+)/")


HTTP_SERVER = r"^(uvicorn/(?!main\.py|server\.py|_compat\.py)|starlette/|fastapi/)"
# Layers for the additive breakdown; a frame matching none (asyncio, typing, inspect,
# threading, ...) is charged to the nearest caller that matches one.
LAYERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("logging", r"^logging/"),
        ("json (stdlib)", r"^json/"),
        ("service: app/events.py (transformer)", r"^app/events\.py"),
        ("service: app/server.py (routes, SSE wiring)", r"^app/server\.py"),
        ("service: app/runs.py + app/threads.py", r"^app/(runs|threads)\.py"),
        ("graph code (graphs/, tools/, bench tool)", r"^(graphs|tools|bench)/"),
        ("AG-UI encoder + event models", r"^ag_ui/"),
        ("pydantic", r"^pydantic(_core)?/"),
        ("SSE (sse_starlette)", r"^sse_starlette/"),
        # uvicorn's main/server/_compat frames are the root of every stack: not a layer;
        # anyio serves both the SSE response and the model client: charged to its caller.
        ("HTTP server (uvicorn, starlette, fastapi)", HTTP_SERVER),
        ("checkpoint: langgraph sqlite saver + serde", r"^langgraph/checkpoint/"),
        ("checkpoint: aiosqlite + sqlite3", r"^(aiosqlite|sqlite3)/"),
        ("langchain callbacks (stream handler)", r"^langchain_core/(callbacks|tracers)/"),
        ("langgraph pregel + stream handler", r"^langgraph/"),
        ("langchain-core runnables, messages", r"^langchain_core/"),
        ("model client: langchain-openai", r"^langchain_openai/"),
        ("model client: openai SDK", r"^openai/"),
        ("model client: httpx2/httpcore2", r"^(httpx2|httpcore2|httpx|httpcore|h11)/"),
    )
)


def _short(path: str) -> str:
    short = SITE.sub("", path)
    if short == path and path.startswith(PROJECT):
        return path[len(PROJECT) :]
    return short


def _layer(path: str) -> str | None:
    for name, pattern in LAYERS:
        if pattern.search(path):
            return name
    return None


def summarise(collapsed: str, top: int = 25) -> str:
    """Self and total shares per function, and total share per file, from collapsed stacks."""
    self_by_func: Counter[str] = Counter()
    total_by_func: Counter[str] = Counter()
    total_by_file: Counter[str] = Counter()
    self_by_layer: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        count = int(count_text)
        samples += count
        funcs: list[str] = []
        files: list[str] = []
        for frame in stack_text.split(";"):
            match = FRAME.match(frame)
            if match is None:
                funcs.append(frame)
                continue
            path = _short(match["file"])
            funcs.append(f"{match['func']} ({path})")
            files.append(path)
        if not funcs:
            continue
        layer = next((name for path in reversed(files) if (name := _layer(path))), None)
        self_by_layer[layer or "other (event loop, threads)"] += count
        self_by_func[funcs[-1]] += count
        for func in set(funcs):
            total_by_func[func] += count
        for path in set(files):
            total_by_file[path] += count
    if not samples:
        return "no samples"

    def table(title: str, counter: Counter[str]) -> list[str]:
        rows = [f"{title}", "| share | where |", "|---:|---|"]
        rows += [f"| {n * 100 / samples:5.1f}% | {k} |" for k, n in counter.most_common(top)]
        return [*rows, ""]

    return "\n".join(
        [
            f"{samples} samples",
            "",
            *table("### self time by layer (stdlib charged to its caller)", self_by_layer),
            *table("### self time by function", self_by_func),
            *table("### total time by function (includes callees)", total_by_func),
            *table("### total time by file", total_by_file),
        ]
    )


async def _profile(
    endpoint: str, clients: int, seconds: float, latency_ms: float, rate: int, extra: list[str]
) -> str:
    plan = Plan(soak_sessions=0, peer=False)
    async with stack(plan) as shared:
        await shared.set_latency(latency_ms, plan.token_delay_for(latency_ms))
        server = shared.start_ours()
        await server.wait_healthy(shared.client)
        kind: type[HttpTarget] = OursAgui if endpoint == "agui" else OursChat
        target = kind(shared.answer, shared.client, server)
        await throughput(target, clients, clients * 5)  # warm-up
        RAW_DIR.mkdir(parents=True, exist_ok=True)
        out = RAW_DIR / f"profile-{datetime.now():%Y%m%d-%H%M%S}-{endpoint}.txt"
        argv = [
            str(VENV_BIN / "py-spy"),
            "record",
            "--pid",
            str(server.process.pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            str(rate),
            *extra,
            "--full-filenames",
            "--format",
            "raw",
            "--output",
            str(out),
        ]
        spy = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        runs = 0
        cpu0, started = server.cpu_s(), time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            batch = await throughput(target, clients, clients * 4)
            runs += len(batch.tally.samples)
        cpu_ms = (server.cpu_s() - cpu0) * 1000 / max(runs, 1)
        wall = time.perf_counter() - started
        _, err = await spy.communicate()
        if spy.returncode != 0:
            raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-2000:]}")
        log(f"stacks: {out}")
        head = (
            f"## py-spy {' '.join(extra)}: ours/{endpoint}, {clients} clients, "
            f"{latency_ms:g} ms model latency, "
            f"{runs} runs in {wall:.1f} s ({runs / wall:.1f} runs/s), "
            f"server CPU {cpu_ms:.1f} ms/run\n\n"
        )
        return head + summarise(await asyncio.to_thread(out.read_text))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.profile`: print the summary (Markdown)."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    parser.add_argument("--endpoint", choices=["agui", "chat"], default="agui")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument(
        "--gil", action="store_true", help="only samples holding the GIL (Python CPU work)"
    )
    parser.add_argument(
        "--blocking",
        action="store_true",
        help="pause the server per sample (exact stacks and idle detection, more overhead)",
    )
    args = parser.parse_args(argv)
    extra = [] if args.blocking else ["--nonblocking"]
    if args.gil:
        extra.append("--gil")
    if not (VENV_BIN / "py-spy").exists():
        sys.stderr.write("py-spy is not installed: run `make install`\n")
        return 2
    summary = asyncio.run(
        _profile(args.endpoint, args.clients, args.seconds, args.latency_ms, args.rate, extra)
    )
    sys.stdout.write(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
