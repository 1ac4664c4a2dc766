"""Following one run on the terminal: its events drawn to its end, Ctrl-C to stop it.

Ctrl-C (SIGINT) while a run streams asks the run itself to stop (`Following.stop()`:
the server's cancel route, or the in-process run's `cancel()`) and keeps drawing
until its events end with RUN_ERROR `cancelled`. That end shows as "已停止", not as
an error; the text streamed so far stays on screen, and the run keeps it in the
thread. A second Ctrl-C stops waiting at once, and so does a stop that cannot be
asked (an error line says why): the run then goes on where it runs.

A joined run is replayed from its first event after the thread's history was drawn;
`Drawn` skips what that history already showed (the run's finished steps).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import termios
from collections.abc import Iterator, Sequence
from contextlib import aclosing, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Final, Literal

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Interrupt,
    Message,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.core.events import RunFinishedInterruptOutcome

from app.cli.agent import CANCELLED, Following
from app.cli.terminal import Renderer
from app.core.errors import ServiceError

logger = logging.getLogger(__name__)

REASONING_SUFFIX: Final = ":reasoning"  # `<reply id>:reasoning[:<n>]`, the reply's reasoning
STREAM_CUT: Final = "运行中断：事件流在结束前断开"
CANNOT_STOP: Final = "无法停止运行：{message}"

_REASONING_EVENTS = (
    ReasoningStartEvent,
    ReasoningMessageStartEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningEndEvent,
)


# `failed`: the request failed (refused, or the server could not be reached or read).
Kind = Literal["done", "interrupted", "error", "failed", "stopped", "needs_answer"]


@dataclass(slots=True)
class Ending:
    """How a run (or a run and its follow-up resumes) ended."""

    kind: Kind
    interrupts: list[Interrupt] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Drawn:
    """What a thread's history drew: assistant texts, tool calls, tool results (by id),
    and the replies whose reasoning it showed."""

    texts: frozenset[str] = frozenset()
    calls: frozenset[str] = frozenset()
    results: frozenset[str] = frozenset()
    thoughts: frozenset[str] = frozenset()

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Drawn:
        assistants = [m for m in messages if isinstance(m, AssistantMessage)]
        return cls(
            texts=frozenset(m.id for m in assistants if m.content),
            calls=frozenset(call.id for m in assistants for call in m.tool_calls or ()),
            results=frozenset(m.tool_call_id for m in messages if isinstance(m, ToolMessage)),
            thoughts=frozenset(
                m.id.partition(REASONING_SUFFIX)[0]
                for m in messages
                if isinstance(m, ReasoningMessage)
            ),
        )

    def covers(self, event: BaseEvent) -> bool:
        """Whether a replayed `event` is one the history already showed."""
        if isinstance(event, TextMessageStartEvent | TextMessageContentEvent | TextMessageEndEvent):
            # A text after tool calls in the same reply is `<message id>:<n>`.
            return event.message_id.partition(":")[0] in self.texts
        if isinstance(event, _REASONING_EVENTS):
            # The history shows a reply's reasoning whole, its parts (`:reasoning:2`) too.
            return event.message_id.partition(REASONING_SUFFIX)[0] in self.thoughts
        if isinstance(event, ToolCallStartEvent | ToolCallArgsEvent):
            return event.tool_call_id in self.calls
        if isinstance(event, ToolCallEndEvent | ToolCallResultEvent):
            return event.tool_call_id in self.results
        return False


@contextmanager
def _no_echo() -> Iterator[None]:
    """Keys typed while a run streams are not echoed (a `^C` would break the live view).

    Ctrl-C still raises SIGINT; prompt_toolkit sets its own mode for each prompt.
    """
    fd = sys.stdin.fileno() if sys.stdin.isatty() else -1
    if fd < 0:
        yield
        return
    saved = termios.tcgetattr(fd)
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


async def follow(run: Following, renderer: Renderer, *, drawn: Drawn | None = None) -> Ending:
    """Draw `run` to its end; Ctrl-C meanwhile stops it (see the module docstring)."""
    loop = asyncio.get_running_loop()
    reading = asyncio.create_task(_draw(run, renderer, drawn or Drawn()))
    stopping: list[asyncio.Task[None]] = []

    def interrupt() -> None:
        if stopping:
            reading.cancel()  # the second Ctrl-C: stop waiting for the run's end
        else:
            stopping.append(asyncio.create_task(_stop(run, renderer, reading)))

    handled = False
    with suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
        loop.add_signal_handler(signal.SIGINT, interrupt)
        handled = True
    try:
        with _no_echo():
            return await reading
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves, not the run by Ctrl-C
        renderer.stopped()
        return Ending("stopped")
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
        for task in stopping:
            task.cancel()  # a stop still being asked when the run has ended anyway


async def _stop(run: Following, renderer: Renderer, reading: asyncio.Task[Ending]) -> None:
    """Ask `run` to stop; if that cannot be asked, stop reading it."""
    try:
        await run.stop()
    except ServiceError as exc:
        logger.warning("could not stop the run: %s", exc.message)
        renderer.close()
        renderer.error(CANNOT_STOP.format(message=exc.message))
        reading.cancel()


async def _draw(run: Following, renderer: Renderer, drawn: Drawn) -> Ending:
    """Render the run's events (skipping what `drawn` covers); how it ended."""
    ending: Ending | None = None
    try:
        async with aclosing(run.events()) as events:
            async for event in events:
                if drawn.covers(event):
                    continue
                if isinstance(event, RunErrorEvent) and event.code == CANCELLED:
                    renderer.stopped()  # the stop asked for (here or by another client)
                    ending = Ending("stopped")
                    continue
                renderer.event(event)
                if isinstance(event, RunFinishedEvent):
                    outcome = event.outcome
                    if isinstance(outcome, RunFinishedInterruptOutcome) and outcome.interrupts:
                        ending = Ending("interrupted", list(outcome.interrupts))
                    else:
                        ending = Ending("done")
                elif isinstance(event, RunErrorEvent):
                    ending = Ending("error")
    except ServiceError as exc:
        renderer.close()
        renderer.error(exc.message)
        return Ending("failed")
    finally:
        renderer.close()  # no live view outlives its run (Ctrl-C, a bug)
    if ending is None:
        renderer.error(STREAM_CUT)
        return Ending("error")
    return ending
