"""How far this machine's cores scale by themselves: a pure-CPU loop in 1 and N processes.

Virtual cores share execution units and caches: two processes of pure arithmetic do
not run twice as fast as one. `parallel_speedup(n)` is that ratio, the ceiling of what
n worker processes of any server can gain here, before the load generator and the fake
model take their share of the same cores. `loop_ns()` is one core's speed at the same
loop, so that runs on different machines (or one machine on a slower day) can be told apart.
"""

from __future__ import annotations

import multiprocessing
import time

SPIN = 5_000_000  # iterations per process: about a quarter of a second each


def _spin(iterations: int) -> float:
    began = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i * i
    return time.perf_counter() - began


def loop_ns(rounds: int = 3) -> float:
    """Nanoseconds per iteration of the spinning loop in this process (median of rounds)."""
    times = sorted(_spin(SPIN) for _ in range(rounds))
    return round(times[len(times) // 2] / SPIN * 1e9, 1)


def parallel_speedup(processes: int, rounds: int = 5) -> float:
    """Work per second of `processes` spinning processes over one's (median of rounds)."""
    ratios = []
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        pool.map(_spin, [1000] * processes)  # started and warm
        for _ in range(rounds):
            alone = pool.apply(_spin, (SPIN,))
            began = time.perf_counter()
            pool.map(_spin, [SPIN] * processes)
            together = time.perf_counter() - began
            ratios.append(processes * alone / together)
    return sorted(ratios)[len(ratios) // 2]
