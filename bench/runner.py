"""One benchmark run, start to finish: processes up, phases in order, everything down.

Order: the baseline exported (`bench.baseline`) and a fresh PostgreSQL database made
(`bench.postgres`) -> cold starts (fresh servers, 0 ms) -> per model latency: warm-up,
interleaved sequential runs, interleaved throughput batches -> the soak (ours, 50 ms)
-> `serve --workers N` against one worker, the floor beside (fresh servers, 50 clients,
50 ms) -> the metrics' cost (per latency, fresh pairs of servers with metrics on and
off) -> RSS growth (a fresh server per family, 0 ms, 50 clients, RSS read between
batches at 100 and 1,000 runs). Every loop is bounded and the whole run is capped by
`Plan.max_minutes`; what was measured until then is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import psycopg
from langgraph.checkpoint.base import BaseCheckpointSaver

from app.core.storage.backends import open_checkpointer
from app.settings import get_settings
from bench import baseline, growth, postgres
from bench.cores import loop_ns, parallel_speedup
from bench.fake_model import answer_text
from bench.graph import make_graph
from bench.measure import Batch, combine, sequential, soak, throughput
from bench.plan import Plan
from bench.procs import ROOT, VENV_BIN, Server, spawn, start_fake_model
from bench.targets import (
    BASE_TARGETS,
    GRAPH_ID,
    FloorInvoke,
    FloorStream,
    HttpTarget,
    ModelOnly,
    OursAgui,
    OursAguiNoMetrics,
    OursChat,
    OursPgAgui,
    PeerStream,
    PeerWait,
    Target,
    WireAgui,
    WireChat,
    on_workers,
)
from graphs.settings import GraphSettings

BENCH_GRAPH_SPEC = f"{GRAPH_ID}=bench.graph"
# The project's own variables: none of a developer's values may reach the servers.
SCRUBBED_PREFIXES = (
    "OPENAI_",
    "AGENT_",
    "TUSHARE_",
    "OPEN_METEO_",
    "LANGSMITH_",
    "LANGCHAIN_",
    "OTEL_",
)
SCRUBBED = {"HOST", "PORT"}
# uvicorn logs it once per worker, once its app has started.
STARTUP_LINE = b"Application startup complete"
WORKERS_START_S = 60.0
WORKERS_LATE = "not all {workers} workers started within a minute; see {log}"
NO_WORKERS = "`react-agent serve` has no `--workers` in this checkout"
VERSIONS = (
    "langgraph",
    "langgraph-api",
    "langgraph-cli",
    "langgraph-runtime-inmem",
    "langchain-core",
    "langchain-openai",
    "openai",
    "fastapi",
    "uvicorn",
    "sse-starlette",
    "httpx",
    "uvloop",
)


def log(message: str, *args: object) -> None:
    """Progress on stderr (the table goes to stdout); `args` are %-formatted in."""
    if args:
        message = message % args
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def machine() -> dict[str, Any]:
    """CPU model, cores, kernel, Python, one core's loop speed and the load when asked."""
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loop_ns": loop_ns(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for name in VERSIONS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def raise_fd_limit() -> None:
    """Up to the hard limit: 500 concurrent sessions need sockets (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def scrubbed_env(model_url: str) -> dict[str, str]:
    """This process's environment without project variables, pointed at the fake model."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in SCRUBBED and not key.startswith(SCRUBBED_PREFIXES)
    }
    env.update(
        OPENAI_BASE_URL=f"{model_url}/v1",
        OPENAI_API_KEY="bench-key",
        OPENAI_MODEL="bench-model",
        OPENAI_MAX_RETRIES="0",  # a failed call is an error to count, not to hide
        OPENAI_TIMEOUT="120",
        # langgraph dev and the floor title no thread: a title call would be ours alone.
        AGENT_THREAD_TITLES="false",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="1",
        LANGSMITH_TRACING="false",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    )
    return env


def _point_this_process_at(env: dict[str, str]) -> None:
    """The in-process floor reads settings from this process's environment: clean it too."""
    for key in [k for k in os.environ if k in SCRUBBED or k.startswith(SCRUBBED_PREFIXES)]:
        del os.environ[key]
    os.environ.update({k: v for k, v in env.items() if k.startswith("OPENAI_")})
    get_settings.cache_clear()


