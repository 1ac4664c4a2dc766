"""LangGraph's own API served by us, beside our AG-UI path, `langgraph dev` and Aegra (issue 30).

    python -m bench.langgraph_cost [--latencies 300,0] [--quick] [--no-aegra] [--no-peer]
                                   [--workers 2]

One run of the benchmark (`bench/graph.py`, the fake model: a tool call, then a 20-token
answer) through each target, the targets interleaved as in `python -m bench` (the same
phase code: `bench.runner._latency_phase`), at each model latency: a warm-up, sequential
runs (p50, time to the first text token, server CPU per run read from /proc once the
server is idle, its PostgreSQL backends' CPU beside it), then throughput batches at 10 and
50 clients (runs/s, the median round).

Targets, a new thread per run:

- `ours/agui`, `ours/lg-wait`, `ours/lg-stream`: one `react-agent serve` on SQLite.
  `lg-wait` is `POST /threads/{id}/runs/wait`, `lg-stream` `POST /threads/{id}/runs/stream`
  with `stream_mode` values, messages-tuple and updates (what langgraph-sdk's flow and
  LangGraph's React hook ask for), read to `end`.
- `ours-pg/*`: the same against a `react-agent serve` on a fresh PostgreSQL database.
- `ours-pg-w2/lg-wait`, `ours-pg-w2/lg-stream`: `react-agent serve --workers 2` (`--workers`)
  on a fresh database of its own: one process of Python uses one core at most, and runs
  on PostgreSQL scale out over processes. Aegra's in-process mode (the issue's) is one
  process by design (a run's events meet its streams in that process's memory), so the
  like-for-like figure is `ours-pg`; this one is what the same cores give ours.
- `peer/lg-wait`, `peer/lg-stream`: `langgraph dev` (in-memory runtime, its queue).
- `aegra/lg-wait`, `aegra/lg-stream`: Aegra (PyPI `aegra-api`) on a fresh database of the
  same PostgreSQL, run from its own venv (`--aegra-venv`, default `.venv-aegra`, which is
  git-ignored). Its code is never part of this repository; `make aegra` makes the venv
  (aegra-api 0.11 needs Python 3.12; pins in `bench/aegra-constraints.txt`).
  Aegra runs with its defaults but `LOG_LEVEL=WARNING` (no log line per request, as ours).

The main figure is at a realistic model latency (300 ms before the first chunk of each
call, 5 ms per further chunk: 300 + 5 + 300 + 19 x 5 = 700 ms of model time per run);
0 ms shows the servers' own cost alone. Output: the Markdown tables on stdout, the raw
JSON in `bench/raw/<stamp>-langgraph.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psycopg

from bench import postgres
from bench.plan import RAW_DIR, Plan
from bench.procs import ROOT, Server
from bench.runner import (
    Stack,
    _latency_phase,
    free_port,
    log,
    machine,
    stack,
    versions,
)
from bench.targets import (
    BAD_STATUS,
    GRAPH_ID,
    STREAM_ERROR,
    HttpTarget,
    Malformed,
    OursAgui,
    OursPgAgui,
    PeerWait,
    Target,
    run_body,
)

AEGRA_VENV = ROOT / ".venv-aegra"
NO_AEGRA = "no Aegra venv at {venv}: `make aegra` makes one (it needs Python 3.12)"
# What langgraph-sdk's flow (tests/langgraph_api) and LangGraph's React hook stream.
STREAM_MODES = ["values", "messages-tuple", "updates"]

PLAN = Plan(
    mode="langgraph",
    latencies_ms=(300.0, 0.0),
    warmup_runs=3,
    seq_runs=20,
    peer_seq_runs=10,  # every langgraph dev run waits in its queue's ~1 s poll
    clients=(10, 50),
    # 80 runs among 50 clients measured the batch's ramp as much as the server (50 runs
    # start together, the last 30 end alone): 300 hold all 50 busy for most of it.
    batch_runs=(60, 300),
    peer_batch_runs=(15, 40),
    # One round of batches swung by 2x between targets on this shared machine: the
    # median of three is the figure.
    throughput_rounds=3,
    results_md=None,
)
QUICK = replace(
    PLAN, warmup_runs=2, seq_runs=8, peer_seq_runs=4, batch_runs=(30, 80), throughput_rounds=1
)
# Inside `python -m bench` (full runs): about 7 minutes more, one throughput round (noisy;
# `python -m bench.langgraph_cost` alone for the three-round figure).
IN_BENCH = replace(PLAN, seq_runs=12, peer_seq_runs=6, throughput_rounds=1)


class LgWait(PeerWait):
    """`POST /threads/{id}/runs/wait` on a new thread, as for `langgraph dev`, named for
    the server it measures."""

    def __init__(self, name: str, family: str, *args: Any) -> None:
        super().__init__(*args)
        self.name, self.family = name, family


class LgStream(HttpTarget):
    """`POST /threads/{id}/runs/stream` on a new thread, read to the end; tokens checked."""

    streams = True
    modes: list[str] = STREAM_MODES  # an experiment may ask for fewer

    def __init__(self, name: str, family: str, *args: Any) -> None:
        super().__init__(*args)
        self.name, self.family = name, family

    async def _run(self, started: float) -> float | None:
        url = f"{self.base}/threads/{uuid.uuid4()}/runs/stream"
        ttft: float | None = None
        text: list[str] = []
        event = ""
        events: list[str] = []
        async with self.client.stream("POST", url, json=run_body(stream_mode=self.modes)) as r:
            if r.status_code != 200:
                detail = (await r.aread())[:200].decode(errors="replace")
                raise Malformed(BAD_STATUS.format(status=r.status_code, body=detail))
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                    events.append(event)
                elif line.startswith("data:"):
                    if event == "error":
                        raise Malformed(STREAM_ERROR.format(detail=line[5:200]))
                    if event == "messages":  # messages-tuple: [chunk, metadata]
                        message = orjson.loads(line[5:])[0]
                        content = message.get("content")
                        if message.get("type") == "AIMessageChunk" and isinstance(content, str):
                            if content and ttft is None:
                                ttft = time.perf_counter() - started
                            text.append(content)
        expected = {"messages" if mode == "messages-tuple" else mode for mode in self.modes}
        if not expected <= set(events):
            raise Malformed(f"stream modes missing: got {sorted(set(events))}")
        self._check("".join(text))
        return ttft


def _lg_targets(shared: Stack, family: str, server: Server) -> list[Target]:
    args = (shared.answer, shared.client, server)
    return [
        LgWait(f"{family}/lg-wait", family, *args),
        LgStream(f"{family}/lg-stream", family, *args),
    ]


def start_aegra(shared: Stack, venv: Path, database: postgres.Database) -> Server:
    """Aegra's uvicorn app serving `bench/graph.py:graph` on `database`."""
    path = shared._dir("aegra")
    config = {"graphs": {GRAPH_ID: f"{ROOT / 'bench' / 'graph.py'}:graph"}}
    (path / "aegra.json").write_text(json.dumps(config))
    port = free_port()
    env = {
        **shared.env,
        "DATABASE_URL": database.url,
        "AEGRA_CONFIG": str(path / "aegra.json"),
        "LOG_LEVEL": "WARNING",
    }
    argv = [str(venv / "bin" / "uvicorn"), "aegra_api.main:app", "--host", "127.0.0.1"]
    server = shared._spawn("aegra", [*argv, "--port", str(port)], env, path, port, "/health")
    if database.backends is not None:
        server.db_cpu = database.backends.cpu_s
    return server


