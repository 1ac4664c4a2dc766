"""What signing in as a user costs a run (issue 29), beside the admin's key on one server.

    python -m bench.user_cost [--runs 150] [--clients 10] [--latency-ms 300] [--db sqlite|postgres]

One `react-agent serve` (the bench graph, the fake model) with AGENT_API_KEY and one user
made by `react-agent users add`. The same `POST /api/chat` run is sent with the admin's
key (no limits, no owner check: the path `AGENT_API_KEY` setups take) and with the user's
key (the key looked up and cached, the request counted against AGENT_USER_RPM, the
thread's owner checked, today's tokens read, the user's active runs counted in the
admission, the run's usage written at its end), in alternating batches of `--clients`
concurrent runs, so both meet the same machine. Reported per caller: p50 and p90 run
time, and the server's CPU per run (its process tree; on PostgreSQL, plus the backends
serving its database).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench import postgres
from bench.procs import VENV_BIN, Server, cpu_seconds, spawn, start_fake_model, stop_process
from bench.runner import BENCH_GRAPH_SPEC, free_port, machine, scrubbed_env

ADMIN_KEY = "bench-admin-key-0123456789"


async def _batch(client: httpx.AsyncClient, key: str, clients: int) -> list[float]:
    async def one() -> float:
        started = time.perf_counter()
        answer = await client.post(
            "/api/chat",
            json={"graph": "bench", "threadId": f"t-{uuid.uuid4().hex}", "message": "查一下"},
            headers={"Authorization": f"Bearer {key}"},
        )
        answer.raise_for_status()
        return (time.perf_counter() - started) * 1000

    return list(await asyncio.gather(*(one() for _ in range(clients))))


async def measure(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-users-"))
    env = scrubbed_env("http://unused")
    model = await start_fake_model(env, tmp / "model.log")
    database = None
    try:
        env = scrubbed_env(model.url)
        if args.db == "postgres":
            database = postgres.create(args.postgres_url)
            agent_db = database.url
        else:
            agent_db = str(tmp / "agent.sqlite")
        env.update(
            AGENT_DB=agent_db,
            AGENT_API_KEY=ADMIN_KEY,
            AGENT_EXTRA_GRAPHS=BENCH_GRAPH_SPEC,
            AGENT_USER_MAX_RUNS=str(args.clients * 2),
            AGENT_USER_RPM="100000",
        )
        added = await asyncio.to_thread(
            subprocess.run,
            [str(VENV_BIN / "react-agent"), "users", "add", "bench-user"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        user_key = added.stdout.strip().splitlines()[-1]
        port = free_port()
        argv = [str(VENV_BIN / "react-agent"), "serve", "--port", str(port)]
        process = spawn(argv, env=env, cwd=tmp, log_path=tmp / "serve.log")
        server = Server(
            "ours",
            f"http://127.0.0.1:{port}",
            "/healthz",
            process,
            tmp / "serve.log",
            time.perf_counter(),
        )
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            await server.wait_healthy(client)
            await client.post(
                f"{model.url}/control",
                json={"latency_ms": args.latency_ms, "token_delay_ms": args.latency_ms / 60},
            )
            backends = database.backends if database is not None else None
            keys = {"admin": ADMIN_KEY, "user": user_key}
            times: dict[str, list[float]] = {name: [] for name in keys}
            cpu: dict[str, float] = dict.fromkeys(keys, 0.0)
            for key in keys.values():  # warm-up: imports, caches, the first thread
                await _batch(client, key, args.clients)
            for round_ in range(args.runs // args.clients):
                order = list(keys.items()) if round_ % 2 == 0 else list(keys.items())[::-1]
                for name, key in order:
                    before = cpu_seconds(server.pids) + (backends.cpu_s() if backends else 0.0)
                    times[name] += await _batch(client, key, args.clients)
                    after = cpu_seconds(server.pids) + (backends.cpu_s() if backends else 0.0)
                    cpu[name] += after - before
        await stop_process(process)
        return {
            name: {
                "p50_ms": statistics.median(values),
                "p90_ms": statistics.quantiles(values, n=10)[-1],
                "cpu_ms_per_run": cpu[name] * 1000 / len(values),
                "runs": len(values),
            }
            for name, values in times.items()
        }
    finally:
        await stop_process(model.process)
        if database is not None:
            postgres.drop(database)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.user_cost")
    parser.add_argument("--runs", type=int, default=150, help="runs per caller")
    parser.add_argument("--clients", type=int, default=10, help="concurrent runs in a batch")
    parser.add_argument("--latency-ms", type=float, default=300.0, help="the model's latency")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    found = asyncio.run(measure(args))
    print(f"{args.db}, {args.clients} clients, model latency {args.latency_ms:.0f} ms, {machine()}")
    print("| caller | runs | p50 ms | p90 ms | server CPU ms/run |")
    print("|---|---|---|---|---|")
    for name, row in found.items():
        print(
            f"| {name} | {row['runs']:.0f} | {row['p50_ms']:.1f} | {row['p90_ms']:.1f} |"
            f" {row['cpu_ms_per_run']:.2f} |"
        )
    user, admin = found["user"], found["admin"]
    print(
        f"\nuser / admin: p50 {user['p50_ms'] / admin['p50_ms']:.3f}x, CPU per run "
        f"{user['cpu_ms_per_run'] / admin['cpu_ms_per_run']:.3f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