@dataclass
class Stack:
    """What every phase shares: the temp dir, the env, the HTTP client, the fake model."""

    plan: Plan
    tmp: Path
    env: dict[str, str]
    client: httpx.AsyncClient
    model: Server
    answer: str
    logs: Path
    servers: list[Server] = field(default_factory=list)
    serial: int = 0
    base: baseline.Baseline | None = None
    pg: postgres.Database | None = None  # ours-pg's database, when a PostgreSQL answers

    async def set_latency(self, latency_ms: float, token_delay_ms: float) -> None:
        timing = {
            "latency_ms": latency_ms,
            "token_delay_ms": token_delay_ms,
            "tokens": self.plan.tokens,
        }
        response = await self.client.post(f"{self.model.url}/control", json=timing)
        response.raise_for_status()

    def _dir(self, family: str) -> Path:
        self.serial += 1
        path = self.tmp / f"{family}-{self.serial}"
        path.mkdir()
        return path

    def start_ours(
        self, *, metrics: bool = True, workers: int = 1, env: dict[str, str] | None = None
    ) -> Server:
        """`react-agent serve` with the bench graph registered, on a fresh SQLite file.

        `metrics=False`: the same code with `AGENT_METRICS=false` (the metrics' cost).
        `workers` > 1: `serve --workers N`, N processes on one socket and one file.
        `env`: more settings.
        """
        family = "ours" if metrics else "ours-nometrics"
        path = self._dir(family if workers == 1 else f"ours-w{workers}")
        extra = {**(env or {}), "AGENT_DB": str(path / "agent.sqlite")}
        if not metrics:
            extra["AGENT_METRICS"] = "false"
        options = ["--workers", str(workers)] if workers > 1 else []
        return self._serve("ours", path, extra, options)

    def start_ours_pg(self, env: dict[str, str] | None = None) -> Server:
        """`start_ours` on the fresh PostgreSQL database (`self.pg`), its backends' CPU read."""
        assert self.pg is not None
        path = self._dir("ours-pg")
        server = self._serve("ours-pg", path, {**(env or {}), "AGENT_DB": self.pg.url})
        if self.pg.backends is not None:
            server.db_cpu = self.pg.backends.cpu_s
        return server

    def _serve(
        self, name: str, path: Path, extra: dict[str, str], options: list[str] | None = None
    ) -> Server:
        port = free_port()
        env = {**self.env, **extra, "AGENT_EXTRA_GRAPHS": BENCH_GRAPH_SPEC}
        argv = [str(VENV_BIN / "react-agent"), "serve", "--port", str(port), *(options or [])]
        return self._spawn(name, argv, env, path, port, "/healthz")

    async def serve_takes_workers(self) -> bool:
        """Whether this checkout's `react-agent serve` has `--workers` (issue 12)."""
        argv = [str(VENV_BIN / "react-agent"), "serve", "--help"]
        done = await asyncio.to_thread(
            subprocess.run,
            argv,
            env=self.env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return "--workers" in done.stdout

    async def wait_workers(self, server: Server, workers: int) -> None:
        """Healthy, and every worker's app started: the first one answers `/healthz` alone."""
        await server.wait_healthy(self.client)
        deadline = time.perf_counter() + WORKERS_START_S
        while server.log_path.read_bytes().count(STARTUP_LINE) < workers:
            if time.perf_counter() > deadline:
                raise RuntimeError(WORKERS_LATE.format(workers=workers, log=server.log_path))
            await asyncio.sleep(0.05)  # polling interval of the log check
        server.refresh_pids()  # the workers and multiprocessing's tracker, all of the tree

    def start_base(self) -> Server:
        """`start_ours` for the baseline export: this venv's Python, its packages first."""
        assert self.base is not None
        path = self._dir("base")
        port = free_port()
        env = {**self.env, "AGENT_DB": str(path / "agent.sqlite")}
        env["AGENT_EXTRA_GRAPHS"] = BENCH_GRAPH_SPEC
        env["PYTHONPATH"] = baseline.python_path(self.base.src)
        return self._spawn("base", baseline.serve_argv(port), env, path, port, "/healthz")

    async def wait_base(self, server: Server) -> dict[str, str]:
        """Healthy, and every module it imported came from the export: module -> file."""
        assert self.base is not None
        await server.wait_healthy(self.client)
        found = baseline.reported_imports(server.log_path.read_text(errors="replace"))
        baseline.check_imports(found, self.base.src)
        return found

    def start_peer(self) -> Server:
        """`langgraph dev` serving `bench.graph:graph` from a langgraph.json in a temp dir."""
        path = self._dir("peer")
        config = {"dependencies": ["."], "graphs": {GRAPH_ID: "bench.graph:graph"}}
        (path / "langgraph.json").write_text(json.dumps(config))
        port = free_port()
        argv = [
            str(VENV_BIN / "langgraph"),
            "dev",
            "--no-browser",
            "--no-reload",
            "--n-jobs-per-worker",
            "10",
            "--port",
            str(port),
        ]
        return self._spawn("peer", argv, self.env, path, port, "/ok")

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str], cwd: Path, port: int, health: str
    ) -> Server:
        log_path = cwd / "server.log"
        started = time.perf_counter()
        process = spawn(argv, env=env, cwd=cwd, log_path=log_path)
        server = Server(
            name=name,
            url=f"http://127.0.0.1:{port}",
            health_path=health,
            process=process,
            log_path=log_path,
            started_at=started,
        )
        self.servers.append(server)
        return server

    async def stop(self, server: Server) -> None:
        """Stop `server` and keep its log (under the raw dir) for a look afterwards."""
        await server.stop()
        with contextlib.suppress(ValueError):
            self.servers.remove(server)
        self.logs.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            shutil.copy(server.log_path, self.logs / f"{server.log_path.parent.name}.log")


