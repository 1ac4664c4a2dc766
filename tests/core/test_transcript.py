"""A thread's transcript (`app.core.runs.transcript`) on both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from app.core.runs.transcript import ThreadTranscript
from app.core.storage.backends import open_storage
from app.settings import Settings


@pytest.fixture(params=["sqlite", "postgres"])
async def transcript(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ThreadTranscript]:
    if request.param == "sqlite":
        agent_db = str(tmp_path / "agent.sqlite")
    else:
        agent_db = request.getfixturevalue("postgres_url")
    async with open_storage(Settings(agent_db=agent_db)) as storage:
        yield ThreadTranscript(storage.runs, storage.saver.serde)


def turn(n: int) -> list[HumanMessage | AIMessage | ToolMessage]:
    call = {"id": f"c{n}", "name": "get_weather", "args": {"location": "北京"}}
    return [
        HumanMessage(f"第{n}个问题", id=f"u{n}"),
        AIMessage("", tool_calls=[call], id=f"a{n}"),
        ToolMessage("晴", tool_call_id=f"c{n}", artifact={"kind": "forecast"}, id=f"t{n}"),
        AIMessage(f"第{n}个回答", id=f"r{n}", response_metadata={"stopped": n == 2}),
    ]


async def test_kept_messages_come_back_as_they_were_before_the_state_s(
    transcript: ThreadTranscript,
) -> None:
    await transcript.keep("t1", [*turn(1), *turn(2)])

    history = await transcript.history("t1", turn(3))

    assert history == [*turn(1), *turn(2), *turn(3)]
    assert history[2].artifact == {"kind": "forecast"}, "a tool result keeps its chart data"
    assert await transcript.holds("t1", ["u1", "u2", "u3"]) == {"u1", "u2"}


async def test_messages_a_rollback_brought_back_into_the_state_count_where_the_state_has_them(
    transcript: ThreadTranscript,
) -> None:
    # The rolled-back run had handed turn 2 over; the checkpoint before it still holds it.
    await transcript.keep("t1", [*turn(1), *turn(2)])
    state = [*turn(2), *turn(3)]

    history = await transcript.history("t1", state)

    assert [m.id for m in history] == [m.id for m in [*turn(1), *turn(2), *turn(3)]]
    # Handed over again by the next cut, turn 2 stays where it was kept first.
    await transcript.keep("t1", turn(2))
    assert await transcript.history("t1", turn(3)) == [*turn(1), *turn(2), *turn(3)]


async def test_a_thread_without_a_transcript_is_its_state(transcript: ThreadTranscript) -> None:
    assert await transcript.history("t9", turn(1)) == turn(1)
    assert await transcript.holds("t9", ["u1"]) == set()
