"""The raw results as Markdown: the issues' targets (met / not met), then every figure."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

FLOOR = "floor/ainvoke"
FLOOR_STREAM = "floor/astream"
OURS = "ours/agui"
OURS_CHAT = "ours/chat"
PEER_STREAM = "peer/stream"
PEER_WAIT = "peer/wait"
BASE = "base/agui"
OURS_PG = "ours-pg/agui"
UNMEASURED = "ours/agui-nometrics"  # in the main phase of raw files before the pairs
BUDGET_LIMIT = 1.10  # issue 11: the AG-UI figures stay within 1.10x of the baseline's
METRICS_LIMIT = 1.03  # issue 15: metrics on cost at most 3% more server CPU per run than off
PG_LIMIT = 1.30  # issue 12: a replica on PostgreSQL within 1.3x of one on SQLite
WORKERS_LIMIT = 1.6  # issue 12: `serve --workers 2` at least 1.6x the runs/s of one worker


@dataclass(frozen=True)
class Verdict:
    """One target of issue 7 against what was measured."""

    target: str
    measured: str
    ratio: str
    limit: str
    met: bool | None  # None: not measured in this run

    @property
    def word(self) -> str:
        return "not measured" if self.met is None else ("met" if self.met else "**not met**")


def _get(data: dict[str, Any], *path: str) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _seq(results: dict[str, Any], latency: str, target: str, field: str) -> float | None:
    value = _get(results, "latencies", latency, "sequential", target, field)
    return float(value) if isinstance(value, int | float) else None


def _rate(results: dict[str, Any], latency: str, target: str, clients: str) -> float | None:
    value = _get(results, "latencies", latency, "throughput", target, clients, "runs_per_s")
    return float(value) if isinstance(value, int | float) else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _row(row: BudgetRow, limit: float) -> str:
    """A `| figure | ours | base | ratio | limit | verdict |` line of a budget-style table."""
    ratio = "-" if row.ratio is None else f"{row.ratio:.3f}x"
    return (
        f"| {row.figure} | {_fmt(row.ours)} | {_fmt(row.base)} | {ratio} "
        f"| <= {limit:.2f}x | {row.word} |"
    )


def _ratio_check(
    name: str,
    ours: float | None,
    base: float | None,
    limit: float,
    *,
    at_most: bool,
    unit: str,
    labels: tuple[str, str],
) -> Verdict:
    bound = f"{'<=' if at_most else '>='} {limit:g}x"
    if ours is None or base is None or base == 0:
        return Verdict(name, "-", "-", bound, None)
    ratio = ours / base
    met = ratio <= limit if at_most else ratio >= limit
    measured = f"{labels[0]} {ours:.1f} {unit} / {labels[1]} {base:.1f} {unit}"
    return Verdict(name, measured, f"{ratio:.2f}x", bound, met)


def verdicts(results: dict[str, Any]) -> list[Verdict]:
    """Every target of issue 7, measured against this run's figures."""
    out: list[Verdict] = []
    for latency, limit in (("0", 1.5), ("50", 1.05)):
        for ours in (OURS, OURS_CHAT):
            out.append(
                _ratio_check(
                    f"latency p50 at {latency} ms: {ours} vs floor",
                    _seq(results, latency, ours, "p50_ms"),
                    _seq(results, latency, FLOOR, "p50_ms"),
                    limit,
                    at_most=True,
                    unit="ms",
                    labels=(ours, "floor"),
                )
            )
    for ours in (OURS, OURS_CHAT):
        out.append(
            _ratio_check(
                f"server CPU per run (0 ms): {ours} vs floor",
                _seq(results, "0", ours, "server_cpu_ms_per_run"),
                _seq(results, "0", FLOOR, "server_cpu_ms_per_run"),
                1.5,
                at_most=True,
                unit="ms",
                labels=(ours, "floor"),
            )
        )
    for ours, peer in ((OURS, PEER_STREAM), (OURS_CHAT, PEER_WAIT)):
        out.append(
            _ratio_check(
                f"throughput, 10 clients at 50 ms: {ours} vs floor",
                _rate(results, "50", ours, "10"),
                _rate(results, "50", FLOOR, "10"),
                0.85,
                at_most=False,
                unit="runs/s",
                labels=(ours, "floor"),
            )
        )
        out.append(
            _ratio_check(
                f"throughput, 10 clients at 50 ms: {ours} vs {peer}",
                _rate(results, "50", ours, "10"),
                _rate(results, "50", peer, "10"),
                3.0,
                at_most=False,
                unit="runs/s",
                labels=(ours, peer),
            )
        )
    for latency in ("0", "50"):
        out.append(_first_token(results, latency))
    out.extend(_cold(results))
    out.append(_rss(results))
    out.append(_soak(results))
    return out