@asynccontextmanager
async def stack(plan: Plan) -> AsyncIterator[Stack]:
    """The fake model and the shared client; every started process stopped at the end."""
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="react-agent-bench-") as tmp_name:
        tmp = Path(tmp_name)
        # Idle connections are dropped before the servers' 5 s keep-alive ends, so a request
        # never races a server closing the connection it reuses.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=1000, keepalive_expiry=2.0
        )
        timeout = httpx.Timeout(plan.run_timeout_s, connect=10.0)
        async with httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as client:
            model = await start_fake_model(dict(os.environ), tmp / "fake-model.log")
            env = scrubbed_env(model.url)
            _point_this_process_at(env)
            logs = plan.raw_dir / f"logs-{datetime.now():%Y%m%d-%H%M%S}"
            shared = Stack(plan, tmp, env, client, model, answer_text(plan.tokens), logs)
            home = Path.cwd()
            os.chdir(tmp)  # a developer's .env in the checkout must not reach the floor
            try:
                await model.wait_healthy(client, timeout_s=20)
                yield shared
            finally:
                os.chdir(home)
                for server in list(shared.servers):
                    await shared.stop(server)
                await model.stop()
                if shared.pg is not None:
                    await _drop_database(shared.pg)


async def _drop_database(database: postgres.Database) -> None:
    """Drop ours-pg's database; a failure is logged, not raised (the figures are kept)."""
    try:
        await asyncio.to_thread(postgres.drop, database)
    except psycopg.Error as exc:
        log("could not drop PostgreSQL database %s: %s", database.name, exc)


