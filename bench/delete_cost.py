"""What making a delete reach the disk costs on SQLite (issue 28, point 10).

    python -m bench.delete_cost [--threads 60] [--deletes 20]

One database of `--threads` threads is made with the service's own SQLite storage
(`app.core.storage`): per thread `CHECKPOINTS` checkpoints, each holding the thread's
messages so far (`MESSAGE_CHARS` characters each, the next one written as a task write
too) and its run's event log (`EVENTS` events). Three copies of the file are then opened
side by side and `--deletes` threads deleted from each as `DELETE /api/threads/{id}` does
(the saver's `adelete_thread`, the run store's `forget_thread`), the copies taking turns
delete by delete (order rotated), so they share the machine's noise:

- `before`: `secure_delete=OFF`, no WAL truncation (the code before; builds of SQLite
  without SQLITE_SECURE_DELETE, such as python.org's, default to OFF);
- `zeroed`: `secure_delete=ON`, no truncation;
- `now`: `secure_delete=ON` and the run store's `scrub()` (the WAL checkpointed into the
  file and truncated), what the service does.

Then `react-agent prune`'s compaction (`compact()`: VACUUM and a truncation) is timed
on each copy, with the file's size before and after. Times are wall milliseconds per
delete (median, p90, max); the machine line says what they ran on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from app.core.storage.backends import open_checkpointer
from app.core.storage.sqlite.connection import SqliteConnection, open_sqlite
from app.core.storage.sqlite.runs import SqliteRunStore, open_sqlite_run_store
from app.core.storage.sqlite.saver import WriterSqliteSaver

CHECKPOINTS = 10
MESSAGE_CHARS = 400
EVENTS = 60
FILLER = "北京今天多云，最高气温二十三度，东南风三级，夜间有小雨。"
VARIANTS = ("before", "zeroed", "now")


@dataclass
class Copy:
    """One copy of the database, opened as the service opens it."""

    name: str
    path: Path
    saver: WriterSqliteSaver
    store: SqliteRunStore
    times_ms: list[float] = field(default_factory=list)


def _text(n: int) -> str:
    return (f"{n}: " + FILLER * (MESSAGE_CHARS // len(FILLER) + 1))[:MESSAGE_CHARS]


@asynccontextmanager
async def _opened(
    path: Path,
) -> AsyncIterator[tuple[WriterSqliteSaver, SqliteRunStore, SqliteConnection]]:
    async with AsyncExitStack() as stack:
        writer = await stack.enter_async_context(open_sqlite(path))
        saver = await stack.enter_async_context(open_checkpointer(path, writer=writer))
        store = await stack.enter_async_context(open_sqlite_run_store(path, writer=writer))
        assert isinstance(saver, WriterSqliteSaver)
        yield saver, store, writer


async def populate(path: Path, threads: int) -> None:
    async with _opened(path) as (saver, store, _):
        for t in range(threads):
            thread_id = f"thread-{t:04d}"
            parent: str | None = None
            messages: list[HumanMessage | AIMessage] = []
            for n in range(CHECKPOINTS):
                kind = HumanMessage if n % 2 == 0 else AIMessage
                messages.append(kind(_text(n), id=f"{thread_id}-m{n}"))
                checkpoint = empty_checkpoint()
                checkpoint["id"] = str(uuid6())
                checkpoint["channel_values"] = {"messages": list(messages)}
                checkpoint["channel_versions"] = {"messages": n + 1}
                configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
                if parent is not None:
                    configurable["checkpoint_id"] = parent
                saved = await saver.aput(
                    {"configurable": configurable},
                    checkpoint,
                    {"source": "loop", "step": n},
                    {"messages": n + 1},
                )
                await saver.aput_writes(saved, [("messages", [messages[-1]])], f"task-{n}")
                parent = checkpoint["id"]
            events = [
                (
                    thread_id,
                    "run-1",
                    seq,
                    f'{{"type":"TEXT_MESSAGE_CONTENT","delta":"{_text(seq)[:80]}"}}',
                )
                for seq in range(1, EVENTS + 1)
            ]
            await store.write(events)
    with sqlite3.connect(path) as conn:  # one file to copy: the WAL into it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def delete(copy: Copy, thread_id: str) -> None:
    start = time.perf_counter()
    await copy.saver.adelete_thread(thread_id)
    await copy.store.forget_thread(thread_id)
    if copy.name == "now":
        await copy.store.scrub()
    copy.times_ms.append((time.perf_counter() - start) * 1000)


def _summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.2f} | {p90:.2f} | {ordered[-1]:.2f}"


async def measure(threads: int, deletes: int, workdir: Path) -> None:
    source = workdir / "source.sqlite"
    await populate(source, threads)
    size = source.stat().st_size
    async with AsyncExitStack() as stack:
        copies: list[Copy] = []
        for name in VARIANTS:
            path = workdir / f"{name}.sqlite"
            shutil.copyfile(source, path)
            os.chmod(path, 0o600)  # as the service made it
            saver, store, writer = await stack.enter_async_context(_opened(path))
            secure = "OFF" if name == "before" else "ON"
            await saver.conn.execute(f"PRAGMA secure_delete={secure}")
            pragma = f"PRAGMA secure_delete={secure}"
            await writer.call(partial(_execute, pragma))
            copies.append(Copy(name, path, saver, store))
        for i in range(deletes):
            shift = i % len(copies)
            for copy in copies[shift:] + copies[:shift]:
                await delete(copy, f"thread-{i:04d}")
        print(
            f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores,"
            f" {platform.system()} {platform.release()}, SQLite {sqlite3.sqlite_version};"
            f" load average at the end {[round(x, 2) for x in os.getloadavg()]}"
        )
        print(
            f"- database: {threads} threads x {CHECKPOINTS} checkpoints, {size / 2**20:.1f} MiB;"
            f" {deletes} threads deleted from each copy\n"
        )
        print("| variant | ms a delete: median | p90 | max |")
        print("|---|---:|---:|---:|")
        for copy in copies:
            print(f"| {copy.name} | {_summary(copy.times_ms)} |")
        print("\n| variant | prune's compaction (VACUUM + truncation) ms | file before | after |")
        print("|---|---:|---:|---:|")
        for copy in copies:
            before = copy.path.stat().st_size + _wal(copy.path)
            start = time.perf_counter()
            await copy.store.compact()
            took = (time.perf_counter() - start) * 1000
            after = copy.path.stat().st_size + _wal(copy.path)
            print(
                f"| {copy.name} | {took:.1f} | {before / 2**20:.2f} MiB | {after / 2**20:.2f} MiB |"
            )


def _execute(sql: str, conn: sqlite3.Connection) -> None:
    conn.execute(sql)


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.delete_cost", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--threads", type=int, default=60)
    parser.add_argument("--deletes", type=int, default=20)
    args = parser.parse_args()
    if not 0 < args.deletes <= args.threads:
        parser.error("--deletes must be between 1 and --threads")
    with tempfile.TemporaryDirectory(prefix="delete-cost-") as workdir:
        asyncio.run(measure(args.threads, args.deletes, Path(workdir)))


if __name__ == "__main__":
    main()