def _first_token(results: dict[str, Any], latency: str) -> Verdict:
    name = f"first text token p50 at {latency} ms: {OURS} vs floor (astream)"
    ours = _seq(results, latency, OURS, "ttft_p50_ms")
    floor = _seq(results, latency, FLOOR_STREAM, "ttft_p50_ms")
    if ours is None or floor is None:
        return Verdict(name, "-", "-", "<= floor + 5 ms", None)
    measured = f"{ours:.1f} ms / floor {floor:.1f} ms"
    return Verdict(name, measured, f"+{ours - floor:.1f} ms", "<= +5 ms", ours - floor <= 5.0)


def _median(records: list[dict[str, Any]], field: str) -> float | None:
    values = [float(r[field]) for r in records if isinstance(r.get(field), int | float)]
    return statistics.median(values) if values else None


def _cold(results: dict[str, Any]) -> list[Verdict]:
    records = _get(results, "cold_start", "ours") or []
    healthy = _median(records, "healthy_s")
    first = _median(records, "first_run_ms")
    warm = _seq(results, "0", OURS, "p50_ms")
    out = [
        Verdict(
            "cold start to a healthy /healthz (ours, median)",
            "-" if healthy is None else f"{healthy:.2f} s",
            "-",
            "<= 1.0 s",
            None if healthy is None else healthy <= 1.0,
        )
    ]
    if first is None or warm is None or warm == 0:
        out.append(Verdict("first run after start vs a warm run (ours)", "-", "-", "<= 2x", None))
    else:
        out.append(
            Verdict(
                "first run after start vs a warm run (ours, 0 ms)",
                f"{first:.1f} ms / warm p50 {warm:.1f} ms",
                f"{first / warm:.2f}x",
                "<= 2x",
                first / warm <= 2.0,
            )
        )
    return out


def _rss(results: dict[str, Any]) -> Verdict:
    readings = _get(results, "rss", "ours") or {}
    marks = sorted(readings, key=int)
    name = "RSS growth from 100 to 1,000 runs (ours)"
    if len(marks) < 2:
        return Verdict(name, "-", "-", "<= 5 MiB", None)
    low, high = readings[marks[0]], readings[marks[-1]]
    growth = high["rss_mib"] - low["rss_mib"]
    measured = (
        f"{low['rss_mib']:.1f} MiB at {low['runs']} runs -> "
        f"{high['rss_mib']:.1f} MiB at {high['runs']} runs"
    )
    return Verdict(name, measured, f"{growth:+.1f} MiB", "<= 5 MiB", growth <= 5.0)


def _soak(results: dict[str, Any]) -> Verdict:
    soak = results.get("soak")
    name = "concurrent SSE sessions at 50 ms (ours): errors, complete and well-formed"
    if not soak:
        return Verdict(name, "-", "-", "0 errors", None)
    measured = (
        f"{soak['complete_and_well_formed']}/{soak['sessions']} complete, "
        f"p99 {_fmt(soak['p99_ms'], 0)} ms"
    )
    met = soak["errors"] == 0 and soak["complete_and_well_formed"] == soak["sessions"]
    return Verdict(name, measured, f"{soak['errors']} errors", "0 errors", met)


@dataclass(frozen=True)
class BudgetRow:
    """One figure of a budget (issue 11's by default): ours against another, in one run."""

    figure: str
    ours: float | None
    base: float | None
    higher_is_worse: bool  # time and CPU; runs/s is the other way round
    limit: float = BUDGET_LIMIT

    @property
    def ratio(self) -> float | None:
        """How many times worse ours is: ours / base, or base / ours for a rate."""
        if self.ours is None or self.base is None:
            return None
        worse, better = (self.ours, self.base) if self.higher_is_worse else (self.base, self.ours)
        return worse / better if better else None

    @property
    def met(self) -> bool | None:
        ratio = self.ratio
        return None if ratio is None else ratio <= self.limit

    @property
    def word(self) -> str:
        return "not measured" if self.met is None else ("met" if self.met else "**not met**")


def budget(results: dict[str, Any]) -> list[BudgetRow]:
    """Issue 11's three AG-UI figures, ours against the baseline served in the same run."""
    return [
        BudgetRow(
            "p50 ms at 0 ms (ours / base)",
            _seq(results, "0", OURS, "p50_ms"),
            _seq(results, "0", BASE, "p50_ms"),
            higher_is_worse=True,
        ),
        BudgetRow(
            "server CPU ms/run at 0 ms (ours / base)",
            _seq(results, "0", OURS, "server_cpu_ms_per_run"),
            _seq(results, "0", BASE, "server_cpu_ms_per_run"),
            higher_is_worse=True,
        ),
        BudgetRow(
            "runs/s, 10 clients at 50 ms (base / ours)",
            _rate(results, "50", OURS, "10"),
            _rate(results, "50", BASE, "10"),
            higher_is_worse=False,
        ),
    ]