async def cold_starts(shared: Stack, results: dict[str, Any]) -> None:
    """Fresh servers, started one after the other (ours, peer, ours, ...), at 0 ms."""
    plan = shared.plan
    await shared.set_latency(0, 0)
    starters: list[tuple[str, Callable[[], Server], type[HttpTarget]]] = [
        ("ours", shared.start_ours, OursAgui)
    ]
    if plan.peer:
        starters.append(("peer", shared.start_peer, PeerStream))
    records: dict[str, list[dict[str, Any]]] = {family: [] for family, _, _ in starters}
    results["cold_start"] = records
    for index in range(plan.cold_starts):
        for family, start, kind in starters:
            server = start()
            try:
                healthy = await server.wait_healthy(shared.client)
                target = kind(shared.answer, shared.client, server)
                sample = await target.run()
            finally:
                await shared.stop(server)
            records[family].append(
                {
                    "healthy_s": round(healthy, 3),
                    "first_run_ms": round(sample.latency_s * 1000, 2),
                    "spawn_to_first_run_s": round(healthy + sample.latency_s, 3),
                    "first_run_ok": sample.ok,
                    "error": sample.error,
                }
            )
            log(
                f"cold start {index + 1}/{plan.cold_starts} {family}: healthy {healthy:.2f} s, "
                f"first run {sample.latency_s * 1000:.0f} ms"
            )