@dataclass(frozen=True)
class Options:
    """Which servers take part, and where Aegra's venv is."""

    peer: bool = True
    postgres: bool = True
    aegra: bool = True
    aegra_venv: Path = AEGRA_VENV
    # `ours-pg-w<N>`: `serve --workers N` on PostgreSQL beside one process (0: none).
    workers: int = 2


async def _servers(
    shared: Stack, options: Options, pg_url: str, meta: dict[str, Any]
) -> tuple[list[Target], list[Server], list[postgres.Database]]:
    """Every server started and healthy; their targets in the order they take turns.

    Each PostgreSQL server gets a fresh database of its own (not `shared.pg`, which the
    main phases of `python -m bench` have filled).
    """
    client, answer = shared.client, shared.answer
    servers: list[Server] = []
    databases: list[postgres.Database] = []
    targets: list[Target] = []
    ours = shared.start_ours()
    servers.append(ours)
    await ours.wait_healthy(client)
    targets += [OursAgui(answer, client, ours), *_lg_targets(shared, "ours", ours)]
    admin: str | None = None
    if options.postgres:
        admin, why = await asyncio.to_thread(postgres.admin_url, pg_url)
        meta["postgres"] = {"missing": why} if admin is None else {"server": postgres.shown(admin)}
    if admin is not None:
        database = await asyncio.to_thread(postgres.create, admin)
        databases.append(database)
        ours_pg = shared._serve("ours-pg", shared._dir("ours-pg"), {"AGENT_DB": database.url})
        if database.backends is not None:
            ours_pg.db_cpu = database.backends.cpu_s
        servers.append(ours_pg)
        await ours_pg.wait_healthy(client)
        targets += [OursPgAgui(answer, client, ours_pg), *_lg_targets(shared, "ours-pg", ours_pg)]
        if options.workers > 1:  # what one process cannot: the other cores
            database = await asyncio.to_thread(postgres.create, admin)
            databases.append(database)
            family = f"ours-pg-w{options.workers}"
            scaled = shared._serve(
                family,
                shared._dir(family),
                {"AGENT_DB": database.url},
                ["--workers", str(options.workers)],
            )
            if database.backends is not None:
                scaled.db_cpu = database.backends.cpu_s
            servers.append(scaled)
            await scaled.wait_healthy(client)
            await shared.wait_workers(scaled, options.workers)
            targets += _lg_targets(shared, family, scaled)
    if options.peer:
        peer = shared.start_peer()
        servers.append(peer)
        await peer.wait_healthy(client, timeout_s=120)
        targets += _lg_targets(shared, "peer", peer)
    venv = options.aegra_venv
    if not options.aegra:
        meta["aegra"] = {"missing": "--no-aegra"}
    elif admin is None:
        meta["aegra"] = {"missing": "no PostgreSQL (Aegra needs one)"}
    elif not (venv / "bin" / "uvicorn").exists():
        meta["aegra"] = {"missing": NO_AEGRA.format(venv=venv)}
    else:
        database = await asyncio.to_thread(postgres.create, admin)
        databases.append(database)
        aegra = start_aegra(shared, venv, database)
        servers.append(aegra)
        await aegra.wait_healthy(client, timeout_s=120)
        meta["aegra"] = {"version": _aegra_version(venv), **database.describe()}
        targets += _lg_targets(shared, "aegra", aegra)
    if "missing" in meta["aegra"]:
        log("Aegra not measured: %s", meta["aegra"]["missing"])
    return targets, servers, databases


