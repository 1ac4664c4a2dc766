"""What one long reply costs the server's memory, and that its stream stays exact.

A real `react-agent serve` streams a 100,000-character reply in 3-character chunks
(about 33,000 deltas); the server's peak RSS during the run (VmHWM, reset just before
it) may exceed its RSS before the run by at most `GROWTH_LIMIT_KB`, however many
clients read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, text
from tests.service.conftest import Api, Stream, run_body, wait_until
from tests.support.processes import ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

REPLY_CHARS = 100_000
CHUNK = 3
GROWTH_LIMIT_KB = 10 * 1024
READERS = 5


def long_reply(chars: int = REPLY_CHARS) -> str:
    """Text no two stretches of which are alike (a dropped or repeated delta shows)."""
    parts: list[str] = []
    size, n = 0, 0
    while size < chars:
        part = f"第{n:05d}句 lorem ipsum dolor. "
        parts.append(part)
        size += len(part)
        n += 1
    return "".join(parts)[:chars]


def answer_text(stream: Stream) -> str:
    return "".join(e["delta"] for e in stream.of("TEXT_MESSAGE_CONTENT"))


class Memory:
    """The server process's resident memory, from /proc."""

    def __init__(self, server: ServerProcess) -> None:
        self._status = Path(f"/proc/{server.process.pid}/status")
        self._clear_refs = Path(f"/proc/{server.process.pid}/clear_refs")

    def _kb(self, field: str) -> int:
        for line in self._status.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in {self._status}")

    def rss_kb(self) -> int:
        return self._kb("VmRSS")

    def reset_peak(self) -> None:
        self._clear_refs.write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)

    def peak_kb(self) -> int:
        return self._kb("VmHWM")


@pytest.fixture
def memory(server: ServerProcess) -> Memory:
    return Memory(server)


@pytest.fixture
def warmed(api: Api, llm: ScriptedLLM, memory: Memory) -> None:
    """One short and one mid-sized run first: what any first run allocates once (imports,
    caches, connections) is not this test's growth."""
    for chars in (2_000, 20_000):
        thread_id = f"t-warm-{time.monotonic_ns()}"
        llm.script(text(long_reply(chars), chunk_size=CHUNK))
        stream = api.run("weather", run_body(thread_id, ("u1", "warm up")))
        assert stream.last["type"] == "RUN_FINISHED", stream.events[-3:]
        llm.reset()


def growth_kb(memory: Memory, run: Callable[[], Any]) -> tuple[int, Any]:
    """How far the server's RSS peaked above where it stood, while `run()` ran."""
    before = memory.rss_kb()
    memory.reset_peak()
    result = run()
    return memory.peak_kb() - before, result


def test_one_reader_of_a_100000_character_reply_grows_the_server_by_less_than_10_mb(
    api: Api, llm: ScriptedLLM, memory: Memory, thread_id: str, warmed: None
) -> None:
    reply = long_reply()
    llm.script(text(reply, chunk_size=CHUNK))

    grown, stream = growth_kb(
        memory, lambda: api.run("weather", run_body(thread_id, ("u1", "写一篇长文")))
    )

    assert stream.last["type"] == "RUN_FINISHED", stream.events[-3:]
    assert answer_text(stream) == reply
    assert grown < GROWTH_LIMIT_KB, f"RSS grew by {grown} kB"


def test_several_readers_of_a_100000_character_reply_grow_the_server_by_less_than_10_mb(
    api: Api, llm: ScriptedLLM, memory: Memory, server: ServerProcess, thread_id: str, warmed: None
) -> None:
    reply = long_reply()
    llm.script(text(reply, chunk_size=CHUNK))
    body = run_body(thread_id, ("u1", "写一篇长文"))

    def started() -> bool:
        path = f"/api/threads/{thread_id}/runs/{body['runId']}"
        return api.http.get(path).status_code == 200

    def read_all() -> list[Stream]:
        with ThreadPoolExecutor(max_workers=READERS) as pool:
            first = pool.submit(api.run, "weather", body)
            wait_until("the run to start", started)
            readers = [Api(server) for _ in range(READERS - 1)]
            try:
                others = [pool.submit(r.join, thread_id, body["runId"]) for r in readers]
                return [first.result(), *(other.result() for other in others)]
            finally:
                for reader in readers:
                    reader.close()

    grown, streams = growth_kb(memory, read_all)

    for stream in streams:
        assert stream.last["type"] == "RUN_FINISHED", stream.events[-3:]
        assert answer_text(stream) == reply
    assert grown < GROWTH_LIMIT_KB, f"RSS grew by {grown} kB with {READERS} readers"


def test_a_client_that_rejoins_mid_reply_with_last_event_id_gets_the_rest_exactly_once(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    reply = long_reply()
    llm.script(text(reply, chunk_size=CHUNK))
    body = run_body(thread_id, ("u1", "写一篇长文"))
    seen: list[int] = [0]

    def far_enough(event: dict[str, Any]) -> bool:
        if event["type"] == "TEXT_MESSAGE_CONTENT":
            seen[0] += len(event["delta"])
        return seen[0] >= REPLY_CHARS // 3

    first = api.run("weather", body, until=far_enough)
    assert first.last["type"] == "TEXT_MESSAGE_CONTENT"
    last_id = first.ids[-1]
    assert last_id is not None
    rest = api.join(thread_id, body["runId"], last_event_id=last_id)

    assert rest.last["type"] == "RUN_FINISHED", rest.events[-3:]
    assert answer_text(first) + answer_text(rest) == reply
    ids = [*first.ids, *rest.ids]
    assert ids == list(range(1, len(ids) + 1))  # every event once, in order, none missed
