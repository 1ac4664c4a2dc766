"""Profile `react-agent serve` under the benchmark's load with py-spy, and summarise it.

    python -m bench.profile [--endpoint agui|chat|langgraph|langgraph-wait]
                            [--clients 10] [--seconds 20] [--latency-ms 0] [--rate 250] [--postgres]
                            [--thread-messages N [--runs 10]]

Starts the fake model and a fresh server (on SQLite, or a fresh PostgreSQL database
with `--postgres`), keeps `--clients` clients running the bench run against it, samples
the server with `py-spy record --nonblocking` (the server is never paused), then prints
where the time went: by component (`COMPONENTS`: each sample to the first component its
stack matches, so the shares add up; ms per run is the share times the server's CPU
per run), by layer, and the hottest functions and files: "self" is time spent in the
function itself, "total" includes what it calls. Stacks are kept in
`bench/raw/profile-<stamp>.txt` (collapsed format, for flamegraph tools; `--raw-dir`
elsewhere).

By default every run starts a new thread and the clients run for `--seconds`. With
`--thread-messages N` (issue 26) each client first grows a thread of its own to
`N - runs x 2` messages, then the recorder samples exactly `--runs` runs per client
on it, so the recorded runs start from `N - runs x 2` to about `N + runs x 2` messages.
"""

from __future__ import annotations

import argparse
import asyncio
import linecache
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from bench import postgres
from bench.growth import MESSAGES_PER_RUN, on_thread
from bench.langgraph_cost import LgStream, LgWait
from bench.measure import throughput
from bench.plan import RAW_DIR, Plan
from bench.procs import ROOT, VENV_BIN, Server
from bench.runner import Stack, log, stack
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
        ("service: app/core/runs/events.py (transformer)", r"^app/core/runs/events\.py"),
        ("service: app/http/ (routes, SSE wiring)", r"^app/http/"),
        ("service: app/core/ (runs, threads, log, stores)", r"^app/core/"),
        ("graph code (graphs/, tools/, bench tool)", r"^(graphs|tools|bench)/"),
        ("AG-UI encoder + event models", r"^ag_ui/"),
        ("pydantic", r"^pydantic(_core)?/"),
        ("SSE (sse_starlette)", r"^sse_starlette/"),
        # uvicorn's main/server/_compat frames are the root of every stack: not a layer;
        # anyio serves both the SSE response and the model client: charged to its caller.
        ("HTTP server (uvicorn, starlette, fastapi)", HTTP_SERVER),
        ("checkpoint: langgraph saver + serde", r"^langgraph/checkpoint/"),
        (
            "database drivers: aiosqlite, sqlite3, psycopg",
            r"^(aiosqlite|sqlite3|psycopg|psycopg_pool)/",
        ),
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


