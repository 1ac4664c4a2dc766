"""What one long streamed reply costs the run log and the model call (issue 28, point 9).

    python -m bench.stream_cost [--chars 100000] [--chunk 3] [--burst 16] [--rounds 3]

The log: a reply of `--chars` characters in `--chunk`-character deltas goes through a
`LiveLog` and its `LogWriter` on the service's own SQLite storage, `--burst` deltas
between two turns of the event loop (how fast a model streams: 1 is a token per turn), a
reader following it to the end. Once with the log module of `--base` (git, the code
before coalescing), once with this one, taking turns `--rounds` times. Per variant: CPU
ms of the whole reply and per delta, rows written, events a reader received, events
held in memory at the end, and the traced peak of Python memory.

The model call: `OpenAICompatibleChat.ainvoke` with a streaming handler (as LangGraph's
"messages" mode attaches one) on a stream of as many prebuilt chunks, once through
LangChain's own streaming (every chunk kept to the end) and once through the merging
`_agenerate`: CPU ms and traced peak.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tracers._streaming import _StreamingCallbackHandler

from app.core.runs import log as new_log
from app.core.storage.backends import open_storage
from app.settings import Settings
from graphs.model import OpenAICompatibleChat

ROOT = Path(__file__).resolve().parents[1]
UNTRACED: dict[str, Any] = {"traced": False}


def old_log(ref: str) -> ModuleType:
    """app/core/runs/log.py as it was at `ref`, as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:app/core/runs/log.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("bench_old_log", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(source, f"{ref}:app/core/runs/log.py", "exec"), module.__dict__)
    return module


async def log_once(
    module: ModuleType, chars: int, chunk: int, burst: int, *, traced: bool
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_storage(Settings(agent_db=str(Path(tmp) / "agent.sqlite"))) as storage:
            writer = module.LogWriter(storage.runs)
            writer.start()
            log = module.LiveLog("t1", "r1", writer)
            received = 0

            async def read() -> None:
                nonlocal received
                async for _ in log.follow(storage.runs):
                    received += 1

            reader = asyncio.create_task(read())
            if traced:
                tracemalloc.start()
            started = time.process_time()
            log.emit(RunStartedEvent(thread_id="t1", run_id="r1"))
            log.emit(TextMessageStartEvent(message_id="m1", role="assistant"))
            for n in range(-(-chars // chunk)):
                log.emit(TextMessageContentEvent(message_id="m1", delta="字" * chunk))
                if n % burst == burst - 1:
                    await asyncio.sleep(0)
            log.emit(TextMessageEndEvent(message_id="m1"))
            log.emit(RunFinishedEvent(thread_id="t1", run_id="r1"))
            log.close()
            await reader
            cpu = time.process_time() - started
            _, peak = tracemalloc.get_traced_memory() if traced else (0, 0)
            tracemalloc.stop()
            await writer.stop()
            rows = len(await storage.runs.events("t1", "r1", 0))
    deltas = -(-chars // chunk)
    return {
        "cpu_ms": cpu * 1000,
        "us_per_delta": cpu * 1e6 / deltas,
        "rows": rows,
        "received": received,
        "held": len(log.entries),
        "peak_mib": peak / 2**20,
    }


class _Tokens(_StreamingCallbackHandler, BaseCallbackHandler):
    def on_llm_new_token(self, token: Any, **kwargs: Any) -> None:
        pass

    def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
        return output

    def tap_output_iter(self, run_id: Any, output: Any) -> Any:
        return output


class _Prebuilt(OpenAICompatibleChat):
    """The service's model class on a stream of `n` prebuilt chunks (no HTTP)."""

    n: int = 0
    merged: bool = True

    def _should_stream(self, *, async_api: bool, run_manager: Any = None, **kwargs: Any) -> bool:
        if self.merged:
            return super()._should_stream(async_api=async_api, run_manager=run_manager, **kwargs)
        return BaseChatModel._should_stream(
            self, async_api=async_api, run_manager=run_manager, **kwargs
        )

    async def _astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for i in range(self.n):
            last = i == self.n - 1
            info = {"finish_reason": "stop"} if last else None
            message = AIMessageChunk(content="字字字", id="chatcmpl-1")
            yield ChatGenerationChunk(message=message, generation_info=info)


async def model_once(merged: bool, chars: int, chunk: int, *, traced: bool) -> dict[str, float]:
    model = _Prebuilt(api_key="sk-bench", n=-(-chars // chunk), merged=merged)
    if traced:
        tracemalloc.start()
    started = time.process_time()
    reply = await model.ainvoke([HumanMessage("写")], {"callbacks": [_Tokens()]})
    cpu = time.process_time() - started
    _, peak = tracemalloc.get_traced_memory() if traced else (0, 0)
    tracemalloc.stop()
    assert len(reply.content) == model.n * 3
    return {"cpu_ms": cpu * 1000, "us_per_delta": cpu * 1e6 / model.n, "peak_mib": peak / 2**20}


def table(title: str, runs: dict[str, list[dict[str, float]]]) -> None:
    print(f"\n{title}\n")
    keys = list(next(iter(runs.values()))[0])
    print("| variant | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, rounds in runs.items():
        cells = [f"{statistics.median(r[key] for r in rounds):.1f}" for key in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")


async def main(args: argparse.Namespace) -> None:
    variants = {"before": old_log(args.base), "now": new_log}
    logs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    models: dict[str, list[dict[str, float]]] = {"langchain's streaming": [], "merged": []}
    for _ in range(args.rounds):  # timed untraced (tracemalloc slows Python severalfold)
        for name, module in variants.items():
            logs[name].append(
                await log_once(module, args.chars, args.chunk, args.burst, **UNTRACED)
            )
        for name, merged in (("langchain's streaming", False), ("merged", True)):
            models[name].append(await model_once(merged, args.chars, args.chunk, **UNTRACED))
    for name, module in variants.items():
        traced = await log_once(module, args.chars, args.chunk, args.burst, traced=True)
        for r in logs[name]:
            r["peak_mib"] = traced["peak_mib"]
    for name, merged in (("langchain's streaming", False), ("merged", True)):
        traced = await model_once(merged, args.chars, args.chunk, traced=True)
        for r in models[name]:
            r["peak_mib"] = traced["peak_mib"]
    print(
        f"{args.chars} characters in {args.chunk}-character deltas, {args.burst} a loop turn,"
        f" median of {args.rounds} rounds; Python {sys.version.split()[0]}"
    )
    table("run log (LiveLog + LogWriter on SQLite, one reader)", logs)
    table("model call (ainvoke with a streaming handler)", models)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=3)
    parser.add_argument("--burst", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--base", default="2a41f41", help="git ref of the log before")
    asyncio.run(main(parser.parse_args()))
