"""The run log's writer: every event reaches the log, in order, whatever follows it.

Text is written within milliseconds; other events wait a little for company (the next
text, the run's end), and none waits for company that never comes: a tool that works
for minutes after its call started still shows that call at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ag_ui.core import (
    BaseEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

from app.core.runs.log import TAIL, LiveLog, LogWriter, decode
from app.core.storage.backends import open_storage
from app.core.storage.runs import RunStore
from app.settings import Settings
from tools.secrets import Redactor

DEADLINE_S = 10.0


async def test_events_no_text_or_ending_follows_are_written_all_the_same(tmp_path: Path) -> None:
    async with open_storage(Settings(agent_db=str(tmp_path / "agent.sqlite"))) as storage:
        writer = LogWriter(storage.runs)
        writer.start()
        log = LiveLog("t1", "r1", writer)
        log.emit(RunStartedEvent(thread_id="t1", run_id="r1"))
        log.emit(ToolCallStartEvent(tool_call_id="c1", tool_call_name="get_weather"))
        seen: list[str] = []
        async with asyncio.timeout(DEADLINE_S):
            async for entry in log.follow(storage.runs):
                seen.append(entry.typed().type.value)
                if len(seen) == 2:
                    break
        stored = await storage.runs.events("t1", "r1", 0)
        await writer.stop()

    assert seen == ["RUN_STARTED", "TOOL_CALL_START"]
    assert [seq for seq, _ in stored] == [1, 2]


async def test_pieces_of_one_stream_made_between_two_writes_are_one_event_with_their_text(
    tmp_path: Path,
) -> None:
    async with open_storage(Settings(agent_db=str(tmp_path / "agent.sqlite"))) as storage:
        writer = LogWriter(storage.runs)
        writer.start()
        log = LiveLog("t1", "r1", writer)
        log.emit(RunStartedEvent(thread_id="t1", run_id="r1"))
        log.emit(TextMessageStartEvent(message_id="m1", role="assistant"))
        for i in range(1000):  # one burst: the writer takes it whole
            log.emit(TextMessageContentEvent(message_id="m1", delta=f"{i},"))
        log.emit(TextMessageEndEvent(message_id="m1"))
        seen = await _all(log, storage.runs, until="TEXT_MESSAGE_END")
        stored = await storage.runs.events("t1", "r1", 0)
        await writer.stop()

    assert [event.type.value for _, event in seen] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    assert seen[2][1].delta == "".join(f"{i}," for i in range(1000))  # type: ignore[attr-defined]
    assert [seq for seq, _ in seen] == [seq for seq, _ in stored] == [1, 2, 3, 4]


async def test_pieces_that_come_while_a_write_is_under_way_are_a_new_event_after_it(
    tmp_path: Path,
) -> None:
    async with open_storage(Settings(agent_db=str(tmp_path / "agent.sqlite"))) as storage:
        writer = LogWriter(storage.runs)
        writer.start()
        log = LiveLog("t1", "r1", writer)
        log.emit(TextMessageStartEvent(message_id="m1", role="assistant"))
        text = ""
        for i in range(200):
            log.emit(TextMessageContentEvent(message_id="m1", delta=f"{i};"))
            text += f"{i};"
            await asyncio.sleep(0.001)  # the writer takes some, then more come
        log.emit(TextMessageEndEvent(message_id="m1"))
        seen = await _all(log, storage.runs, until="TEXT_MESSAGE_END")
        stored = await storage.runs.events("t1", "r1", 0)
        await writer.stop()

    pieces = [event for _, event in seen if isinstance(event, TextMessageContentEvent)]
    assert "".join(piece.delta for piece in pieces) == text
    assert 1 < len(pieces) < 200
    assert [seq for seq, _ in seen] == list(range(1, len(seen) + 1))
    assert [(seq, decode(data)) for seq, data in stored] == seen


async def test_a_reader_behind_the_events_kept_in_memory_gets_the_older_ones_from_the_store(
    tmp_path: Path,
) -> None:
    async with open_storage(Settings(agent_db=str(tmp_path / "agent.sqlite"))) as storage:
        writer = LogWriter(storage.runs)
        writer.start()
        log = LiveLog("t1", "r1", writer)
        calls = 3 * TAIL
        for i in range(calls):  # events that do not merge: each its own number
            log.emit(ToolCallStartEvent(tool_call_id=f"c{i}", tool_call_name="get_weather"))
            log.emit(ToolCallEndEvent(tool_call_id=f"c{i}"))
        async with asyncio.timeout(DEADLINE_S):
            async for entry in log.follow(storage.runs):  # once it is read, it is written
                if entry.seq == 2 * calls:
                    break
        kept = len(log.entries)
        log.emit(RunFinishedEvent(thread_id="t1", run_id="r1"))
        log.close()
        seen = await _all(log, storage.runs, until="RUN_FINISHED")
        rejoined = await _all(log, storage.runs, until="RUN_FINISHED", after=100)
        await writer.stop()

    assert kept <= TAIL
    assert [seq for seq, _ in seen] == list(range(1, 2 * calls + 2))
    assert [seq for seq, _ in rejoined] == list(range(101, 2 * calls + 2))


async def test_a_secret_split_across_pieces_is_masked_once_they_are_one_event(
    tmp_path: Path,
) -> None:
    secret = "sk-test-SECRET-9f8e7d6c5b4a"
    async with open_storage(Settings(agent_db=str(tmp_path / "agent.sqlite"))) as storage:
        writer = LogWriter(storage.runs)
        writer.start()
        log = LiveLog("t1", "r1", writer, redact=Redactor([secret]))
        log.emit(TextMessageStartEvent(message_id="m1", role="assistant"))
        said = f"the key is {secret} and that is all"
        for i in range(0, len(said), 2):
            log.emit(TextMessageContentEvent(message_id="m1", delta=said[i : i + 2]))
        log.emit(TextMessageEndEvent(message_id="m1"))
        seen = await _all(log, storage.runs, until="TEXT_MESSAGE_END")
        stored = await storage.runs.events("t1", "r1", 0)
        await writer.stop()

    shown = "".join(e.delta for _, e in seen if isinstance(e, TextMessageContentEvent))
    assert shown.startswith("the key is ") and shown.endswith(" and that is all")
    assert not any(part in shown for part in ("SECRET", "9f8e7d6c"))
    assert not any("SECRET" in data for _, data in stored)


async def _all(
    log: LiveLog, store: RunStore, *, until: str, after: int = 0
) -> list[tuple[int, BaseEvent]]:
    seen: list[tuple[int, BaseEvent]] = []
    async with asyncio.timeout(DEADLINE_S):
        async for entry in log.follow(store, after):
            seen.append((entry.seq, entry.typed()))
            if entry.typed().type.value == until:
                break
    return seen