# The additive breakdown by component (issue 26). Scopes first: a sample goes to the
# first scope any frame of its stack (`path:function`) is in, so the checkpoint's
# decoding counts as decoding wherever it is called from (`prepare_run`, the thread view,
# `/api/chat`'s answer), and what is left of those callers is their own. A sample in no
# scope goes to the layer of its innermost frame that has one: the run's outer frames
# (the service's task, the event transformer, the pregel loop) hold every stack.
# py-spy names a method `Class.method` and a nested function `outer.<locals>.inner`.
_QUALIFIED = r"(?:[\w<>]+\.)*"
SCOPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        (
            "checkpoint decoding (serde loads, message objects)",
            rf"^langgraph/checkpoint/serde/jsonplus\.py:{_QUALIFIED}(loads_typed|ext_hook|_reviver)$",
        ),
        (
            "checkpoint encoding (serde dumps: checkpoints, task writes)",
            rf"^langgraph/checkpoint/serde/jsonplus\.py:{_QUALIFIED}"
            r"(dumps_typed|_msgpack_default|_msgpack_enc)$",
        ),
        (
            "model request: messages to dicts (langchain-openai, graphs/model.py)",
            r"^(langchain_openai/chat_models/base\.py|graphs/model\.py):"
            rf"{_QUALIFIED}_get_request_payload$",
        ),
        (
            "model request: openai SDK (transform, build, JSON body)",
            rf"^openai/(_utils/_transform\.py:|_base_client\.py:{_QUALIFIED}_build_request$)",
        ),
        ("LangGraph add_messages reducer", r"^langgraph/graph/message\.py:"),
        (
            "LangGraph checkpoint creation, channels",
            r"^langgraph/(pregel/_checkpoint\.py|channels/)",
        ),
        ("service: prepare_run (but its decoding)", r"^app/core/runs/prepare\.py:prepare_run$"),
        ("service: /api/chat's answer (Run.result)", r"^app/core/runs/service\.py:Run\.result$"),
        (
            "service: thread view, interrupts (threads.py)",
            r"^app/core/runs/threads\.py:"
            r"(read_thread|pending_interrupts|_interrupted_calls|to_agui_messages)$",
        ),
    )
)
LAYERS_BY_COMPONENT: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        (
            "savers: reads and writes (SQL, rows; not serde)",
            r"^(langgraph/checkpoint/(sqlite|postgres)/|app/core/storage/(sqlite|postgres)/saver\.py)",
        ),
        (
            "database drivers (aiosqlite, sqlite3, psycopg, our connections)",
            r"^(aiosqlite/|sqlite3/|psycopg/|psycopg_pool/"
            r"|app/core/storage/(sqlite|postgres)/connection\.py)",
        ),
        ("service: event transformer (events.py)", r"^app/core/runs/events\.py:"),
        ("service: run log, run store", r"^app/core/(runs/log\.py|storage/)"),
        # app/main.py is the root of every stack too.
        ("service: other (service.py, http, observability)", r"^app/(?!main\.py)"),
        ("langchain callbacks, tracers", r"^langchain_core/(callbacks|tracers)/"),
        ("LangGraph pregel loop, stream handlers", r"^langgraph/"),
        (
            "model response: openai SDK, httpx (streaming, parsing)",
            r"^(openai|httpx2?|httpcore2?|h11)/",
        ),
        ("langchain-core, langchain-openai (other)", r"^(langchain_core|langchain_openai)/"),
        ("graph code (graphs/, tools/, bench tool)", r"^(graphs|tools|bench)/"),
        # uvicorn's main/server/_compat frames are the root of every stack (the loop).
        ("HTTP server, SSE, AG-UI encoding", rf"{HTTP_SERVER}|^(sse_starlette|ag_ui)/"),
        ("pydantic", r"^pydantic(_core)?/"),
    )
)
COMPONENTS = (*SCOPES, *LAYERS_BY_COMPONENT)
OTHER = "other (event loop, stdlib)"
# An idle worker thread (a thread pool's, aiosqlite's) blocks in a C call of its loop,
# and py-spy's --nonblocking idle detection counts it when the machine is so loaded that
# the thread is runnable but not running. Its stack ends on that loop's line: read from
# the source (`linecache`), as a line number changes with the version.
WAITING_LINES = frozenset({"work_item = work_queue.get(block=True)", "future, function = tx.get()"})
# py-spy's first line on stdout once attached: "py-spy> Sampling process 250 times a second".
SPY_SAMPLING = b"Sampling process"
SPY_START_S = 30.0


def _frames(stack_text: str) -> list[str]:
    frames = []
    for frame in stack_text.split(";"):
        match = FRAME.match(frame)
        if match is not None:
            frames.append(f"{_short(match['file'])}:{match['func']}")
    return frames


def _component(frames: list[str]) -> str:
    for name, pattern in SCOPES:
        if any(pattern.search(frame) for frame in frames):
            return name
    for frame in reversed(frames):
        for name, pattern in LAYERS_BY_COMPONENT:
            if pattern.search(frame):
                return name
    return OTHER


def _waiting(stack_text: str) -> bool:
    match = FRAME.match(stack_text.rpartition(";")[2])
    if match is None or match["line"] is None:
        return False
    return linecache.getline(match["file"], int(match["line"])).strip() in WAITING_LINES


def components(collapsed: str) -> tuple[int, int, Counter[str]]:
    """Samples of work, samples of waiting threads (`WAITING`), and work per component."""
    shares: Counter[str] = Counter()
    work = waiting = 0
    for line in collapsed.splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        if _waiting(stack_text):
            waiting += int(count_text)
            continue
        frames = _frames(stack_text)
        work += int(count_text)
        shares[_component(frames)] += int(count_text)
    return work, waiting, shares


def components_table(collapsed: str, cpu_ms_per_run: float) -> str:
    """The breakdown by component, as shares and as ms per run (share x CPU per run)."""
    samples, waiting, shares = components(collapsed)
    if not samples:
        return "no samples"
    rows = [
        "### by component (scopes by any frame, then layers by the innermost frame)",
        f"{samples} samples of work; {waiting} samples of idle worker threads left out",
        "",
        "| share | ms/run | component |",
        "|---:|---:|---|",
    ]
    for name in [*(name for name, _ in COMPONENTS), OTHER]:
        share = shares[name] / samples
        rows.append(f"| {share * 100:5.1f}% | {share * cpu_ms_per_run:6.1f} | {name} |")
    return "\n".join([*rows, ""])


