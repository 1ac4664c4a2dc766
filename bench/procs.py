"""The processes the benchmark starts: the fake model and the servers, with /proc readings.

CPU is the scheduler's runtime of every thread (`/proc/<pid>/task/<tid>/schedstat`, in
nanoseconds) summed over the process and its descendants; RSS is `VmRSS` summed the same
way. A server on PostgreSQL can also report its database backends' CPU (`db_cpu`).
Every process is started in its own session and stopped by its pid (SIGTERM, then
SIGKILL after a grace period).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CLOCK_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

NOT_HEALTHY = "{name} did not answer {url} within {timeout:.0f} s; log tail:\n{log}"
EXITED = "{name} exited with code {code} before it was healthy; log tail:\n{log}"
NO_PORT = "the fake model did not print its port; output: {line!r}"


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds `pids` have run (gone processes count 0), to the nanosecond.

    The scheduler's own runtime of each thread (`/proc/<pid>/task/<tid>/schedstat`)
    rather than utime + stime: those are charged in whole clock ticks (10 ms), which
    for a 30 ms run is an error of several percent per reading. A process without
    schedstat falls back to the ticks.
    """
    total = 0.0
    for pid in pids:
        try:
            total += _scheduled_ns(pid) / 1e9
        except OSError:
            total += _ticks(pid) * CLOCK_TICK_S
    return total


def _scheduled_ns(pid: int) -> int:
    # The threads a server keeps live for its whole life (event loop, SQLite and executor
    # workers): a thread that ends takes its runtime with it, never seen here.
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as stat:
                total += int(stat.read().split()[0])
        except FileNotFoundError:
            continue  # the thread ended while we read
    return total


def _ticks(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)


def rss_bytes(pids: Sequence[int]) -> int:
    """Resident set size of `pids`, in bytes."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as statm:
                total += int(statm.read().split()[1]) * PAGE_BYTES
        except OSError:
            continue
    return total


def process_tree(root: int) -> list[int]:
    """`root` and every process descending from it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                ppid = int(stat.read().rpartition(b")")[2].split()[1])
        except OSError:
            continue
        parents[int(entry)] = ppid
    tree = [root]
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        tree.extend(children)
        frontier.extend(children)
    return tree


def log_tail(path: Path, size: int = 3000) -> str:
    """The end of a log file (empty if it does not exist)."""
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


@dataclass
class Server:
    """A started server process: where it listens, its log, its /proc readings."""

    name: str
    url: str
    health_path: str
    process: subprocess.Popen[bytes]
    log_path: Path
    started_at: float
    pids: list[int] = field(default_factory=list)
    runs: int = 0  # runs it has served, counted by the benchmark
    # CPU seconds of the database processes serving it (PostgreSQL backends), if visible.
    db_cpu: Callable[[], float] | None = None

    def refresh_pids(self) -> None:
        """Find the process tree again (call once the server is up)."""
        self.pids = process_tree(self.process.pid)

    def cpu_s(self) -> float:
        return cpu_seconds(self.pids or [self.process.pid])

    def rss(self) -> int:
        return rss_bytes(self.pids or [self.process.pid])

    async def wait_healthy(self, client: httpx.AsyncClient, timeout_s: float = 60.0) -> float:
        """Poll the health route every 5 ms; seconds from spawn to the first 200."""
        url = self.url + self.health_path
        deadline = self.started_at + timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    EXITED.format(name=self.name, code=code, log=log_tail(self.log_path))
                )
            with contextlib.suppress(httpx.TransportError):
                response = await client.get(url, timeout=2.0)
                if response.status_code == 200:
                    healthy = time.perf_counter() - self.started_at
                    self.refresh_pids()
                    return healthy
            if time.perf_counter() > deadline:
                message = NOT_HEALTHY.format(
                    name=self.name, url=url, timeout=timeout_s, log=log_tail(self.log_path)
                )
                raise RuntimeError(message)
            await asyncio.sleep(0.005)  # polling interval of the readiness probe

    async def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if still alive after `grace_s`."""
        await stop_process(self.process, grace_s)


def spawn(
    argv: Sequence[str], *, env: dict[str, str], cwd: Path, log_path: Path
) -> subprocess.Popen[bytes]:
    """Start `argv` in its own session, output to `log_path`."""
    log: IO[bytes]
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def stop_process(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop a process this benchmark started, by its pid."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(process.wait, grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await asyncio.to_thread(process.wait, 5)


def _spawn_model(env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "bench.fake_model", "--port", "0"],
            env=env,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )


async def start_fake_model(env: dict[str, str], log_path: Path) -> Server:
    """Start `python -m bench.fake_model` on a free port (it prints the port)."""
    started = time.perf_counter()
    process = _spawn_model(env, log_path)
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), 30)
    except TimeoutError:
        await stop_process(process)
        raise RuntimeError(NO_PORT.format(line="")) from None
    parts = line.decode().split()
    if len(parts) != 2 or parts[0] != "PORT":
        await stop_process(process)
        raise RuntimeError(NO_PORT.format(line=line.decode(errors="replace")))
    return Server(
        name="fake-model",
        url=f"http://127.0.0.1:{parts[1]}",
        health_path="/healthz",
        process=process,
        log_path=log_path,
        started_at=started,
        pids=[process.pid],
    )
