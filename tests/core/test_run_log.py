"""The run log's writer: every event reaches the log, in order, whatever follows it.

Text is written within milliseconds; other events wait a little for company (the next
text, the run's end), and none waits for company that never comes: a tool that works
for minutes after its call started still shows that call at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ag_ui.core import RunStartedEvent, ToolCallStartEvent

from app.core.runs.log import LiveLog, LogWriter
from app.core.storage.backends import open_storage
from app.settings import Settings

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