def _budget_table(results: dict[str, Any]) -> list[str]:
    base = _get(results, "meta", "base")
    if isinstance(base, dict) and base.get("commit"):
        served = (
            f"`base/*` is `react-agent serve` at {str(base['commit'])[:12]} "
            f"({base.get('subject', '')}; `--base {base.get('ref', '')}`), exported with "
            "`git archive` and served by the same venv beside ours, measured the same way."
        )
    else:
        served = "No baseline was served in this run (`--no-base`, or an older raw file)."
    lines = [
        "## Run log budget (issue 11): ours vs base",
        "",
        served + " The ratio is how many times worse ours is: ours / base for time and CPU, "
        "base / ours for runs/s.",
        "",
        "| figure | ours/agui | base/agui | ratio | limit | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    lines += [_row(row, BUDGET_LIMIT) for row in budget(results)]
    rounds = {
        name: _get(results, "latencies", "50", "throughput", name, "10", "runs_per_s_rounds")
        for name in (OURS, BASE)
    }
    if all(isinstance(r, list) and r for r in rounds.values()):
        spread = "; ".join(f"{name} {', '.join(f'{x:g}' for x in r)}" for name, r in rounds.items())
        lines += ["", f"runs/s per round, 10 clients at 50 ms (the median counts): {spread}."]
        if min(len(r) for r in rounds.values()) < 3:
            lines.append(
                "A single throughput round swings by tens of percent on a shared machine, "
                "even between two copies of the same code: the runs/s verdict needs a full "
                "run (3 rounds) or `--rounds 3` or more."
            )
    return [*lines, "", *CRASH_LOSS]


# What the run log's batching means for a crash (issue 11 asks the report to say it).
CRASH_LOSS = [
    "What a crash can lose from a run's event log: the events produced since the log "
    "writer's last transaction (streamed text is written within 4 ms, other events within "
    "25 ms). "
    "No client has seen those: events are sent only once written, so ids stay unique and "
    "a rejoin never misses one it was shown. Never a checkpoint: checkpoints are the "
    "graph's own writes, and a resumed run starts from the last one, closing in the log "
    "whatever the lost events left open.",
]


# The metrics' cost is a few percent of a run: the median of per-run CPU, which a load
# spike of the shared machine during some runs does not move as it moves the mean.
METRICS_FIELD = "server_cpu_ms_median"
METRICS_LATENCIES = ("0", "50")
# Why fresh pairs (issue 15): four repeats of one pair of the same code.
PAIR_SPREAD = "1.015x, 1.028x, 1.036x, 1.046x"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def metrics_pairs(results: dict[str, Any], latency: str) -> list[dict[str, Any]]:
    """The metrics on/off pairs measured at `latency`: `{"first", "on", "off"}` each.

    A raw file from before the pairs phase has one pair: `ours/agui` and
    `ours/agui-nometrics` of its main phase (`first` is then "-").
    """
    pairs = _get(results, "metrics_cost", "latencies", latency, "pairs")
    if isinstance(pairs, list):
        return pairs
    on = _get(results, "latencies", latency, "sequential", OURS)
    off = _get(results, "latencies", latency, "sequential", UNMEASURED)
    if isinstance(on, dict) and isinstance(off, dict):
        return [{"first": "-", "on": on, "off": off}]
    return []


def pair_ratio(pair: dict[str, Any], field: str = METRICS_FIELD) -> float | None:
    """One pair's CPU per run with metrics on / off (`field`: the median or the mean)."""
    on, off = _number(pair["on"].get(field)), _number(pair["off"].get(field))
    return None if on is None or not off else on / off


@dataclass(frozen=True)
class MetricsRow:
    """Issue 15 at one latency: the median over pairs of on, off and the pair ratios."""

    latency: str
    pairs: int
    on: float | None
    off: float | None
    ratio: float | None

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None else self.ratio <= METRICS_LIMIT

    @property
    def word(self) -> str:
        return "not measured" if self.met is None else ("met" if self.met else "**not met**")


def _median_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def metrics_cost(results: dict[str, Any]) -> list[MetricsRow]:
    """Issue 15 at 0 and 50 ms: the figure is the median of the pairs' ratios."""
    rows = []
    for latency in METRICS_LATENCIES:
        pairs = metrics_pairs(results, latency)
        rows.append(
            MetricsRow(
                latency,
                len(pairs),
                _median_of([_number(p["on"].get(METRICS_FIELD)) for p in pairs]),
                _median_of([_number(p["off"].get(METRICS_FIELD)) for p in pairs]),
                _median_of([pair_ratio(p) for p in pairs]),
            )
        )
    return rows


def _metrics_intro(results: dict[str, Any]) -> str:
    phase = results.get("metrics_cost")
    why = (
        "Why pairs: two processes of the same code differ by about +-1.5% in CPU per run "
        "(memory layout, hash seeds, start order; four repeats of one pair gave "
        f"{PAIR_SPREAD}), as much as the 3% being measured."
    )
    if not isinstance(phase, dict) and _get(results, "meta", "plan", "metrics_pairs") == 0:
        return "Not measured in this run (`--metrics-pairs 0`). " + why
    if not isinstance(phase, dict):
        return (
            "An older raw file: one pair of servers, `ours/agui` and `ours/agui-nometrics` "
            "of the main phase, so the ratio is one pair's. " + why
        )
    return (
        f"Per model latency, {phase['pairs']} fresh pairs of `react-agent serve` of this "
        "checkout: one with the metrics on (the default), one with `AGENT_METRICS=false`, "
        "started one after the other (which one first alternates from pair to pair), "
        f"warmed up ({phase['warmup_runs']} runs each), then {phase['runs']} sequential runs "
        "each, interleaved, and stopped. A pair's ratio is its median server CPU per run "
        "with metrics on / off (a burst of other work on the shared machine during a few "
        "runs moves a mean by more than 3%); the figure is the median of the pairs' ratios, "
        "and on / off the medians of the pairs' medians. " + why
    )


def _metrics_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "## Metrics cost (issue 15): metrics on vs off, fresh server pairs",
        "",
        _metrics_intro(results),
        "",
        "| figure | pairs | on | off | ratio | limit | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in metrics_cost(results):
        ratio = "-" if row.ratio is None else f"{row.ratio:.3f}x"
        lines.append(
            f"| server CPU ms/run at {row.latency} ms, median (on / off) | {row.pairs} "
            f"| {_fmt(row.on)} | {_fmt(row.off)} | {ratio} | <= {METRICS_LIMIT:.2f}x "
            f"| {row.word} |"
        )
    if not _metrics_latencies(results):
        return lines
    return [*lines, "", *_metrics_pairs_table(results)]


def _metrics_latencies(results: dict[str, Any]) -> list[str]:
    measured = _get(results, "metrics_cost", "latencies")
    if isinstance(measured, dict):
        return list(measured)
    return [latency for latency in METRICS_LATENCIES if metrics_pairs(results, latency)]


def _metrics_pairs_table(results: dict[str, Any]) -> list[str]:
    """Every pair's medians, means and ratios; then the means over all pairs."""
    lines = [
        "| latency | pair | first | on median | off median | ratio | on mean | off mean "
        "| ratio of means | errors |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    means = []
    for latency in _metrics_latencies(results):
        pairs = metrics_pairs(results, latency)
        for index, pair in enumerate(pairs, 1):
            on, off = pair["on"], pair["off"]
            errors = int(on.get("errors") or 0) + int(off.get("errors") or 0)
            lines.append(
                f"| {latency} ms | {index} | {pair.get('first', '-')} "
                f"| {_fmt(_number(on.get(METRICS_FIELD)), 2)} "
                f"| {_fmt(_number(off.get(METRICS_FIELD)), 2)} "
                f"| {_fmt(pair_ratio(pair), 3)} "
                f"| {_fmt(_number(on.get('server_cpu_ms_per_run')), 2)} "
                f"| {_fmt(_number(off.get('server_cpu_ms_per_run')), 2)} "
                f"| {_fmt(pair_ratio(pair, 'server_cpu_ms_per_run'), 3)} | {errors} |"
            )
        on_mean = _mean([_number(p["on"].get("server_cpu_ms_per_run")) for p in pairs])
        off_mean = _mean([_number(p["off"].get("server_cpu_ms_per_run")) for p in pairs])
        if on_mean is not None and off_mean:
            means.append(
                f"{latency} ms: {on_mean:.2f} / {off_mean:.2f} ms ({on_mean / off_mean:.3f}x)"
            )
    if means:
        lines += ["", f"Means of per-run CPU over all pairs, on / off: {'; '.join(means)}."]
    return lines


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _pg_total(results: dict[str, Any], latency: str) -> float | None:
    """ours-pg's CPU per run with its PostgreSQL backends' added (None: not read)."""
    replica = _seq(results, latency, OURS_PG, "server_cpu_ms_per_run")
    backends = _seq(results, latency, OURS_PG, "db_cpu_ms_per_run")
    return None if replica is None or backends is None else replica + backends


def postgres_rows(results: dict[str, Any]) -> list[BudgetRow]:
    """Issue 12: ours-pg/agui against ours/agui (SQLite) at 0 ms, pg / sqlite."""
    sqlite_cpu = _seq(results, "0", OURS, "server_cpu_ms_per_run")
    return [
        BudgetRow(
            "p50 ms at 0 ms (pg / sqlite)",
            _seq(results, "0", OURS_PG, "p50_ms"),
            _seq(results, "0", OURS, "p50_ms"),
            higher_is_worse=True,
            limit=PG_LIMIT,
        ),
        BudgetRow(
            "server CPU ms/run at 0 ms, the replica (pg / sqlite)",
            _seq(results, "0", OURS_PG, "server_cpu_ms_per_run"),
            sqlite_cpu,
            higher_is_worse=True,
            limit=PG_LIMIT,
        ),
        BudgetRow(
            "server CPU ms/run at 0 ms, replica + its PostgreSQL backends (pg / sqlite)",
            _pg_total(results, "0"),
            sqlite_cpu,
            higher_is_worse=True,
            limit=PG_LIMIT,
        ),
    ]


def _postgres_missing(results: dict[str, Any]) -> str | None:
    """Why ours-pg was not measured in this run, or None if it was."""
    info = _get(results, "meta", "postgres")
    if isinstance(info, dict) and info.get("missing"):
        return str(info["missing"])
    if _get(results, "meta", "plan", "postgres") is False:
        return "`--no-postgres`"
    if not isinstance(info, dict):
        return "no PostgreSQL replica in this run"
    return None


def _postgres_table(results: dict[str, Any]) -> list[str]:
    lines = ["## PostgreSQL vs SQLite (issue 12): ours-pg/agui vs ours/agui", ""]
    missing = _postgres_missing(results)
    if missing is not None:
        return [*lines, f"not measured ({missing})"]
    info = _get(results, "meta", "postgres") or {}
    settings = ", ".join(
        f"{name} {info[name]}" for name in ("synchronous_commit", "fsync") if info.get(name)
    )
    backends = (
        "their CPU per run (PostgreSQL backends serving its database, read from /proc) is "
        "added on the last row"
        if info.get("backend_cpu")
        else "this server's processes are not visible here, so only the replica's is given"
    )
    lines += [
        f"`ours-pg` is `react-agent serve` started like ours but with `AGENT_DB` on a fresh "
        f"database (`{info.get('database')}` on {info.get('server')}, PostgreSQL "
        f"{info.get('server_version', '?')}{'; ' + settings if settings else ''}), measured "
        "in the same phases, interleaved. Server CPU is the replica's process tree; the "
        "PostgreSQL server's own work runs in other processes: "
        f"{backends} (its shared writers, WAL and checkpointer, are counted nowhere).",
        "",
        "| figure | ours-pg/agui | ours/agui | ratio | limit | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    lines += [_row(row, row.limit) for row in postgres_rows(results)]
    backends_ms = _seq(results, "0", OURS_PG, "db_cpu_ms_per_run")
    if backends_ms is not None:
        lines += ["", f"PostgreSQL backends' CPU per run at 0 ms: {backends_ms:.1f} ms."]
    return lines


def _workers_table(results: dict[str, Any]) -> list[str]:
    """Issue 12: `serve --workers N` against one worker, the floor beside, runs/s."""
    phase = results.get("workers")
    lines = ["## Worker processes (issue 12): serve --workers N vs --workers 1", ""]
    if not isinstance(phase, dict):
        return [*lines, "not measured (not in this run)"]
    if phase.get("missing"):
        return [*lines, f"not measured ({phase['missing']})"]
    workers, clients = phase["workers"], phase["clients"]
    rates = phase.get("throughput") or {}
    cores = _get(results, "meta", "machine", "cores")
    lines += [
        f"Fresh `react-agent serve --workers 1` and `--workers {workers}` (SQLite, one file), "
        f"`{FLOOR}` beside them: batches of {phase['batch_runs']} runs (AG-UI and plain JSON "
        "for the servers, sent by the lean client `bench.wire`, a new connection each) by "
        f"{clients} clients at {phase['latency_ms']:g} ms model latency, "
        "interleaved, the order rotated "
        f"every round; the median round counts. The {cores} cores are shared with the load "
        "generator and the fake model, which caps what more workers can add. Server CPU "
        "and RSS are those of the whole process tree (the supervisor, its workers and "
        "multiprocessing's resource tracker).",
        "",
        "| target | runs/s (median) | runs/s per round | p50 ms | server CPU ms/run "
        "| client CPU ms/run | model CPU ms/run | cores' ceiling runs/s | processes "
        "| RSS MiB | errors |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    servers = phase.get("servers") or {}
    for name, row in rates.items():
        server = servers.get(name) or {}
        rounds = ", ".join(f"{x:g}" for x in row.get("runs_per_s_rounds") or [])
        lines.append(
            f"| {name} | {_fmt(_number(row.get('runs_per_s')))} | {rounds} "
            f"| {_fmt(_number(row.get('p50_ms')))} "
            f"| {_fmt(_number(row.get('server_cpu_ms_per_run')))} "
            f"| {_fmt(_number(row.get('client_cpu_ms_per_run')))} "
            f"| {_fmt(_number(row.get('model_cpu_ms_per_run')))} "
            f"| {_fmt(_ceiling(row, cores))} "
            f"| {server.get('processes', '-')} | {_fmt(_number(server.get('rss_mib')))} "
            f"| {row.get('errors', '-')} |"
        )
    checks = [
        _ratio_check(
            f"runs/s ({endpoint}), {clients} clients at {phase['latency_ms']:g} ms: "
            f"--workers {workers} vs 1",
            _number(_get(rates, f"ours-w{workers}/{endpoint}", "runs_per_s")),
            _number(_get(rates, f"ours-w1/{endpoint}", "runs_per_s")),
            WORKERS_LIMIT,
            at_most=False,
            unit="runs/s",
            labels=(f"--workers {workers}", "--workers 1"),
        )
        for endpoint in ("agui", "chat")
        if f"ours-w1/{endpoint}" in rates
    ]
    return [
        *lines,
        "",
        "The cores' ceiling is the runs/s the machine's cores allow at that row's CPU per "
        "run of the server, the load generator and the fake model together: cores x 1000 / "
        "(server + client + model ms per run); one worker alone uses one core at most.",
        *_machine_line(phase),
        "",
        "| figure | measured | ratio | limit | verdict |",
        "|---|---|---:|---:|---|",
        *(f"| {c.target} | {c.measured} | {c.ratio} | {c.limit} | {c.word} |" for c in checks),
    ]


def _machine_line(phase: dict[str, Any]) -> list[str]:
    speedup = _number(phase.get("machine_speedup"))
    if speedup is None:
        return []
    workers = phase["workers"]
    return [
        "",
        f"The machine itself: a pure-CPU loop in {workers} processes does {speedup:.2f}x the "
        f"work of one (`bench/cores.py`): the most {workers} workers of any server can gain "
        "here even with nothing else on the cores.",
    ]


def _ceiling(row: dict[str, Any], cores: Any) -> float | None:
    """Runs/s the machine's cores could give at this row's server + client + model CPU."""
    parts = [
        _number(row.get(key))
        for key in ("server_cpu_ms_per_run", "client_cpu_ms_per_run", "model_cpu_ms_per_run")
    ]
    if any(part is None for part in parts) or not isinstance(cores, int):
        return None
    total = sum(part or 0.0 for part in parts)
    return round(cores * 1000 / total, 1) if total > 0 else None


def render(results: dict[str, Any]) -> str:
    """The whole report as Markdown."""
    meta = results["meta"]
    m = meta["machine"]
    lines = [
        "# Benchmark results",
        "",
        f"- date: {meta['date']}; mode: {meta['plan']['mode']}; "
        f"duration: {meta.get('duration_s', '-')} s",
        f"- machine: {m['cpu']}, {m['cores']} cores, Linux {m['kernel']}, Python {m['python']}; "
        f"load average at start {m['loadavg']}, at end {meta.get('loadavg_end', '-')}",
        f"- one core's speed: {m.get('loop_ns', '-')} ns per iteration of `bench/cores.py`'s "
        "loop (lower is faster); CPU-bound figures scale with it, waits on I/O do not",
        "- the load generator (this process: httpx client, and the in-process floor) and the "
        "fake model share the same cores as the servers; only ratios within one run count",
    ]
    if meta.get("aborted"):
        lines.append(f"- **incomplete**: {meta['aborted']}")
    if meta["plan"].get("growth_only"):
        return "\n".join([*lines, "", *_growth_table(results)]) + "\n"
    lines += ["", "## Targets (issue 7)", "", "| target | measured | ratio | limit | verdict |"]
    lines.append("|---|---|---:|---:|---|")
    for v in verdicts(results):
        lines.append(f"| {v.target} | {v.measured} | {v.ratio} | {v.limit} | {v.word} |")
    lines += ["", *_budget_table(results)]
    lines += ["", *_metrics_table(results)]
    lines += ["", *_postgres_table(results)]
    lines += ["", *_workers_table(results)]
    lines += ["", *_like_for_like(results)]
    clients = [str(c) for c in meta["plan"]["clients"]]
    for latency, phase in results.get("latencies", {}).items():
        lines += ["", *_latency_table(latency, phase, clients)]
    lines += ["", *_cold_table(results), "", *_rss_table(results), "", *_soak_table(results)]
    lines += ["", *_growth_table(results)]
    langgraph = _langgraph_section(results)
    if langgraph:  # a run without the phase ends as before, with the growth section
        lines += ["", *langgraph]
    return "\n".join(lines) + "\n"


def _langgraph_section(results: dict[str, Any]) -> list[str]:
    """Issue 30: our LangGraph API path beside AG-UI, langgraph dev and Aegra."""
    phase = results.get("langgraph")
    if phase is None:
        return []
    from bench.langgraph_cost import render as render_langgraph  # it imports the runner

    title = "## LangGraph's own API (issue 30): ours vs our AG-UI path, langgraph dev, Aegra"
    return [title, "", render_langgraph(phase).rstrip("\n")]


def _like_for_like(results: dict[str, Any]) -> list[str]:
    """ours/agui against the streaming floor: what the service adds to a streamed run."""
    lines = [
        "## Like for like (not an issue target): ours/agui vs floor/astream",
        "",
        "`floor/ainvoke` gets whole model replies (nothing listens for tokens); AG-UI must "
        "stream them, and the streaming floor pays that cost in-process too.",
        "",
        "| figure | ours/agui | floor/astream | ratio |",
        "|---|---:|---:|---:|",
    ]
    rows: list[tuple[str, float | None, float | None]] = []
    for latency in ("0", "50"):
        rows.append(
            (
                f"p50 ms at {latency} ms",
                _seq(results, latency, OURS, "p50_ms"),
                _seq(results, latency, FLOOR_STREAM, "p50_ms"),
            )
        )
        rows.append(
            (
                f"server CPU ms/run at {latency} ms",
                _seq(results, latency, OURS, "server_cpu_ms_per_run"),
                _seq(results, latency, FLOOR_STREAM, "server_cpu_ms_per_run"),
            )
        )
    rows.append(
        (
            "runs/s, 10 clients at 50 ms",
            _rate(results, "50", OURS, "10"),
            _rate(results, "50", FLOOR_STREAM, "10"),
        )
    )
    for name, ours, floor in rows:
        ratio = f"{ours / floor:.2f}x" if ours is not None and floor else "-"
        lines.append(f"| {name} | {_fmt(ours)} | {_fmt(floor)} | {ratio} |")
    return lines


def _latency_table(latency: str, phase: dict[str, Any], clients: list[str]) -> list[str]:
    timing = phase.get("timing", {})
    rate_heads = "".join(f" runs/s @{c} |" for c in clients)
    lines = [
        f"## Model latency {latency} ms (+{timing.get('token_delay_ms', 0):g} ms per token, "
        f"{timing.get('tokens', '-')} tokens)",
        "",
        "| target | p50 ms | p99 ms | first token p50 ms | server CPU ms/run "
        f"| client CPU ms/run |{rate_heads} errors |",
        "|---|" + "---:|" * (6 + len(clients)),
    ]
    sequential = phase.get("sequential", {})
    rates = phase.get("throughput", {})
    for name, row in sequential.items():
        rate_cells = "".join(f" {_fmt(_get(rates, name, c, 'runs_per_s'))} |" for c in clients)
        errors = row["errors"] + sum(int(b["errors"]) for b in rates.get(name, {}).values())
        lines.append(
            f"| {name} | {_fmt(row['p50_ms'])} | {_fmt(row['p99_ms'])} "
            f"| {_fmt(row['ttft_p50_ms'])} | {_fmt(row['server_cpu_ms_per_run'])} "
            f"| {_fmt(row['client_cpu_ms_per_run'])} |{rate_cells} {errors} |"
        )
    return lines


def _cold_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "## Cold start (fresh process and SQLite file, 0 ms model latency)",
        "",
        "| server | starts | to healthy, median s | first run, median ms | spawn to end of "
        "first run, median s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, records in (results.get("cold_start") or {}).items():
        lines.append(
            f"| {name} | {len(records)} | {_fmt(_median(records, 'healthy_s'), 2)} "
            f"| {_fmt(_median(records, 'first_run_ms'))} "
            f"| {_fmt(_median(records, 'spawn_to_first_run_s'), 2)} |"
        )
    return lines


def _rss_table(results: dict[str, Any]) -> list[str]:
    clients = results["meta"]["plan"].get("rss_clients", "-")
    lines = [
        f"## Memory (RSS of the server's process tree; a fresh server, 0 ms, {clients} clients, "
        "read between batches)",
        "",
        "| server | first mark | second mark | growth MiB | main server at the end |",
        "|---|---:|---:|---:|---:|",
    ]
    main = results.get("rss_main") or {}
    for name in sorted({*(results.get("rss") or {}), *main}):
        readings = (results.get("rss") or {}).get(name, {})
        marks = sorted(readings, key=int)
        cells = [
            f"{readings[k]['rss_mib']:.1f} MiB @ {readings[k]['runs']} runs" for k in marks[:2]
        ]
        cells += ["-"] * (2 - len(cells))
        growth = (
            f"{readings[marks[-1]]['rss_mib'] - readings[marks[0]]['rss_mib']:+.1f}"
            if len(marks) >= 2
            else "-"
        )
        end = main.get(name)
        end_cell = f"{end['rss_mib']:.1f} MiB @ {end['runs']} runs" if end else "-"
        lines.append(f"| {name} | {cells[0]} | {cells[1]} | {growth} | {end_cell} |")
    return lines


def _soak_table(results: dict[str, Any]) -> list[str]:
    soak = results.get("soak")
    if not soak:
        return ["## Soak", "", "not run"]
    return [
        f"## Soak: {soak['sessions']} concurrent AG-UI SSE sessions, ours, "
        f"{soak['latency_ms']:g} ms model latency",
        "",
        "| complete and well-formed | errors | malformed | p50 ms | p99 ms | max ms | wall s "
        "| server CPU ms/run | RSS after MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {soak['complete_and_well_formed']} | {soak['errors']} | {soak['malformed']} "
        f"| {_fmt(soak['p50_ms'])} | {_fmt(soak['p99_ms'])} | {_fmt(soak['max_ms'])} "
        f"| {soak['wall_s']} | {_fmt(soak['server_cpu_ms_per_run'])} "
        f"| {_fmt(soak['rss_after_mib'])} |",
        *([f"\nerrors seen: {soak['error_examples']}"] if soak["error_examples"] else []),
    ]


GROWTH_LIMIT = 1.5  # issue 26: server CPU per run at the longest mark within 1.5x the first's
GROWTH_GATED = (OURS, OURS_PG)  # the floor grows with LangGraph; the target is the service's
PG_TOTAL = "ours-pg/agui + backends"


def _growth_cells(summary: list[dict[str, Any]], field: str) -> list[str]:
    cells = []
    for mark in summary:
        value = _number(mark.get(field))
        if field == "server_cpu_ms_median" and value is not None:
            low, high = (
                _number(mark.get("server_cpu_ms_min")),
                _number(mark.get("server_cpu_ms_max")),
            )
            cells.append(f"{value:.1f} ({_fmt(low)}-{_fmt(high)})")
        else:
            cells.append(_fmt(value))
    return cells


def _growth_ratio(summary: list[dict[str, Any]], field: str) -> float | None:
    if len(summary) < 2:
        return None
    first, last = _number(summary[0].get(field)), _number(summary[-1].get(field))
    return last / first if first and last is not None else None


def _growth_rows(phase: dict[str, Any], field: str) -> list[str]:
    rows = []
    for name, summary in (phase.get("summary") or {}).items():
        series = [(name, field)]
        backends = any(_number(mark.get("db_cpu_ms_median")) is not None for mark in summary)
        if name == OURS_PG and field == "server_cpu_ms_median" and backends:
            series.append((PG_TOTAL, "server_and_db_cpu_ms_median"))
        for label, key in series:
            ratio = _growth_ratio(summary, key)
            cells = " | ".join(_growth_cells(summary, key))
            rows.append(f"| {label} | {cells} | {_fmt(ratio, 2) + 'x' if ratio else '-'} |")
    return rows


def growth_checks(results: dict[str, Any]) -> list[Verdict]:
    """Issue 26: server CPU per run at the longest mark against the first, per backend."""
    phase = results.get("growth")
    summaries = (phase or {}).get("summary") or {}
    marks = (phase or {}).get("marks") or []
    checks = []
    for name in GROWTH_GATED:
        summary = summaries.get(name) or []
        first = _number(summary[0].get("server_cpu_ms_median")) if summary else None
        last = _number(summary[-1].get("server_cpu_ms_median")) if len(summary) > 1 else None
        label = f"{marks[-1]} vs {marks[0]} messages" if len(marks) > 1 else "longest vs first"
        checks.append(
            _ratio_check(
                f"server CPU per run, {label}: {name}",
                last,
                first,
                GROWTH_LIMIT,
                at_most=True,
                unit="ms",
                labels=(
                    f"{marks[-1] if marks else '?'} msgs",
                    f"{marks[0] if marks else '?'} msgs",
                ),
            )
        )
    return checks


def _growth_table(results: dict[str, Any]) -> list[str]:
    """Issue 26: what a run costs as its thread grows, floor and ours side by side."""
    lines = ["## Thread growth (issue 26): one thread per target, run after run", ""]
    phase = results.get("growth")
    if not isinstance(phase, dict) or not phase.get("summary"):
        return [*lines, "not measured (not in this run)"]
    marks = phase["marks"]
    first = next(iter(phase["summary"].values()))
    windows = "; ".join(
        f"{mark['mark']}: runs {mark['runs'][0]}-{mark['runs'][1]}, "
        f"{mark['messages_mean']:g} messages on average"
        for mark in first
        if mark.get("runs")
    )
    timing = phase.get("timing") or {}
    final = phase.get("final_messages") or {}
    finals = ", ".join(f"{name} {count}" for name, count in final.items())
    head = " | ".join(f"{mark} msgs" for mark in marks)
    rule = "|---|" + "---:|" * (len(marks) + 1)
    last_vs_first = f"{marks[-1]} / {marks[0]}" if len(marks) > 1 else "-"
    lines += [
        f"Fresh servers (ours on SQLite, ours-pg on PostgreSQL) and the in-process floor "
        f"(`{FLOOR}`, the service's SQLite saver), each with one thread grown by "
        f"{phase['runs_per_thread']} runs of {phase['messages_per_run']} messages at "
        f"{timing.get('latency_ms', 0):g} ms model latency, one run per target per round, "
        "the order rotated. A mark is the "
        f"{phase['window']} runs whose thread length at start is nearest it (the thread's "
        f"first run left out): {windows}. Threads' lengths at the end: {finals}.",
        "",
        "Server CPU per run, ms: the window's median (its lowest-highest)",
        "",
        f"| target | {head} | {last_vs_first} |",
        rule,
        *_growth_rows(phase, "server_cpu_ms_median"),
        "",
        "Latency p50, ms",
        "",
        f"| target | {head} | {last_vs_first} |",
        rule,
        *_growth_rows(phase, "p50_ms"),
        "",
        "| figure | measured | ratio | limit | verdict |",
        "|---|---|---:|---:|---|",
        *(
            f"| {c.target} | {c.measured} | {c.ratio} | {c.limit} | {c.word} |"
            for c in growth_checks(results)
        ),
    ]
    return lines