def _aegra_version(venv: Path) -> str:
    found = sorted(venv.glob("lib/python*/site-packages/aegra_api-*.dist-info"))
    return found[-1].name.removeprefix("aegra_api-").removesuffix(".dist-info") if found else "?"


async def phase(shared: Stack, counts: Plan, options: Options, pg_url: str) -> dict[str, Any]:
    """The comparison on `shared`'s fake model and client, with `counts`' latencies and
    counts; every server it started stopped and its databases dropped at the end.
    Returns `{"meta": {...}, "latencies": {<ms>: <as python -m bench's>}}`."""
    results: dict[str, Any] = {
        "meta": {
            "stream_modes": STREAM_MODES,
            "loadavg_start": [round(x, 2) for x in os.getloadavg()],
            "counts": {k: v for k, v in asdict(counts).items() if not isinstance(v, Path)},
        },
        "latencies": {},
    }
    began = time.perf_counter()
    main_plan = shared.plan
    servers: list[Server] = []
    databases: list[postgres.Database] = []
    shared.plan = counts  # `_latency_phase` reads its counts from the stack's plan
    try:
        targets, servers, databases = await _servers(shared, options, pg_url, results["meta"])
        for latency in counts.latencies_ms:
            await _latency_phase(shared, targets, latency, results)
    finally:
        shared.plan = main_plan
        for server in servers:
            await shared.stop(server)
        for database in databases:
            try:
                await asyncio.to_thread(postgres.drop, database)
            except psycopg.Error as exc:
                log("could not drop PostgreSQL database %s: %s", database.name, exc)
        results["meta"]["duration_s"] = round(time.perf_counter() - began, 1)
        results["meta"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return results


async def measure(plan: Plan, options: Options) -> dict[str, Any]:
    """`python -m bench.langgraph_cost`: the phase on a stack of its own."""
    pg_url = postgres.configured_url()  # read before the stack scrubs the environment
    began = datetime.now(UTC).isoformat(timespec="seconds")
    async with stack(plan) as shared:
        results = await phase(shared, plan, options, pg_url)
    results["meta"].update(date=began, machine=machine(), versions=versions())
    return results


# The report ---------------------------------------------------------------------------


def _fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.1f}{unit}"


