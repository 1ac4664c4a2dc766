"""The measurements: sequential latency, throughput batches, the soak, and their statistics.

CPU per run: for a server target, the server's CPU (`/proc`, see `bench.procs`) over
its own runs, each read once the server is idle again; for the in-process floor, this
process's CPU (`time.process_time()`, all threads) over its own runs. The load
generator's CPU per run is kept too (`client_cpu_ms_per_run`): it shares the machine
with the servers. A server on PostgreSQL adds its backends' CPU (`db_cpu_ms_per_run`),
read after the server's.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.targets import Malformed, Sample, Target, agui_input, check_agui_run, read_agui_stream


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


@dataclass
class Tally:
    """Samples and CPU of one target in one phase."""

    samples: list[Sample] = field(default_factory=list)
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    db_cpu_s: float | None = None  # None: the target has no database CPU to read
    machine_cpu_s: float | None = None  # every process on the machine (throughput only)

    def summary(self) -> dict[str, Any]:
        ok = [s for s in self.samples if s.ok]
        latencies = [s.latency_s for s in ok]
        ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
        cpus = [s.server_cpu_s for s in ok if s.server_cpu_s is not None]
        db_cpus = [s.db_cpu_s for s in ok if s.db_cpu_s is not None]
        n = len(self.samples)
        errors = [s for s in self.samples if not s.ok]
        return {
            "runs": n,
            "errors": len(errors),
            "malformed": sum(s.malformed for s in errors),
            "p50_ms": ms(percentile(latencies, 50)),
            "p99_ms": ms(percentile(latencies, 99)),
            "mean_ms": ms(sum(latencies) / len(latencies)) if latencies else None,
            "ttft_p50_ms": ms(percentile(ttfts, 50)),
            "ttft_p99_ms": ms(percentile(ttfts, 99)),
            "server_cpu_ms_per_run": round(self.server_cpu_s * 1000 / n, 2) if n else None,
            "server_cpu_ms_median": ms(percentile(cpus, 50)),
            "client_cpu_ms_per_run": round(self.client_cpu_s * 1000 / n, 2) if n else None,
            "db_cpu_ms_per_run": (
                round(self.db_cpu_s * 1000 / n, 2) if n and self.db_cpu_s is not None else None
            ),
            "db_cpu_ms_median": ms(percentile(db_cpus, 50)),
            "machine_cpu_ms_per_run": (
                round(self.machine_cpu_s * 1000 / n, 2)
                if n and self.machine_cpu_s is not None
                else None
            ),
            "error_examples": sorted({s.error or "" for s in errors})[:3],
        }

    def add_db_cpu(self, seconds: float | None) -> None:
        """Count database CPU (None: not measured, which leaves the total as it is)."""
        if seconds is not None:
            self.db_cpu_s = (self.db_cpu_s or 0.0) + seconds


def server_cpu(target: Target) -> float:
    """The CPU seconds that count as the target's server: its process, or this one."""
    if target.server is not None:
        return target.server.cpu_s()
    return time.process_time()


def db_cpu(target: Target) -> float | None:
    """CPU seconds of the database processes serving the target's server, if visible."""
    if target.server is None or target.server.db_cpu is None:
        return None
    return target.server.db_cpu()


