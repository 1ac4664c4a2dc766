"""The same langgraph-sdk sequence against `react-agent serve` and against Aegra (issue 30).

    python -m bench.langgraph_compare [--aegra-venv .venv-aegra] [--json PATH]

Both servers on the same PostgreSQL, each on a fresh database of its own, both serving
the bench graphs (`bench/graph.py` as `bench`, `bench/ask_graph.py` as `ask`) against
one fake model (`bench/fake_model.py`). The sequence, through langgraph-sdk's client:
assistants search; threads create; `runs.stream` with `stream_mode` values,
messages-tuple and updates up to the tool's interrupt; the thread and its state while it
waits; `Command(resume=...)` streamed to the answer; state and history; a background run
joined; a run cancelled while the model is slow; the thread's runs; `runs.wait`.

Each step is reduced to what a client relies on (the resource's fields, statuses, the
stream's event names in order with repeats folded: `messages x23`), printed side by side,
with the steps where the two differ marked. Aegra runs from its own venv (see
`bench/langgraph_cost.py` for how to make it); its code is never part of this repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import Command, StreamMode, StreamPart

from bench import postgres
from bench.langgraph_cost import AEGRA_VENV, NO_AEGRA
from bench.plan import Plan
from bench.procs import ROOT, VENV_BIN, Server
from bench.runner import Stack, free_port, log, stack

GRAPHS = {"bench": "bench.graph", "ask": "bench.ask_graph"}
MODES: list[StreamMode] = ["values", "messages-tuple", "updates"]
PROMPT = "benchmark question"
SLOW_MS = 5000.0  # the model's latency while a run is cancelled
RUNNING_DEADLINE_S = 20.0

Summary = dict[str, Any]


def fields(resource: object) -> object:
    """A resource's shape: its sorted keys (a list: its length and its first item's keys)."""
    if isinstance(resource, dict):
        return sorted(resource)
    if isinstance(resource, list):
        return {"items": len(resource), "first": fields(resource[0]) if resource else None}
    return type(resource).__name__


def folded(events: Sequence[str]) -> list[str]:
    """Event names in order, a run of one name folded into `name xN`."""
    out: list[tuple[str, int]] = []
    for event in events:
        if out and out[-1][0] == event:
            out[-1] = (event, out[-1][1] + 1)
        else:
            out.append((event, 1))
    return [name if n == 1 else f"{name} x{n}" for name, n in out]


async def stream_summary(parts: AsyncIterator[StreamPart]) -> Summary:
    """What a `runs.stream` carried: its events, interrupt, last values, streamed text."""
    events: list[str] = []
    text: list[str] = []
    interrupts: list[Any] = []
    where: list[str] = []  # the modes whose parts carried `__interrupt__`
    text_parts = 0
    last_values: Any = None
    async for part in parts:
        events.append(part.event)
        data = part.data
        if isinstance(data, dict) and "__interrupt__" in data:
            # The same interrupt comes in `updates` and in `values`: count it once.
            known = {str(i.get("id")) for i in interrupts if isinstance(i, dict)}
            interrupts += [
                i
                for i in data["__interrupt__"]
                if not isinstance(i, dict) or str(i.get("id")) not in known
            ]
            where.append(part.event)
        if part.event == "values":
            last_values = data
        elif part.event == "messages" and isinstance(data, list) and data:
            chunk = data[0]
            if chunk.get("type") == "AIMessageChunk" and isinstance(chunk.get("content"), str):
                text.append(chunk["content"])
                text_parts += bool(chunk["content"])
    messages = (last_values or {}).get("messages", []) if isinstance(last_values, dict) else []
    return {
        "events": folded(events),
        "interrupt_in": folded(where),
        "interrupt_values": [i.get("value") for i in interrupts],
        "interrupt_fields": [sorted(i) for i in interrupts],
        "last_values_messages": [m.get("type") for m in messages],
        "streamed_text": "".join(text),
        "text_parts": text_parts,
    }


def state_summary(state: dict[str, Any]) -> Summary:
    return {
        "fields": sorted(state),
        "next": state.get("next"),
        "interrupts": len(state.get("interrupts") or []),
        "tasks": [sorted(t) for t in state.get("tasks") or []],
        "messages": [m.get("type") for m in (state.get("values") or {}).get("messages", [])],
        "checkpoint_fields": sorted(state.get("checkpoint") or {}),
        "metadata_step": (state.get("metadata") or {}).get("step"),
    }


def thread_summary(thread: Mapping[str, Any]) -> Summary:
    interrupts = thread.get("interrupts") or {}
    pending = (
        sum(len(v) for v in interrupts.values()) if isinstance(interrupts, dict) else interrupts
    )
    return {
        "fields": sorted(thread),
        "status": thread.get("status"),
        "interrupts": pending,
    }


async def run_sequence(
    client: LangGraphClient, slow: Callable[[bool], Awaitable[None]]
) -> dict[str, Summary]:
    """The sequence against one server: step -> what it showed (or the error it raised)."""
    out: dict[str, Summary] = {}
    user: dict[str, Any] = {"messages": [{"role": "user", "content": PROMPT}]}
    context: dict[str, Any] = {}

    async def step(name: str, body: Callable[[], Awaitable[Summary]]) -> None:
        try:
            out[name] = await body()
        except Exception as exc:  # a step the server does not serve: recorded, the rest goes on
            out[name] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}

    async def search() -> Summary:
        found = await client.assistants.search(graph_id="ask")
        first: Mapping[str, Any] = found[0] if found else {}
        return {
            "count": len(found),
            "fields": sorted(first),
            "assistant_id": first.get("assistant_id"),
            "created_by": (first.get("metadata") or {}).get("created_by"),
        }

    async def create() -> Summary:
        thread = await client.threads.create()
        context["thread"] = thread["thread_id"]
        return thread_summary(thread)

    async def ask() -> Summary:
        parts = client.runs.stream(context["thread"], "ask", input=user, stream_mode=MODES)
        return await stream_summary(parts)

    async def waiting() -> Summary:
        return thread_summary(await client.threads.get(context["thread"]))

    async def waiting_state() -> Summary:
        return state_summary(dict(await client.threads.get_state(context["thread"])))

    async def resume() -> Summary:
        parts = client.runs.stream(
            context["thread"], "ask", command=Command(resume="bench"), stream_mode=MODES
        )
        return await stream_summary(parts)

    async def final_state() -> Summary:
        return state_summary(dict(await client.threads.get_state(context["thread"])))

    async def history() -> Summary:
        states = await client.threads.get_history(context["thread"], limit=100)
        return {
            "checkpoints": len(states),
            "first_fields": sorted(states[0]) if states else None,
            "steps": [(s.get("metadata") or {}).get("step") for s in states],
            "next": [s.get("next") for s in states],
        }

    async def background_join() -> Summary:
        thread = await client.threads.create()
        run = await client.runs.create(thread["thread_id"], "bench", input=user)
        values = await client.runs.join(thread["thread_id"], run["run_id"])
        done = await client.runs.get(thread["thread_id"], run["run_id"])
        return {
            "run_fields": sorted(run),
            "created_status": run.get("status"),
            "joined": fields(values),
            "joined_messages": [m.get("type") for m in (values or {}).get("messages", [])],
            "final_status": done.get("status"),
        }

    async def cancel() -> Summary:
        thread = await client.threads.create()
        context["cancelled_thread"] = thread["thread_id"]
        await slow(True)
        try:
            run = await client.runs.create(thread["thread_id"], "bench", input=user)
            deadline = time.perf_counter() + RUNNING_DEADLINE_S
            seen: list[str] = [run["status"]]
            while seen[-1] != "running" and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)  # polling interval while the run starts
                seen.append((await client.runs.get(thread["thread_id"], run["run_id"]))["status"])
            await client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
            after = await client.runs.get(thread["thread_id"], run["run_id"])
            thread_after = await client.threads.get(thread["thread_id"])
        finally:
            await slow(False)
        return {
            "statuses_before": folded(seen),
            "run_status": after.get("status"),
            "thread_status": thread_after.get("status"),
        }

    async def run_list() -> Summary:
        runs = await client.runs.list(context["thread"])
        return {"runs": len(runs), "statuses": [r.get("status") for r in runs]}

    async def wait() -> Summary:
        thread = await client.threads.create()
        values = await client.runs.wait(thread["thread_id"], "bench", input=user)
        return {
            "fields": fields(values),
            "messages": [m.get("type") for m in (values or {}).get("messages", [])]
            if isinstance(values, dict)
            else None,
        }

    for name, body in [
        ("assistants.search", search),
        ("threads.create", create),
        ("runs.stream (question)", ask),
        ("threads.get (waiting)", waiting),
        ("threads.get_state (waiting)", waiting_state),
        ("runs.stream (Command resume)", resume),
        ("threads.get_state (answered)", final_state),
        ("threads.get_history", history),
        ("runs.create + runs.join", background_join),
        ("runs.cancel (slow model)", cancel),
        ("runs.list", run_list),
        ("runs.wait", wait),
    ]:
        await step(name, body)
    return out


def start_ours(shared: Stack, database: postgres.Database) -> Server:
    path = shared._dir("ours-pg")
    port = free_port()
    env = {
        **shared.env,
        "AGENT_DB": database.url,
        "AGENT_EXTRA_GRAPHS": ",".join(f"{k}={v}" for k, v in GRAPHS.items()),
    }
    argv = [str(VENV_BIN / "react-agent"), "serve", "--port", str(port)]
    return shared._spawn("ours-pg", argv, env, path, port, "/healthz")


def start_aegra(shared: Stack, venv: Path, database: postgres.Database) -> Server:
    path = shared._dir("aegra")
    files = {k: f"{ROOT / v.replace('.', '/')}.py:graph" for k, v in GRAPHS.items()}
    (path / "aegra.json").write_text(json.dumps({"graphs": files}))
    port = free_port()
    env = {
        **shared.env,
        "DATABASE_URL": database.url,
        "AEGRA_CONFIG": str(path / "aegra.json"),
        "LOG_LEVEL": "WARNING",
    }
    argv = [str(venv / "bin" / "uvicorn"), "aegra_api.main:app", "--host", "127.0.0.1"]
    return shared._spawn("aegra", [*argv, "--port", str(port)], env, path, port, "/health")


def start_dev(shared: Stack) -> Server:
    """`langgraph dev`, LangGraph's own server (in-memory), as the reference."""
    path = shared._dir("peer")
    graphs = {k: f"{v}:graph" for k, v in GRAPHS.items()}
    (path / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    port = free_port()
    argv = [str(VENV_BIN / "langgraph"), "dev", "--no-browser", "--no-reload", "--port", str(port)]
    return shared._spawn("langgraph-dev", argv, shared.env, path, port, "/ok")


async def compare(venv: Path | None, token_delay_ms: float, dev: bool) -> dict[str, Any]:
    """Every server, the sequence against each in turn; {server: {step: summary}}."""
    admin, why = await asyncio.to_thread(postgres.admin_url, postgres.configured_url())
    if admin is None:
        raise SystemExit(f"no PostgreSQL: {why}")
    if venv is not None and not (venv / "bin" / "uvicorn").exists():
        raise SystemExit(NO_AEGRA.format(venv=venv))
    count = 1 if venv is None else 2
    databases = [await asyncio.to_thread(postgres.create, admin) for _ in range(count)]
    results: dict[str, Any] = {}
    try:
        async with stack(Plan(results_md=None)) as shared:
            await shared.set_latency(0.0, token_delay_ms)
            servers = {"ours": start_ours(shared, databases[0])}
            if venv is not None:
                servers["aegra"] = start_aegra(shared, venv, databases[1])
            if dev:
                servers["langgraph dev"] = start_dev(shared)
            for server in servers.values():
                await server.wait_healthy(shared.client, timeout_s=120)

            async def slow(on: bool) -> None:
                await shared.set_latency(SLOW_MS if on else 0.0, token_delay_ms)

            for name, server in servers.items():
                log(f"sequence against {name} ({server.url})")
                results[name] = await run_sequence(get_client(url=server.url), slow)
    finally:
        for database in databases:
            try:
                await asyncio.to_thread(postgres.drop, database)
            except psycopg.Error as exc:
                log("could not drop %s: %s", database.name, exc)
    return results


def render(results: dict[str, Any]) -> str:
    """Step by step: what every server showed, each field where they differ marked `!`."""
    names = list(results)
    width = max(len(name) for name in names)
    ours = results["ours"]
    lines: list[str] = []
    agree = dict.fromkeys(names[1:], 0)
    for step in ours:
        shown = {name: results[name].get(step, {"error": "not run"}) for name in names}
        keys = sorted({key for summary in shown.values() for key in summary})
        differing = [k for k in keys if len({json.dumps(s.get(k)) for s in shown.values()}) > 1]
        for name in names[1:]:
            agree[name] += all(shown[name].get(k) == ours[step].get(k) for k in keys)
        lines.append(f"## {step}: " + (f"differs in {differing}" if differing else "same"))
        for key in keys:
            if key not in differing:
                lines.append(f"   {key}: {json.dumps(ours[step].get(key), ensure_ascii=False)}")
                continue
            lines.append(f" ! {key}:")
            for name in names:
                value = json.dumps(shown[name].get(key), ensure_ascii=False)
                lines.append(f"     {name:{width}} : {value}")
        lines.append("")
    for name, n in agree.items():
        lines.append(f"ours and {name}: {n} of {len(ours)} steps the same")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.langgraph_compare", description=__doc__)
    p.add_argument("--aegra-venv", type=Path, default=AEGRA_VENV)
    p.add_argument("--json", type=Path, help="also write the summaries here")
    p.add_argument(
        "--token-delay", type=float, default=5.0, help="ms between the model's streamed chunks"
    )
    p.add_argument("--no-dev", action="store_true", help="leave langgraph dev out")
    p.add_argument("--no-aegra", action="store_true", help="leave Aegra out")
    args = p.parse_args(argv)
    venv = None if args.no_aegra else args.aegra_venv
    results = asyncio.run(compare(venv, args.token_delay, not args.no_dev))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    sys.stdout.write(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