def _cpu(summary: dict[str, Any]) -> str:
    server = summary.get("server_cpu_ms_median")
    db = summary.get("db_cpu_ms_median")
    if server is None:
        return "-"
    return f"{server:.1f}" if db is None else f"{server:.1f} + db {db:.1f} = {server + db:.1f}"


def _cpu_total(summary: dict[str, Any]) -> float | None:
    server = summary.get("server_cpu_ms_median")
    return None if server is None else server + (summary.get("db_cpu_ms_median") or 0.0)


def render(results: dict[str, Any]) -> str:
    """The Markdown tables of a run: every target, then the issue's ratios."""
    meta = results["meta"]
    lines = []
    if "machine" in meta:
        m = meta["machine"]
        lines.append(
            f"- date: {meta['date']}; {m['cpu']}, {m['cores']} cores, one core's loop "
            f"{m.get('loop_ns')} ns (`bench/cores.py`)"
        )
    lines.append(
        f"- duration {meta.get('duration_s')} s; load average at start "
        f"{meta.get('loadavg_start')}, at end {meta.get('loadavg_end')}"
    )
    aegra = meta.get("aegra", {})
    if "missing" in aegra:
        lines.append(f"- Aegra not measured: {aegra['missing']}")
    else:
        lines.append(
            f"- Aegra: aegra-api {aegra.get('version')} on PostgreSQL "
            f"{aegra.get('server_version')} (synchronous_commit {aegra.get('synchronous_commit')})"
            ", `LOG_LEVEL=WARNING`, its other settings default"
        )
    lines += [f"- stream modes of `lg-stream`: {', '.join(meta['stream_modes'])}", ""]
    for key, phase in results["latencies"].items():
        timing = phase["timing"]
        seq, thr = phase["sequential"], phase["throughput"]
        clients = sorted({int(c) for rows in thr.values() for c in rows})
        lines += [
            f"**Model latency {key} ms** (+{timing['token_delay_ms']:g} ms per further chunk)",
            "",
            "| target | p50 | p99 | first token p50 | server CPU per run (+ PostgreSQL) | "
            + " | ".join(f"runs/s at {c}" for c in clients)
            + " | errors |",
            "|---|---:|---:|---:|---:|" + "---:|" * len(clients) + "---:|",
        ]
        for name, s in seq.items():
            rates = [thr[name].get(str(c), {}).get("runs_per_s") for c in clients]
            errors = s["errors"] + sum(thr[name].get(str(c), {}).get("errors", 0) for c in clients)
            lines.append(
                f"| {name} | {_fmt(s['p50_ms'])} | {_fmt(s['p99_ms'])} | "
                f"{_fmt(s['ttft_p50_ms'])} | {_cpu(s)} | "
                + " | ".join(_fmt(rate) for rate in rates)
                + f" | {errors} |"
            )
        lines += ["", *_ratios(seq, thr, clients), ""]
        lines += _budget(thr, clients[-1] if clients else None, meta.get("machine", {}))
    return "\n".join(lines) + "\n"


