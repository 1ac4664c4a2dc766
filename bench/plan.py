"""How much to measure: the full plan, the quick one, and overrides from the command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench.baseline import BASELINE_REF
from bench.procs import ROOT

RESULTS_MD = ROOT / "bench" / "RESULTS.md"
RAW_DIR = ROOT / "bench" / "raw"
BASE_ENDPOINTS = ("agui", "chat")
GROWTH_ENDPOINTS = ("agui", "chat")


@dataclass(frozen=True)
class Plan:
    """Every count and switch of one benchmark run."""

    mode: str = "full"
    latencies_ms: tuple[float, ...] = (0.0, 50.0)
    token_delay_ms: float = 5.0  # between streamed chunks, whenever latency > 0
    tokens: int = 20
    warmup_runs: int = 3
    seq_runs: int = 100
    peer_seq_runs: int = 30
    clients: tuple[int, ...] = (1, 10, 50)
    batch_runs: tuple[int, ...] = (15, 60, 100)  # runs per throughput batch, per client count
    peer_batch_runs: tuple[int, ...] = (6, 30, 60)
    throughput_rounds: int = 3  # interleaved rounds; the median rate counts
    cold_starts: int = 3
    rss_marks: tuple[int, int] = (100, 1000)
    rss_clients: int = 50
    peer_rss: bool = True
    soak_sessions: int = 500
    soak_latency_ms: float = 50.0
    peer: bool = True
    # The metrics' cost (issue 15): per latency, this many fresh pairs of servers (metrics
    # on, metrics off), each measured over this many sequential runs per server.
    metrics_pairs: int = 6  # the median of 4 pairs still swung by 1.5% between full runs
    metrics_runs: int = 120
    # `ours-pg` (issue 12): one replica on PostgreSQL beside ours, when a server answers.
    postgres: bool = True
    # Issue 12: `serve --workers N` against `--workers 1` (fresh servers, the floor beside),
    # throughput batches of this many runs (`throughput_rounds` rounds). N < 2: skipped.
    serve_workers: int = 2
    workers_clients: int = 50
    workers_latency_ms: float = 50.0
    workers_batch_runs: int = 200
    # The baseline (issue 11): `react-agent serve` from this git ref beside ours (None: off),
    # measured through these endpoints (base/agui, base/chat).
    base_ref: str | None = BASELINE_REF
    base_endpoints: tuple[str, ...] = BASE_ENDPOINTS
    # Issue 26: one thread per target grown run after run (4 messages each), server CPU
    # and p50 read at these thread lengths (messages), each over `growth_window` runs.
    growth: bool = True
    growth_only: bool = False  # `--growth`: this phase alone
    growth_marks: tuple[int, ...] = (10, 100, 400, 800)
    growth_window: int = 10
    growth_latency_ms: float = 0.0
    growth_endpoints: tuple[str, ...] = GROWTH_ENDPOINTS
    # The growth servers' AGENT_CONTEXT_TOKENS: a window the thread outgrows, so that what
    # a run costs is read once the working state is the window's (None: the default 32,768,
    # which the bench's 800 short messages fit whole).
    growth_context_tokens: int | None = 4096
    # Issue 30: LangGraph's own API (ours on SQLite and PostgreSQL) beside our AG-UI path,
    # langgraph dev and Aegra, on servers of its own after the main phases, with the counts
    # of `bench.langgraph_cost.IN_BENCH` (about 7 minutes; quick runs leave it out).
    langgraph: bool = True
    run_timeout_s: float = 120.0
    max_minutes: float = 60.0  # a full run takes about 35 minutes on 2 cores
    raw_dir: Path = RAW_DIR
    results_md: Path | None = RESULTS_MD

    def token_delay_for(self, latency_ms: float) -> float:
        """The delay between streamed tokens at a given model latency (0 at 0 ms)."""
        return self.token_delay_ms if latency_ms > 0 else 0.0

    def batch_for(self, clients: int, family: str) -> int:
        """Runs in one throughput batch (at least one per client)."""
        sizes = self.peer_batch_runs if family == "peer" else self.batch_runs
        index = self.clients.index(clients)
        size = sizes[index] if index < len(sizes) else sizes[-1]
        return max(size, clients)


QUICK = Plan(
    mode="quick",
    warmup_runs=2,
    seq_runs=30,
    peer_seq_runs=8,
    batch_runs=(8, 30, 60),
    peer_batch_runs=(3, 12, 50),
    throughput_rounds=1,
    cold_starts=1,
    peer_rss=False,
    metrics_pairs=2,
    metrics_runs=60,
    workers_batch_runs=100,
    base_endpoints=("agui",),
    growth_marks=(10, 100, 200),
    growth_window=4,
    growth_endpoints=("agui",),
    langgraph=False,
    results_md=None,
)


def growth_alone(plan: Plan) -> Plan:
    """`plan` reduced to its thread-growth phase (`--growth`): no other phase, no baseline."""
    return replace(plan, mode="growth", growth=True, growth_only=True, results_md=None)


def _numbers(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(",") if part.strip())


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def _endpoints(text: str, known: tuple[str, ...] = BASE_ENDPOINTS) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = set(names) - set(known)
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {','.join(known)}")
    return names


def _growth_endpoints(text: str) -> tuple[str, ...]:
    return _endpoints(text, GROWTH_ENDPOINTS)


def _marks(text: str) -> tuple[int, ...]:
    marks = _ints(text)
    if not marks or any(mark < 1 for mark in marks) or list(marks) != sorted(set(marks)):
        raise argparse.ArgumentTypeError("give increasing message counts, e.g. 10,100,400,800")
    return marks


def parser() -> argparse.ArgumentParser:
    """The `python -m bench` options (each overrides the chosen preset)."""
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Side-by-side benchmark: in-process floor, react-agent serve, langgraph dev, "
        "and react-agent serve from a baseline git ref.",
    )
    p.add_argument("--quick", action="store_true", help="fewer runs (about 8 minutes on 2 cores)")
    p.add_argument(
        "--growth",
        action="store_true",
        help="only the thread-growth phase (issue 26; about 8 minutes on 2 cores)",
    )
    p.add_argument("--no-growth", action="store_true", help="skip the thread-growth phase")
    p.add_argument(
        "--growth-marks",
        type=_marks,
        help="thread lengths (messages) to read the growth at, e.g. 10,100,400,800",
    )
    p.add_argument("--growth-window", type=int, help="runs per growth mark and target")
    p.add_argument("--growth-latency", type=float, help="model latency (ms) in the growth phase")
    p.add_argument(
        "--growth-context",
        type=int,
        help="the growth servers' AGENT_CONTEXT_TOKENS (0: the default window)",
    )
    p.add_argument(
        "--growth-endpoints",
        type=_growth_endpoints,
        help="ours' endpoints grown: agui,chat (full) or agui (quick)",
    )
    p.add_argument("--latencies", type=_numbers, help="model latencies in ms, e.g. 0,50")
    p.add_argument("--token-delay", type=float, help="ms between streamed tokens (latency > 0)")
    p.add_argument("--seq-runs", type=int, help="sequential runs per target and latency")
    p.add_argument("--peer-seq-runs", type=int, help="sequential runs per langgraph dev target")
    p.add_argument("--warmup", type=int, help="unrecorded runs per target before each latency")
    p.add_argument("--clients", type=_ints, help="concurrent clients, e.g. 1,10,50")
    p.add_argument("--batch-runs", type=_ints, help="runs per throughput batch, per client count")
    p.add_argument("--peer-batch-runs", type=_ints, help="the same for langgraph dev")
    p.add_argument("--rounds", type=int, help="throughput rounds (median rate counts)")
    p.add_argument("--cold-starts", type=int, help="fresh starts per server (0: skip)")
    p.add_argument("--rss-marks", type=_ints, help="run counts to read RSS at, e.g. 100,1000")
    p.add_argument("--rss-clients", type=int, help="clients in the RSS growth phase")
    p.add_argument("--soak-sessions", type=int, help="concurrent SSE sessions (0: no soak)")
    p.add_argument("--no-peer", action="store_true", help="skip langgraph dev")
    p.add_argument(
        "--no-langgraph",
        action="store_true",
        help="skip the LangGraph API phase (issue 30; python -m bench.langgraph_cost alone)",
    )
    p.add_argument(
        "--metrics-pairs",
        type=int,
        help="fresh metrics on/off server pairs per latency (issue 15; 0: skip)",
    )
    p.add_argument("--metrics-runs", type=int, help="sequential runs per server of each pair")
    p.add_argument(
        "--no-postgres", action="store_true", help="skip the replica on PostgreSQL (ours-pg)"
    )
    p.add_argument(
        "--serve-workers",
        type=int,
        help="compare `react-agent serve --workers N` with 1 worker (default 2; 0: skip)",
    )
    p.add_argument("--workers-clients", type=int, help="clients in the workers comparison")
    p.add_argument("--workers-runs", type=int, help="runs per batch in the workers comparison")
    p.add_argument(
        "--workers-latency", type=float, help="model latency (ms) in the workers comparison"
    )
    p.add_argument(
        "--base",
        metavar="REF",
        help=f"git ref the base/* targets serve (default {BASELINE_REF[:12]}, before issue 11)",
    )
    p.add_argument("--no-base", action="store_true", help="skip the baseline server")
    p.add_argument(
        "--base-endpoints",
        type=_endpoints,
        help="base targets to measure: agui,chat (full) or agui (quick)",
    )
    p.add_argument("--max-minutes", type=float, help="stop everything after this long")
    p.add_argument("--raw-dir", type=Path, help="where the raw JSON goes (default bench/raw)")
    p.add_argument(
        "--from-raw",
        type=Path,
        help="render the report of an earlier run's raw JSON instead of running",
    )
    p.add_argument(
        "--results",
        type=Path,
        help="Markdown report to write (default: bench/RESULTS.md for a full run, none else)",
    )
    return p


def plan_from_args(argv: Sequence[str] | None) -> Plan:
    """The plan the command line asks for."""
    args = parser().parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.growth and args.no_growth:
        raise SystemExit("--growth and --no-growth exclude each other")
    if args.growth:
        plan = growth_alone(plan)
    overrides: dict[str, object] = {}
    simple = {
        "latencies": "latencies_ms",
        "token_delay": "token_delay_ms",
        "seq_runs": "seq_runs",
        "peer_seq_runs": "peer_seq_runs",
        "warmup": "warmup_runs",
        "clients": "clients",
        "batch_runs": "batch_runs",
        "peer_batch_runs": "peer_batch_runs",
        "rounds": "throughput_rounds",
        "cold_starts": "cold_starts",
        "soak_sessions": "soak_sessions",
        "rss_clients": "rss_clients",
        "metrics_pairs": "metrics_pairs",
        "metrics_runs": "metrics_runs",
        "serve_workers": "serve_workers",
        "workers_clients": "workers_clients",
        "workers_runs": "workers_batch_runs",
        "workers_latency": "workers_latency_ms",
        "base": "base_ref",
        "base_endpoints": "base_endpoints",
        "growth_marks": "growth_marks",
        "growth_window": "growth_window",
        "growth_latency": "growth_latency_ms",
        "growth_endpoints": "growth_endpoints",
        "max_minutes": "max_minutes",
        "raw_dir": "raw_dir",
        "results": "results_md",
    }
    for arg, name in simple.items():
        value = getattr(args, arg)
        if value is not None:
            overrides[name] = value
    if args.growth_context is not None:
        overrides["growth_context_tokens"] = args.growth_context or None
    if args.rss_marks is not None:
        if len(args.rss_marks) != 2:
            raise SystemExit("--rss-marks takes two counts, e.g. 100,1000")
        overrides["rss_marks"] = (args.rss_marks[0], args.rss_marks[1])
    if args.no_peer:
        overrides["peer"] = False
    if args.no_postgres:
        overrides["postgres"] = False
    if args.no_base:
        overrides["base_ref"] = None
    if args.no_growth:
        overrides["growth"] = False
    if args.no_langgraph:
        overrides["langgraph"] = False
    if args.growth_window is not None and args.growth_window < 1:
        raise SystemExit("--growth-window takes at least 1 run")
    # Which commit the baseline is does not change what is measured (it is in the report).
    measured = set(overrides) - {"raw_dir", "results_md", "max_minutes", "base_ref"}
    if args.no_base:
        measured.add("base_ref")
    if args.no_growth:
        measured.add("growth")
    if args.no_langgraph:
        measured.add("langgraph")
    if measured and plan.mode == "full":
        overrides["mode"] = "custom"
        if args.results is None:
            overrides["results_md"] = None  # RESULTS.md holds full runs only
    return replace(plan, **overrides)  # type: ignore[arg-type]