@dataclass(frozen=True)
class Options:
    """What `python -m bench.profile` was asked to profile."""

    endpoint: str = "agui"
    clients: int = 10
    seconds: float = 20.0
    latency_ms: float = 0.0
    rate: int = 250
    spy: tuple[str, ...] = ("--nonblocking",)
    thread_messages: int | None = None  # each client on its own thread of this length
    runs: int = 10  # per client, with thread_messages
    postgres: bool = False
    context_tokens: int | None = None  # the server's AGENT_CONTEXT_TOKENS (None: default)
    raw_dir: Path = RAW_DIR


def _spy_argv(pid: int, options: Options, out: Path, seconds: float) -> list[str]:
    return [
        str(VENV_BIN / "py-spy"),
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(int(seconds)),
        "--rate",
        str(options.rate),
        *options.spy,
        "--full-filenames",
        "--format",
        "raw",
        "--output",
        str(out),
    ]


async def _server(shared: Stack, options: Options, admin: str | None) -> Server:
    window = options.context_tokens
    env = {"AGENT_CONTEXT_TOKENS": str(window)} if window else {}
    if not options.postgres:
        server = shared.start_ours(env=env)
    else:
        if admin is None:
            raise SystemExit("--postgres: no PostgreSQL answers (see bench/README.md)")
        shared.pg = await asyncio.to_thread(postgres.create, admin)
        server = shared.start_ours_pg(env)
    await server.wait_healthy(shared.client)
    return server