async def run_plan(plan: Plan) -> dict[str, Any]:
    """Run every phase of `plan`; the raw results (partial if the time cap hit)."""
    began = time.perf_counter()
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine(),
            "versions": versions(),
            "plan": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(plan).items()},
        },
        "latencies": {},
    }
    try:
        async with asyncio.timeout(plan.max_minutes * 60):
            await _phases(plan, results)
    except TimeoutError:
        results["meta"]["aborted"] = f"stopped after the {plan.max_minutes} minute cap"
        log(results["meta"]["aborted"])
    except Exception as exc:  # the run's top-level handler: keep what was measured
        results["meta"]["aborted"] = f"failed: {type(exc).__name__}: {exc}"[:2000]
        log(results["meta"]["aborted"])
        traceback.print_exc()
    results["meta"]["duration_s"] = round(time.perf_counter() - began, 1)
    results["meta"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


async def _phases(plan: Plan, results: dict[str, Any]) -> None:
    pg_url = postgres.configured_url()  # the stack scrubs AGENT_* from this environment
    async with stack(plan) as shared:
        log(f"fake model on {shared.model.url}; work dir {shared.tmp}")
        if plan.postgres:
            await _make_database(shared, pg_url, results)
        if not plan.growth_only:
            await _main_phases(shared, results)
            if plan.langgraph:
                await _langgraph_phase(shared, pg_url, results)
        if plan.growth:
            await growth_phase(shared, results)


async def _main_phases(shared: Stack, results: dict[str, Any]) -> None:
    plan = shared.plan
    if plan.base_ref and plan.base_endpoints:
        await _export_base(shared, plan.base_ref, results)
    if plan.cold_starts:
        await cold_starts(shared, results)
    async with open_checkpointer(shared.tmp / "floor.sqlite") as saver:
        graph = make_graph(saver)
        ours = shared.start_ours()
        pg = shared.start_ours_pg() if shared.pg is not None else None
        base = shared.start_base() if shared.base is not None else None
        peer = shared.start_peer() if plan.peer else None
        await ours.wait_healthy(shared.client)
        if pg is not None:
            await pg.wait_healthy(shared.client)
        if base is not None:
            imports = await shared.wait_base(base)
            results["meta"]["base"]["imports"] = imports
            log(f"base server: {len(imports)} modules, all from {shared.tmp / 'base-src'}")
        if peer is not None:
            await peer.wait_healthy(shared.client)
        answer, client = shared.answer, shared.client
        targets: list[Target] = [
            FloorInvoke(answer, graph),
            FloorStream(answer, graph),
            ModelOnly(answer, client, shared.model.url),
        ]
        # Each base target right after its ours twin: their throughput batches follow
        # each other, seconds apart, under the same background load.
        for endpoint, kind in (("agui", OursAgui), ("chat", OursChat)):
            targets.append(kind(answer, client, ours))
            if base is not None and endpoint in plan.base_endpoints:
                targets.append(BASE_TARGETS[endpoint](answer, client, base))
            if endpoint == "agui" and pg is not None:
                targets.append(OursPgAgui(answer, client, pg))
        servers = {"ours": ours}
        if pg is not None:
            servers["ours-pg"] = pg
        if base is not None:
            servers["base"] = base
        if peer is not None:
            targets += [PeerWait(answer, client, peer), PeerStream(answer, client, peer)]
            servers["peer"] = peer
        for latency in plan.latencies_ms:
            await _latency_phase(shared, targets, latency, results)
        if plan.soak_sessions:
            await _soak(shared, ours, results)
        results["rss_main"] = {
            name: {"runs": server.runs, "rss_mib": round(server.rss() / 2**20, 1)}
            for name, server in servers.items()
        }
        for server in servers.values():
            await shared.stop(server)
        if plan.serve_workers > 1:
            await workers_phase(shared, FloorInvoke(answer, graph), results)
    if plan.metrics_pairs > 0:
        await metrics_cost(shared, results)
    results["rss"] = {}
    await _rss_growth(shared, "ours", shared.start_ours, OursAgui, results)
    if plan.peer and plan.peer_rss:
        await _rss_growth(shared, "peer", shared.start_peer, PeerStream, results)


async def _langgraph_phase(shared: Stack, pg_url: str, results: dict[str, Any]) -> None:
    """Issue 30's comparison (`bench.langgraph_cost`) on servers of its own."""
    from bench import langgraph_cost  # it builds on this module: imported once both exist

    plan = shared.plan
    options = langgraph_cost.Options(peer=plan.peer, postgres=plan.postgres)
    log("LangGraph's own API (issue 30): ours, ours-pg, ours-pg-w2, langgraph dev, Aegra")
    results["langgraph"] = await langgraph_cost.phase(
        shared, langgraph_cost.IN_BENCH, options, pg_url
    )


async def _make_database(shared: Stack, configured: str, results: dict[str, Any]) -> None:
    """A fresh database for ours-pg, if a PostgreSQL server answers; else ours-pg is skipped."""
    admin, why = await asyncio.to_thread(postgres.admin_url, configured)
    if admin is None:
        results["meta"]["postgres"] = {"missing": why}
        log("PostgreSQL: %s; ours-pg is not measured", why)
        return
    shared.pg = await asyncio.to_thread(postgres.create, admin)
    results["meta"]["postgres"] = shared.pg.describe()
    backends = "read" if shared.pg.backends is not None else "not visible"
    log(
        "PostgreSQL %s: database %s for ours-pg (backend CPU %s)",
        postgres.shown(admin),
        shared.pg.name,
        backends,
    )


async def _export_base(shared: Stack, ref: str, results: dict[str, Any]) -> None:
    """`git archive <ref>` into the work dir (gone with it): what the base/* targets serve."""
    src = shared.tmp / "base-src"
    shared.base = await asyncio.to_thread(baseline.export, ref, src)
    base = shared.base
    results["meta"]["base"] = {"ref": ref, "commit": base.commit, "subject": base.subject}
    log(f"baseline {ref} = {base.commit[:12]} ({base.subject}) exported to {src}")


async def _latency_phase(
    shared: Stack,
    targets: list[Target],
    latency: float,
    results: dict[str, Any],
) -> None:
    plan = shared.plan
    delay = plan.token_delay_for(latency)
    await shared.set_latency(latency, delay)
    phase: dict[str, Any] = {
        "timing": {"latency_ms": latency, "token_delay_ms": delay, "tokens": plan.tokens}
    }
    results["latencies"][f"{latency:g}"] = phase
    log(f"latency {latency:g} ms (+{delay:g} ms per token): warm-up")
    await sequential(targets, lambda target: plan.warmup_runs)
    log(f"latency {latency:g} ms: sequential")

    def runs_for(target: Target) -> int:
        return plan.peer_seq_runs if target.family == "peer" else plan.seq_runs

    tallies = await sequential(targets, runs_for)
    phase["sequential"] = {name: tally.summary() for name, tally in tallies.items()}
    for name, summary in phase["sequential"].items():
        log(
            f"  {name:18} p50 {summary['p50_ms']} ms p99 {summary['p99_ms']} ms "
            f"ttft {summary['ttft_p50_ms']} cpu {summary['server_cpu_ms_per_run']} ms/run "
            f"errors {summary['errors']}"
        )
    done: dict[tuple[str, int], list[Batch]] = {}
    for round_index in range(plan.throughput_rounds):
        for clients in plan.clients:
            for target in targets:
                runs = plan.batch_for(clients, target.family)
                batch = await throughput(target, clients, runs)
                done.setdefault((target.name, clients), []).append(batch)
                rate = batch.summary()["runs_per_s"]
                log(
                    f"  round {round_index + 1} {target.name:18} {clients:3} clients: "
                    f"{rate} runs/s ({runs} runs, {batch.errors} errors)"
                )
    phase["throughput"] = {
        target.name: {str(c): combine(done[(target.name, c)]) for c in plan.clients}
        for target in targets
    }


async def _rss_growth(
    shared: Stack,
    family: str,
    start: Callable[[], Server],
    kind: type[HttpTarget],
    results: dict[str, Any],
) -> None:
    """A fresh server, 0 ms, `rss_clients` clients: RSS read between batches at each mark."""
    plan = shared.plan
    await shared.set_latency(0, 0)
    server = start()
    readings: dict[str, dict[str, float]] = {}
    results["rss"][family] = readings
    try:
        await server.wait_healthy(shared.client)
        target = kind(shared.answer, shared.client, server)
        errors = 0
        for mark in plan.rss_marks:
            while server.runs < mark:
                batch = await throughput(target, plan.rss_clients, min(100, mark - server.runs))
                errors += batch.errors
            mib = server.rss() / 2**20
            readings[str(mark)] = {"runs": server.runs, "rss_mib": round(mib, 1)}
            log(f"rss {family}: {mib:.1f} MiB after {server.runs} runs ({errors} errors)")
    finally:
        await shared.stop(server)


async def _soak(shared: Stack, ours: Server, results: dict[str, Any]) -> None:
    plan = shared.plan
    await shared.set_latency(plan.soak_latency_ms, plan.token_delay_for(plan.soak_latency_ms))
    log(f"soak: {plan.soak_sessions} concurrent SSE sessions at {plan.soak_latency_ms:g} ms")
    cpu0 = ours.cpu_s()
    outcome = await soak(
        shared.client,
        f"{ours.url}/api/agents/{GRAPH_ID}",
        shared.answer,
        plan.soak_sessions,
        plan.run_timeout_s,
    )
    ours.runs += plan.soak_sessions
    outcome["server_cpu_ms_per_run"] = round((ours.cpu_s() - cpu0) * 1000 / plan.soak_sessions, 2)
    outcome["rss_after_mib"] = round(ours.rss() / 2**20, 1)
    outcome["latency_ms"] = plan.soak_latency_ms
    results["soak"] = outcome
    log(
        f"  soak: {outcome['errors']} errors, p50 {outcome['p50_ms']} ms, "
        f"p99 {outcome['p99_ms']} ms, {outcome['wall_s']} s"
    )


async def metrics_cost(shared: Stack, results: dict[str, Any]) -> None:
    """Issue 15: per latency, `metrics_pairs` fresh pairs of servers, metrics on and off.

    One pair of processes differs from another by about +-1.5% in CPU per run (memory
    layout, hash seeds, start order) even on the same code: as much as the 3% measured,
    so the figure is the median over fresh pairs, each started in turn on-first and
    off-first.
    """
    plan = shared.plan
    phase: dict[str, Any] = {
        "pairs": plan.metrics_pairs,
        "runs": plan.metrics_runs,
        "warmup_runs": plan.warmup_runs,
        "latencies": {},
    }
    results["metrics_cost"] = phase
    for latency in plan.latencies_ms:
        delay = plan.token_delay_for(latency)
        await shared.set_latency(latency, delay)
        pairs: list[dict[str, Any]] = []
        phase["latencies"][f"{latency:g}"] = {
            "timing": {"latency_ms": latency, "token_delay_ms": delay, "tokens": plan.tokens},
            "pairs": pairs,
        }
        for index in range(plan.metrics_pairs):
            pair = await _metrics_pair(shared, on_first=index % 2 == 0)
            pairs.append(pair)
            log(
                "metrics pair %d/%d at %g ms (%s first): CPU/run median on %s / off %s ms = %s",
                index + 1,
                plan.metrics_pairs,
                latency,
                pair["first"],
                pair["on"]["server_cpu_ms_median"],
                pair["off"]["server_cpu_ms_median"],
                pair["ratio"],
            )


async def _metrics_pair(shared: Stack, *, on_first: bool) -> dict[str, Any]:
    """Start a metrics-on and a metrics-off server in that order, measure both, stop both."""
    plan = shared.plan
    started: dict[bool, Server] = {}
    try:
        for metrics in (True, False) if on_first else (False, True):
            # One at a time: two imports racing for the cores would make the starts unalike.
            server = shared.start_ours(metrics=metrics)
            started[metrics] = server
            await server.wait_healthy(shared.client)
        on = OursAgui(shared.answer, shared.client, started[True])
        off = OursAguiNoMetrics(shared.answer, shared.client, started[False])
        await sequential([on, off], lambda target: plan.warmup_runs)
        tallies = await sequential([on, off], lambda target: plan.metrics_runs)
    finally:
        for server in started.values():
            await shared.stop(server)
    on_row, off_row = tallies[on.name].summary(), tallies[off.name].summary()
    on_cpu, off_cpu = on_row["server_cpu_ms_median"], off_row["server_cpu_ms_median"]
    ratio = round(on_cpu / off_cpu, 4) if on_cpu is not None and off_cpu else None
    return {"first": "on" if on_first else "off", "on": on_row, "off": off_row, "ratio": ratio}


async def workers_phase(shared: Stack, floor: Target, results: dict[str, Any]) -> None:
    """Issue 12: fresh `serve --workers 1` and `--workers N`, the floor beside, throughput.

    Interleaved batches of `workers_batch_runs` runs by `workers_clients` clients at
    `workers_latency_ms`, the order rotated every round; the median round counts.
    """
    plan = shared.plan
    phase: dict[str, Any] = {
        "workers": plan.serve_workers,
        "clients": plan.workers_clients,
        "latency_ms": plan.workers_latency_ms,
        "batch_runs": plan.workers_batch_runs,
    }
    results["workers"] = phase
    if not await shared.serve_takes_workers():
        phase["missing"] = NO_WORKERS
        log("%s: the workers comparison is skipped", NO_WORKERS)
        return
    await shared.set_latency(plan.workers_latency_ms, plan.token_delay_for(plan.workers_latency_ms))
    started: list[Server] = []
    try:
        targets: list[Target] = [floor]
        for workers in (1, plan.serve_workers):
            server = shared.start_ours(workers=workers)
            started.append(server)
            await shared.wait_workers(server, workers)
            # A connection per run (`bench.wire`): kept-alive connections are split among
            # the workers once, however unevenly, and stay so; a new one goes to whichever
            # worker accepts it first, the less busy one. And a lean client: the servers
            # use every core here, so the load generator's CPU is taken from them.
            targets.append(on_workers(WireAgui(shared.answer, server), workers))
            # Plain JSON too: its client costs a third of an SSE reader's.
            targets.append(on_workers(WireChat(shared.answer, server), workers))
        phase["machine_speedup"] = round(
            await asyncio.to_thread(parallel_speedup, plan.serve_workers), 3
        )
        log(
            "workers: 1 vs %d, %d clients; pure CPU scales %.2fx on %d processes here",
            plan.serve_workers,
            plan.workers_clients,
            phase["machine_speedup"],
            plan.serve_workers,
        )
        await _workers_rounds(shared, targets, phase)
        phase["servers"] = {
            target.name: {
                "processes": len(target.server.pids),
                "rss_mib": round(target.server.rss() / 2**20, 1),
            }
            for target in targets
            if target.server is not None
        }
    finally:
        for server in started:
            await shared.stop(server)


async def _workers_rounds(shared: Stack, targets: list[Target], phase: dict[str, Any]) -> None:
    plan = shared.plan
    clients = plan.workers_clients
    runs = max(plan.workers_batch_runs, clients)
    # Warm-up: a batch reaches every worker, where one-at-a-time runs may reach one.
    for target in targets:
        await throughput(target, clients, clients)
    done: dict[str, list[Batch]] = {target.name: [] for target in targets}
    # The fake model shares the cores too: its CPU per run bounds what the servers get.
    model_s = dict.fromkeys(done, 0.0)
    for round_index in range(plan.throughput_rounds):
        shift = round_index % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            before = shared.model.cpu_s()
            batch = await throughput(target, clients, runs)
            model_s[target.name] += shared.model.cpu_s() - before
            done[target.name].append(batch)
            log(
                "  workers round %d %-14s %s runs/s (%d runs, %d errors)",
                round_index + 1,
                target.name,
                batch.summary()["runs_per_s"],
                runs,
                batch.errors,
            )
        # After every round: a run cut short by the time cap keeps what it measured.
        phase["throughput"] = {
            name: {
                **combine(batches),
                "model_cpu_ms_per_run": round(model_s[name] * 1000 / (len(batches) * runs), 2),
            }
            for name, batches in done.items()
            if batches
        }


async def growth_phase(shared: Stack, results: dict[str, Any]) -> None:
    """Issue 26: fresh servers, one thread per target grown run after run (`bench.growth`).

    The floor (in-process, its own SQLite file), ours/agui and ours/chat on one SQLite
    server, ours-pg/agui on PostgreSQL when one answers: warmed up on throwaway threads,
    then `growth.runs_needed` interleaved runs each on its own thread.
    """
    plan = shared.plan
    delay = plan.token_delay_for(plan.growth_latency_ms)
    await shared.set_latency(plan.growth_latency_ms, delay)
    runs = growth.runs_needed(plan.growth_marks, plan.growth_window)
    phase: dict[str, Any] = {
        "timing": {"latency_ms": plan.growth_latency_ms, "token_delay_ms": delay},
        "marks": list(plan.growth_marks),
        "window": plan.growth_window,
        "runs_per_thread": runs,
        "context_tokens": plan.growth_context_tokens,
        "messages_per_run": growth.MESSAGES_PER_RUN,
    }
    results["growth"] = phase
    started: list[Server] = []
    try:
        async with open_checkpointer(shared.tmp / "growth-floor.sqlite") as saver:
            targets = await _growth_targets(shared, saver, started)
            await sequential(targets, lambda target: plan.warmup_runs)
            for target in targets:
                growth.on_thread(target)
            log(
                "growth: %d runs on one thread per target (%s), to %d messages",
                runs,
                ", ".join(target.name for target in targets),
                runs * growth.MESSAGES_PER_RUN,
            )

            def progress(done: int, records: dict[str, list[growth.RunRecord]]) -> None:
                phase["runs"] = records  # a run cut short by the time cap keeps these
                if done % 25 == 0 or done == runs:
                    last = ", ".join(
                        f"{name} {rows[-1]['server_cpu_ms']} ms" for name, rows in records.items()
                    )
                    log(
                        "  growth run %d/%d (%d messages before): cpu %s",
                        done,
                        runs,
                        (done - 1) * growth.MESSAGES_PER_RUN,
                        last,
                    )

            records = await growth.grow(targets, runs, progress)
            phase["summary"] = growth.summarise(records, plan.growth_marks, plan.growth_window)
            phase["final_messages"] = {
                target.name: await growth.thread_length(target) for target in targets
            }
    finally:
        for server in started:
            await shared.stop(server)


async def _growth_targets(
    shared: Stack, saver: BaseCheckpointSaver, started: list[Server]
) -> list[Target]:
    """The growth targets on fresh servers (appended to `started` as they start)."""
    plan, answer, client = shared.plan, shared.answer, shared.client
    window = plan.growth_context_tokens
    env = {"AGENT_CONTEXT_TOKENS": str(window)} if window else {}
    ours = shared.start_ours(env=env)
    started.append(ours)
    pg = shared.start_ours_pg(env) if shared.pg is not None else None
    if pg is not None:
        started.append(pg)
    for server in started:
        await server.wait_healthy(client)
    floor = make_graph(saver, GraphSettings(agent_context_tokens=window))
    targets: list[Target] = [FloorInvoke(answer, floor)]
    targets.append(OursAgui(answer, client, ours))
    if pg is not None:
        targets.append(OursPgAgui(answer, client, pg))
    if "chat" in plan.growth_endpoints:
        targets.append(OursChat(answer, client, ours))
    return targets