def _budget(thr: dict[str, Any], c: int | None, machine: dict[str, Any]) -> list[str]:
    """What 2x Aegra's runs/s at `c` clients leaves for our server, on this machine.

    The load generator and the fake model share the cores with the server: at a rate R
    the whole machine can spend at most cores / R per run, and what the rest costs a run
    (the machine's CPU less the server's and its database's, measured in the same batch)
    is not the server's to spend.
    """
    cores = machine.get("cores") or os.cpu_count() or 1
    rows = []
    families = sorted({n.split("/")[0] for n in thr if n.startswith("ours-pg")})
    for family, kind in itertools.product(families, ("lg-wait", "lg-stream")):
        ours, aegra = thr.get(f"{family}/{kind}", {}), thr.get(f"aegra/{kind}", {})
        batch, peer = ours.get(str(c), {}), aegra.get(str(c), {})
        machine_ms, rate = batch.get("machine_cpu_ms_per_run"), peer.get("runs_per_s")
        server_ms = (batch.get("server_cpu_ms_per_run") or 0.0) + (
            batch.get("db_cpu_ms_per_run") or 0.0
        )
        if machine_ms is None or not rate or not server_ms:
            continue
        goal = 2 * rate
        allowed = cores * 1000 / goal
        rest = machine_ms - server_ms
        rows.append(
            f"| {family}/{kind} | {rate:.1f} -> {goal:.1f} | {allowed:.1f} | {rest:.1f} | "
            f"{allowed - rest:.1f} | {server_ms:.1f} |"
        )
    if not rows:
        return []
    return [
        f"The CPU budget of 2x Aegra's runs/s at {c} clients on {cores} cores (ms per run; "
        "the rest = every process on the machine but the server and its database: load "
        "generator, fake model, the OS, measured in the same batches):",
        "",
        "| target | Aegra's runs/s -> 2x | the machine's CPU per run at 2x | the rest costs "
        "| left for server + db | ours (server + db) |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
    ]


def _row(what: str, a: float | None, b: float | None, unit: str, limit: str = "") -> str:
    """One comparison `a / b` with its limit (`<= 1.10`, `>= 2`) and verdict, if it has one."""
    ratio = None if a is None or b is None or b == 0 else a / b
    verdict = ""
    if limit and ratio is not None:
        bound = float(limit.split()[1])
        met = ratio <= bound if limit.startswith("<=") else ratio >= bound
        verdict = "met" if met else "**not met**"
    shown = "-" if ratio is None else f"{ratio:.2f}x"
    target = f"{limit}x" if limit else ""
    return f"| {what} | {_fmt(a)} / {_fmt(b)}{unit} | {shown} | {target} | {verdict} |"