def machine_cpu() -> float | None:
    """CPU seconds every process on the machine has used (busy time in /proc/stat), if
    readable: under load it shows what the load generator and the fake model take from
    the cores a server could have had."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...: all but idle and iowait.
    busy = sum(int(v) for i, v in enumerate(fields[1:9]) if i not in (3, 4))
    return busy / os.sysconf("SC_CLK_TCK")


def _delta(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


# A server counts as idle again once it used less than IDLE_SHARE of a core over one
# IDLE_PROBE_S; SETTLE_LIMIT_S bounds the wait for a server with background work.
IDLE_PROBE_S = 0.002
IDLE_SHARE = 0.05
SETTLE_LIMIT_S = 0.5


async def settled_server_cpu(target: Target) -> float:
    """`server_cpu` once the target's server has finished what its last run left.

    A run's response ends before its server's work does (the last log write, the
    checkpoint, the run's ending): read at once, that work is charged to whichever
    run the server does next, possibly another target's.
    """
    if target.server is None:
        return server_cpu(target)
    deadline = time.perf_counter() + SETTLE_LIMIT_S
    before = server_cpu(target)
    while True:
        await asyncio.sleep(IDLE_PROBE_S)
        now = server_cpu(target)
        if now - before < IDLE_PROBE_S * IDLE_SHARE or time.perf_counter() > deadline:
            return now
        before = now


async def measured_run(target: Target, tally: Tally) -> Sample:
    """One run with its CPU deltas added to `tally` (the server's once it is idle)."""
    client0 = time.process_time()
    db0 = db_cpu(target)
    server0 = server_cpu(target)
    sample = await target.run()
    server1 = await settled_server_cpu(target)
    # Once the server is idle its statements are done: its backends' CPU is complete.
    db1 = db_cpu(target)
    client1 = time.process_time()
    sample.server_cpu_s = server1 - server0
    sample.db_cpu_s = _delta(db0, db1)
    tally.samples.append(sample)
    tally.server_cpu_s += server1 - server0
    tally.add_db_cpu(sample.db_cpu_s)
    tally.client_cpu_s += client1 - client0
    return sample


async def sequential(
    targets: Sequence[Target],
    runs_for: Callable[[Target], int],
    after_round: Callable[[], None] = lambda: None,
) -> dict[str, Tally]:
    """Interleaved one-at-a-time runs (A B C A B C ..., order rotated each round)."""
    tallies = {target.name: Tally() for target in targets}
    rounds = max((runs_for(target) for target in targets), default=0)
    for index in range(rounds):
        shift = index % len(targets)
        for target in [*targets[shift:], *targets[:shift]]:
            if index < runs_for(target):
                await measured_run(target, tallies[target.name])
        after_round()
    return tallies


@dataclass
class Batch:
    """A throughput batch: `runs` runs by `clients` concurrent clients."""

    clients: int
    tally: Tally
    wall_s: float

    @property
    def errors(self) -> int:
        return sum(not s.ok for s in self.tally.samples)

    def summary(self) -> dict[str, Any]:
        done = len(self.tally.samples) - self.errors
        return {"runs_per_s": round(done / self.wall_s, 2) if self.wall_s > 0 else None}


def combine(batches: Sequence[Batch]) -> dict[str, Any]:
    """Batches of one target at one client count (one per round): the median rate."""
    tally = Tally()
    for batch in batches:
        tally.samples += batch.tally.samples
        tally.server_cpu_s += batch.tally.server_cpu_s
        tally.client_cpu_s += batch.tally.client_cpu_s
        tally.add_db_cpu(batch.tally.db_cpu_s)
        if batch.tally.machine_cpu_s is not None:
            tally.machine_cpu_s = (tally.machine_cpu_s or 0.0) + batch.tally.machine_cpu_s
    rates = [r for b in batches if (r := b.summary()["runs_per_s"]) is not None]
    base = tally.summary()
    return {
        "clients": batches[0].clients if batches else None,
        "rounds": len(batches),
        "runs": base["runs"],
        "errors": base["errors"],
        "runs_per_s": statistics.median(rates) if rates else None,
        "runs_per_s_rounds": rates,
        "wall_s": round(sum(b.wall_s for b in batches), 3),
        "p50_ms": base["p50_ms"],
        "p99_ms": base["p99_ms"],
        "server_cpu_ms_per_run": base["server_cpu_ms_per_run"],
        "client_cpu_ms_per_run": base["client_cpu_ms_per_run"],
        "db_cpu_ms_per_run": base["db_cpu_ms_per_run"],
        "machine_cpu_ms_per_run": base["machine_cpu_ms_per_run"],
        "error_examples": base["error_examples"],
    }


async def throughput(target: Target, clients: int, runs: int) -> Batch:
    """`clients` workers share `runs` runs; wall time from start to the last finish."""
    tally = Tally()
    todo = iter(range(runs))

    async def worker() -> None:
        for _ in todo:
            tally.samples.append(await target.run())

    client0 = time.process_time()
    db0 = db_cpu(target)
    server0 = server_cpu(target)
    machine0 = machine_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    wall = time.perf_counter() - started
    tally.machine_cpu_s = _delta(machine0, machine_cpu())
    tally.server_cpu_s = server_cpu(target) - server0
    tally.add_db_cpu(_delta(db0, db_cpu(target)))
    tally.client_cpu_s = time.process_time() - client0
    return Batch(clients, tally, wall)


@dataclass(slots=True)
class Session:
    """One soak session: its duration and what was wrong with it, if anything."""

    latency_s: float
    problem: str | None = None
    malformed: bool = False


async def soak(
    client: httpx.AsyncClient, url: str, answer: str, sessions: int, timeout_s: float
) -> dict[str, Any]:
    """`sessions` AG-UI runs started at once; every stream read to the end and checked."""

    async def one() -> Session:
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout_s):
                body = agui_input(uuid.uuid4().hex)
                headers = {"accept": "text/event-stream"}
                async with client.stream("POST", url, json=body, headers=headers) as response:
                    if response.status_code != 200:
                        raise Malformed(f"HTTP {response.status_code}")
                    run = await read_agui_stream(response.aiter_lines(), started)
                check_agui_run(run, answer)
        except Malformed as exc:
            return Session(time.perf_counter() - started, str(exc), malformed=True)
        except Exception as exc:  # the session's top-level handler: any failure is an error
            return Session(time.perf_counter() - started, f"{type(exc).__name__}: {exc}"[:300])
        return Session(time.perf_counter() - started)

    started = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(sessions)))
    wall = time.perf_counter() - started
    ok = [r.latency_s for r in results if r.problem is None]
    problems = [r for r in results if r.problem is not None]
    return {
        "sessions": sessions,
        "complete_and_well_formed": len(ok),
        "errors": len(problems),
        "malformed": sum(r.malformed for r in problems),
        "p50_ms": ms(percentile(ok, 50)),
        "p99_ms": ms(percentile(ok, 99)),
        "max_ms": ms(max(ok)) if ok else None,
        "wall_s": round(wall, 3),
        "error_examples": sorted({r.problem or "" for r in problems})[:3],
    }