async def _on_grown_threads(targets: list[HttpTarget], options: Options) -> tuple[int, int]:
    """Each target on a thread of its own, grown to `runs` x 2 messages short of the length.

    The recorded runs then take the threads from that far below the length to as far
    above it. Returns the first and last thread length the recorded runs start at.
    """
    assert options.thread_messages is not None
    before = max(0, options.thread_messages - options.runs * MESSAGES_PER_RUN // 2)
    grown = before // MESSAGES_PER_RUN
    for target in targets:
        on_thread(target)

    async def one(target: HttpTarget) -> None:
        for _ in range(grown):
            sample = await target.run()
            if not sample.ok:
                raise RuntimeError(f"growing the thread failed: {sample.error}")

    await asyncio.gather(*(one(target) for target in targets))
    start = grown * MESSAGES_PER_RUN
    return start, start + (options.runs - 1) * MESSAGES_PER_RUN


async def _recorded_runs(targets: list[HttpTarget], runs: int) -> int:
    async def one(target: HttpTarget) -> int:
        done = 0
        for _ in range(runs):
            done += (await target.run()).ok
        return done

    return sum(await asyncio.gather(*(one(target) for target in targets)))


def _target(endpoint: str, shared: Stack, server: Server) -> HttpTarget:
    if endpoint == "langgraph":  # issue 30: runs/stream, values + messages-tuple + updates
        return LgStream("ours/lg-stream", "ours", shared.answer, shared.client, server)
    if endpoint == "langgraph-wait":  # issue 30: runs/wait
        return LgWait("ours/lg-wait", "ours", shared.answer, shared.client, server)
    kind: type[HttpTarget] = OursAgui if endpoint == "agui" else OursChat
    return kind(shared.answer, shared.client, server)


async def _profile(options: Options) -> str:
    plan = Plan(soak_sessions=0, peer=False)
    admin = None
    if options.postgres:  # read before the stack scrubs AGENT_* from the environment
        admin, _ = await asyncio.to_thread(postgres.admin_url, postgres.configured_url())
    async with stack(plan) as shared:
        latency = options.latency_ms
        await shared.set_latency(latency, plan.token_delay_for(latency))
        server = await _server(shared, options, admin)
        targets = [_target(options.endpoint, shared, server) for _ in range(options.clients)]
        await throughput(targets[0], options.clients, options.clients * 5)  # warm-up
        lengths = None
        if options.thread_messages is not None:
            lengths = await _on_grown_threads(targets, options)
        options.raw_dir.mkdir(parents=True, exist_ok=True)
        out = options.raw_dir / f"profile-{datetime.now():%Y%m%d-%H%M%S}-{options.endpoint}.txt"
        seconds = options.seconds if lengths is None else 3600.0  # stopped by SIGINT
        spy = await asyncio.create_subprocess_exec(
            *_spy_argv(server.process.pid, options, out, seconds),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        said = await _sampling(spy)
        cpu0, db0, started = server.cpu_s(), _db_cpu(server), time.perf_counter()
        if lengths is None:
            runs = 0
            while time.perf_counter() < started + options.seconds:
                batch = await throughput(targets[0], options.clients, options.clients * 4)
                runs += len(batch.tally.samples)
        else:
            runs = await _recorded_runs(targets, options.runs)
            spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        wall = time.perf_counter() - started
        cpu_ms = (server.cpu_s() - cpu0) * 1000 / max(runs, 1)
        db1 = _db_cpu(server)
        db_ms = (db1 - db0) * 1000 / max(runs, 1) if db0 is not None and db1 is not None else None
        rest, err = await spy.communicate()
        if spy.returncode != 0:
            told = (said + rest + err).decode(errors="replace")[-2000:]
            raise RuntimeError(f"py-spy failed: {told}")
        log(f"stacks: {out}")
        collapsed = await asyncio.to_thread(out.read_text)
        return (
            _head(options, runs, wall, cpu_ms, db_ms, lengths)
            + components_table(collapsed, cpu_ms)
            + "\n"
            + summarise(collapsed)
        )


async def _sampling(spy: asyncio.subprocess.Process) -> bytes:
    """What py-spy said until it started sampling (a SIGINT before that would kill it)."""
    assert spy.stdout is not None
    said = b""
    async with asyncio.timeout(SPY_START_S):
        while SPY_SAMPLING not in said:
            line = await spy.stdout.readline()
            if not line:
                break  # it exited: communicate() reports why
            said += line
    return said


def _db_cpu(server: Server) -> float | None:
    return server.db_cpu() if server.db_cpu is not None else None


def _head(
    options: Options,
    runs: int,
    wall: float,
    cpu_ms: float,
    db_ms: float | None,
    lengths: tuple[int, int] | None,
) -> str:
    backend = "PostgreSQL" if options.postgres else "SQLite"
    thread = (
        "a new thread per run"
        if lengths is None
        else f"each client on its own thread, runs starting at {lengths[0]}-{lengths[1]} messages"
    )
    db = f", PostgreSQL backends {db_ms:.1f} ms/run" if db_ms is not None else ""
    return (
        f"## py-spy {' '.join(options.spy)}: ours/{options.endpoint} on {backend}, "
        f"{options.clients} clients, {thread}, {options.latency_ms:g} ms model latency, "
        f"{runs} runs in {wall:.1f} s ({runs / wall:.1f} runs/s), "
        f"server CPU {cpu_ms:.1f} ms/run{db}\n\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.profile`: print the summary (Markdown)."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile")
    endpoints = ["agui", "chat", "langgraph", "langgraph-wait"]
    parser.add_argument("--endpoint", choices=endpoints, default="agui")
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
    parser.add_argument(
        "--thread-messages",
        type=int,
        help="record runs on threads of about this many messages, one per client (issue 26)",
    )
    parser.add_argument(
        "--runs", type=int, default=10, help="recorded runs per client with --thread-messages"
    )
    parser.add_argument(
        "--postgres", action="store_true", help="serve on a fresh PostgreSQL database"
    )
    parser.add_argument(
        "--context-tokens", type=int, help="the server's AGENT_CONTEXT_TOKENS (issue 26)"
    )
    parser.add_argument(
        "--raw-dir", type=Path, default=RAW_DIR, help="where the stacks go (default bench/raw)"
    )
    parser.add_argument(
        "--from-stacks",
        type=Path,
        help="summarise an earlier profile's stacks instead of profiling (see --cpu-ms)",
    )
    parser.add_argument(
        "--cpu-ms", type=float, default=0.0, help="with --from-stacks: its server CPU ms/run"
    )
    args = parser.parse_args(argv)
    if args.from_stacks is not None:
        collapsed = args.from_stacks.read_text()
        sys.stdout.write(components_table(collapsed, args.cpu_ms) + "\n" + summarise(collapsed))
        return 0
    spy = [] if args.blocking else ["--nonblocking"]
    if args.gil:
        spy.append("--gil")
    if not (VENV_BIN / "py-spy").exists():
        sys.stderr.write("py-spy is not installed: run `make install`\n")
        return 2
    options = Options(
        endpoint=args.endpoint,
        clients=args.clients,
        seconds=args.seconds,
        latency_ms=args.latency_ms,
        rate=args.rate,
        spy=tuple(spy),
        thread_messages=args.thread_messages,
        runs=args.runs,
        postgres=args.postgres,
        context_tokens=args.context_tokens,
        raw_dir=args.raw_dir,
    )
    sys.stdout.write(asyncio.run(_profile(options)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
