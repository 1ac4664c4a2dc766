"""The run core in-process on a real SQLite file: shutdown refusals and the log's ordering.

Over HTTP the shutdown window is too short to hit (uvicorn stops listening at the
signal), so the refusal is checked at the service, the one entry point every client
uses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from ag_ui.core import RunErrorEvent, RunFinishedEvent, UserMessage
from langchain_core.messages import AIMessage

from app.core.errors import Unavailable
from app.core.runs.prepare import CALL_INTERRUPTED
from app.core.runs.service import open_service
from app.core.runs.threads import run_config
from app.core.storage.runs import Admission, RunEnd, RunError
from app.settings import Settings
from tests.doubles.llm import ScriptedLLM, call, hang, text, tool_call, tool_calls
from tests.doubles.open_meteo import FakeOpenMeteo


def _message(text_: str) -> list[UserMessage]:
    return [UserMessage(id=f"m-{text_}", content=text_)]


async def test_a_service_that_is_shutting_down_refuses_new_runs_with_503() -> None:
    async with open_service(Settings(), only="weather") as service:
        service.begin_shutdown()

        with pytest.raises(Unavailable) as refused:
            await service.start_run(
                "weather", thread_id="t1", run_id="r1", messages=_message("你好")
            )

    assert (refused.value.status, refused.value.code) == (503, "shutting_down")


async def test_a_thread_is_free_again_before_its_run_shows_its_last_event(
    llm: ScriptedLLM,
) -> None:
    llm.script(text("一。"), text("二。"))
    async with open_service(Settings(), only="weather") as service:
        first = await service.start_run(
            "weather", thread_id="t2", run_id="r1", messages=_message("一")
        )
        async for event in first.events():
            if isinstance(event, RunFinishedEvent):
                # The client may answer at once: the thread must take the next run now.
                second = await service.start_run(
                    "weather", thread_id="t2", run_id="r2", messages=_message("二")
                )
        result = await second.result()

    assert result.error is None
    assert [m.content for m in result.messages] == ["二。"]


async def test_closing_the_service_leaves_a_long_run_active_for_the_next_start(
    llm: ScriptedLLM,
) -> None:
    llm.script(hang(30, partial="我"), text("好了。"))
    settings = Settings(agent_shutdown_grace_s=0.2)
    async with open_service(settings, only="weather") as service:
        run = await service.start_run(
            "weather", thread_id="t3", run_id="r1", messages=_message("慢")
        )
        async for event in run.events():
            if event.type == "TEXT_MESSAGE_CONTENT":
                break

    llm.reset()
    llm.script(text("好了。"))
    async with open_service(settings, only="weather", recover=True) as service:
        events = [entry.typed() async for entry in await service.join("t3", "r1")]
        [record] = await service.runs("t3")
        view = await service.thread("t3")

    assert [event.type for event in events][:1] == ["RUN_STARTED"]
    assert isinstance(events[-1], RunFinishedEvent)
    assert not any(isinstance(event, RunErrorEvent) for event in events)
    assert record.status == "success"
    assert view.messages[-1].content == "好了。"


async def test_a_left_run_is_not_resumed_once_other_runs_have_moved_its_thread_on(
    llm: ScriptedLLM,
) -> None:
    llm.script(hang(30, partial="我"))
    settings = Settings(agent_shutdown_grace_s=0.1)
    async with open_service(settings, only="weather") as service:
        run = await service.start_run(
            "weather", thread_id="t4", run_id="old", messages=_message("旧问题")
        )
        async for event in run.events():
            if event.type == "TEXT_MESSAGE_CONTENT":
                break
    llm.reset()
    async with open_service(settings, only="weather") as service:
        # Another writer of the thread's checkpoints (no run can start: "old" holds it).
        await service.graphs["weather"].aupdate_state(
            run_config("t4", "weather"), {"messages": [AIMessage(content="新回答。")]}
        )

    async with open_service(settings, only="weather", recover=True) as service:
        events = [entry.typed() async for entry in await service.join("t4", "old")]
        old = await service.run_record("t4", "old")
        view = await service.thread("t4")

    assert isinstance(events[-1], RunErrorEvent)
    assert events[-1].code == "not_resumable"
    assert (old.status, old.error and old.error.code) == ("error", "not_resumable")
    assert view.messages[-1].content == "新回答。"
    assert llm.requests == []  # the old run asked nothing more


async def test_a_call_left_by_a_run_that_ended_unexpectedly_is_not_blamed_on_the_user(
    llm: ScriptedLLM, meteo: FakeOpenMeteo
) -> None:
    meteo.hang_forecast(30)
    llm.script(tool_call("get_weather", {"location": "北京"}))
    settings = Settings(agent_shutdown_grace_s=0.1)
    async with open_service(settings, only="weather") as service:
        run = await service.start_run(
            "weather", thread_id="t5", run_id="old", messages=_message("北京天气")
        )
        async for event in run.events():
            if event.type == "TOOL_CALL_END":
                break
        await _until(lambda: meteo.forecast_requests)  # the tool waits on the forecast now
    meteo.reset()
    llm.script(text("好的。"))
    async with open_service(settings, only="weather") as service:  # no recovery here
        # Its record says it ended (as a process that failed mid-run records it); its
        # checkpoint still has the call it never answered.
        failed = RunError(code="internal_error", message="内部错误")
        await service.store.write([], [RunEnd("t5", "old", "error", time.time(), failed)])
        newer = await service.start_run(
            "weather", thread_id="t5", run_id="new", messages=_message("算了")
        )
        assert (await newer.result()).error is None

    [tool] = [m for m in llm.last_request["messages"] if m["role"] == "tool"]
    assert tool["content"] == CALL_INTERRUPTED
    assert "用户" not in tool["content"]


async def test_a_message_checked_before_another_process_s_run_stopped_at_a_question_is_refused(
    llm: ScriptedLLM,
) -> None:
    # Two processes on one database (two services here). B reads the thread's state for
    # a new message while A's run streams; A's run then stops at a question and ends
    # before B's admission. B must not run past the question on what it read.
    llm.script(
        tool_calls([call("ask_input", {"message": "哪个城市？"})], chunk_size=1, delay_s=0.02)
    )
    settings = Settings()
    async with (
        open_service(settings, only="weather") as a,
        open_service(settings, only="weather") as b,
    ):
        first = await a.start_run("weather", thread_id="t6", run_id="r1", messages=_message("天气"))
        async for event in first.events():
            if event.type == "TOOL_CALL_START":
                break  # r1 is asking the model: no question in the thread yet
        admit = b.store.admit

        async def admit_once_r1_ended(*args: Any, **kwargs: Any) -> Admission:
            async with asyncio.timeout(10):
                async for _ in first.events():
                    pass  # to r1's last event: its end is recorded by then
            assert (await a.run_record("t6", "r1")).status == "interrupted"
            return await admit(*args, **kwargs)

        b.store.admit = admit_once_r1_ended  # type: ignore[method-assign]
        second = await b.start_run(
            "weather", thread_id="t6", run_id="r2", messages=_message("算了")
        )
        result = await second.result()
        r1 = await b.run_record("t6", "r1")
        view = await b.thread("t6")

    assert r1.status == "interrupted"
    assert result.error is not None and result.error.code == "awaiting_answers"
    assert [i.message for i in view.interrupts] == ["哪个城市？"]
    assert len(llm.requests) == 1  # r2 never reached the model


async def test_a_run_cancelled_while_the_database_admits_it_ends_cancelled_without_running(
    llm: ScriptedLLM,
) -> None:
    llm.script(text("不该出现。"))
    async with open_service(Settings(), only="weather") as service:
        admit = service.store.admit
        admitting, cancelled = asyncio.Event(), asyncio.Event()

        async def admit_after_the_cancel(*args: Any, **kwargs: Any) -> Admission:
            admitting.set()
            await cancelled.wait()
            return await admit(*args, **kwargs)

        service.store.admit = admit_after_the_cancel  # type: ignore[method-assign]
        async with asyncio.timeout(10):
            starting = asyncio.create_task(
                service.start_run("weather", thread_id="t7", run_id="r1", messages=_message("嗨"))
            )
            await admitting.wait()  # the run is held here, it has no task yet
            await service.cancel_run("t7", "r1")
            cancelled.set()
            result = await (await starting).result()
        record = await service.run_record("t7", "r1")

    assert result.error is not None and result.error.code == "cancelled"
    assert record.status == "cancelled"
    assert llm.requests == []  # it never reached the model


async def _until(check: Callable[[], object]) -> None:
    """Poll `check` (state another thread records: nothing to await) with a deadline."""
    async with asyncio.timeout(10):
        while not check():  # noqa: ASYNC110 - the double records requests on its own thread
            await asyncio.sleep(0.02)