def _ratios(seq: dict[str, Any], thr: dict[str, Any], clients: list[int]) -> list[str]:
    rows = ["| comparison | figure | ratio | target | verdict |", "|---|---|---:|---|---|"]

    def get(name: str, key: str) -> float | None:
        value = seq.get(name, {}).get(key)
        return None if value is None else float(value)

    def rate(name: str, c: int) -> float | None:
        value = thr.get(name, {}).get(str(c), {}).get("runs_per_s")
        return None if value is None else float(value)

    # Issue 30: the LangGraph path within 1.10x of the AG-UI path of the same server.
    for family in ("ours", "ours-pg"):
        agui = f"{family}/agui"
        if agui not in seq:
            continue
        for kind in ("lg-wait", "lg-stream"):
            lg = f"{family}/{kind}"
            rows.append(
                _row(
                    f"{lg} vs {agui}: p50", get(lg, "p50_ms"), get(agui, "p50_ms"), " ms", "<= 1.10"
                )
            )
            if kind == "lg-stream":
                rows.append(
                    _row(
                        f"{lg} vs {agui}: first token",
                        get(lg, "ttft_p50_ms"),
                        get(agui, "ttft_p50_ms"),
                        " ms",
                        "<= 1.10",
                    )
                )
            rows.append(
                _row(
                    f"{lg} vs {agui}: CPU per run",
                    _cpu_total(seq[lg]),
                    _cpu_total(seq[agui]),
                    " ms",
                    "<= 1.10",
                )
            )
            for c in clients:
                rows.append(
                    _row(f"runs/s at {c}: {agui} / {lg}", rate(agui, c), rate(lg, c), "", "<= 1.10")
                )
    # Against Aegra (p50 no higher, at least 2x its runs/s) and langgraph dev (no target).
    scaled = sorted({n.split("/")[0] for n in seq if n.startswith("ours-pg-w")})
    pairs = [("ours-pg", "aegra"), *((family, "aegra") for family in scaled), ("ours", "peer")]
    for ours, peer in pairs:
        for kind in ("lg-wait", "lg-stream"):
            a, b = f"{ours}/{kind}", f"{peer}/{kind}"
            if a not in seq or b not in seq:
                continue
            goal = peer == "aegra"
            rows.append(
                _row(
                    f"{a} vs {b}: p50",
                    get(a, "p50_ms"),
                    get(b, "p50_ms"),
                    " ms",
                    "<= 1" if goal else "",
                )
            )
            if kind == "lg-stream":
                rows.append(
                    _row(
                        f"{a} vs {b}: first token",
                        get(a, "ttft_p50_ms"),
                        get(b, "ttft_p50_ms"),
                        " ms",
                    )
                )
            rows.append(
                _row(f"{a} vs {b}: CPU per run", _cpu_total(seq[a]), _cpu_total(seq[b]), " ms")
            )
            for c in clients:
                rows.append(
                    _row(
                        f"runs/s at {c}: {a} / {b}",
                        rate(a, c),
                        rate(b, c),
                        "",
                        ">= 2" if goal else "",
                    )
                )
    return rows


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.langgraph_cost", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer runs (about 4 minutes)")
    p.add_argument("--latencies", help="model latencies in ms (default 300,0)")
    p.add_argument("--seq-runs", type=int, help="sequential runs per target and latency")
    p.add_argument("--rounds", type=int, help="throughput rounds (median rate counts)")
    p.add_argument("--warmup", type=int, help="unrecorded runs per target before each latency")
    p.add_argument("--clients", help="two client counts, e.g. 10,50")
    p.add_argument("--batch-runs", help="runs per throughput batch per client count, e.g. 30,80")
    p.add_argument("--raw-dir", type=Path, default=RAW_DIR, help="where the raw JSON goes")
    p.add_argument("--no-peer", action="store_true", help="skip langgraph dev")
    p.add_argument("--no-aegra", action="store_true", help="skip Aegra")
    p.add_argument("--no-postgres", action="store_true", help="skip ours-pg (and Aegra)")
    p.add_argument("--aegra-venv", type=Path, default=AEGRA_VENV, help="Aegra's venv")
    p.add_argument(
        "--workers", type=int, default=2, help="ours-pg-wN: serve --workers N too (0: none)"
    )
    p.add_argument("--from-raw", type=Path, help="render an earlier run's raw JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.from_raw is not None:
        sys.stdout.write(render(json.loads(args.from_raw.read_text())))
        return 0
    plan = QUICK if args.quick else PLAN
    if args.latencies:
        plan = replace(plan, latencies_ms=tuple(float(x) for x in args.latencies.split(",")))
    if args.seq_runs:
        plan = replace(plan, seq_runs=args.seq_runs)
    if args.rounds:
        plan = replace(plan, throughput_rounds=args.rounds)
    if args.warmup is not None:
        plan = replace(plan, warmup_runs=args.warmup)
    if args.clients:
        plan = replace(plan, clients=tuple(int(x) for x in args.clients.split(",")))
    if args.batch_runs:
        runs = tuple(int(x) for x in args.batch_runs.split(","))
        plan = replace(plan, batch_runs=runs, peer_batch_runs=runs)
    options = Options(
        workers=args.workers,
        peer=not args.no_peer,
        postgres=not args.no_postgres,
        aegra=not args.no_aegra,
        aegra_venv=args.aegra_venv,
    )
    try:
        import uvloop
    except ImportError:
        results = asyncio.run(measure(plan, options))
    else:
        results = uvloop.run(measure(plan, options))
    args.raw_dir.mkdir(parents=True, exist_ok=True)
    raw = args.raw_dir / f"{datetime.now():%Y%m%d-%H%M%S}-langgraph.json"
    raw.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    sys.stdout.write(render(results))
    log(f"raw results: {raw}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
