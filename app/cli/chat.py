"""A terminal conversation with one agent: runs, interrupts answered, Ctrl-C, leaving.

The session talks to an `Agent` (`app.cli.agent`: in-process or over HTTP); both
yield the same AG-UI events, which go to the one renderer (`app.cli.terminal`).
Interrupts that end a run are asked with `app.cli.asking` and answered in one resume;
a refused answer asks again. Ctrl-C while a run streams stops that run and keeps
the thread usable.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import termios
import uuid
from collections.abc import Iterator, Sequence
from contextlib import aclosing, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Final, Literal

from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunErrorEvent,
    RunFinishedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome

from app.cli.agent import Agent
from app.cli.asking import EXIT_COMMANDS, Asker, Leave, payload_of
from app.cli.terminal import Renderer
from app.core.errors import Conflict, NotFound, ServiceError

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_NEEDS_ANSWER: Final = 3
EXIT_STOPPED: Final = 130

THREAD_BANNER: Final = "会话 {thread_id}，继续这段对话："  # the command follows on its own line
UNKNOWN_THREAD: Final = "找不到会话 {thread_id}"
WRONG_GRAPH: Final = "会话 {thread_id} 属于智能体 {owner}，不是 {graph_id}"
STREAM_CUT: Final = "运行中断：事件流在结束前断开"
NEEDS_ANSWER: Final = (
    "运行在等待回答：{questions}；标准输入不是终端，无法在这里提问。在终端中继续：{command}"
)
STILL_PENDING: Final = "问题仍待回答，之后继续："  # the command follows on its own line
HISTORY_LIMIT: Final = 30


Kind = Literal["done", "interrupted", "error", "stopped", "needs_answer"]


@dataclass(slots=True)
class Ending:
    """How a run (or a run and its follow-up resumes) ended."""

    kind: Kind
    interrupts: list[Interrupt] = field(default_factory=list)


def new_thread_id() -> str:
    """A fresh thread id (the form the service uses too)."""
    return uuid.uuid4().hex


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


class Chat:
    """One thread of one agent on the terminal.

    `asker` is None when stdin is not a terminal: messages are then read line by
    line and a run that needs an answer ends the chat with EXIT_NEEDS_ANSWER.
    """

    def __init__(
        self,
        agent: Agent,
        renderer: Renderer,
        asker: Asker | None,
        *,
        continue_command: str,
    ) -> None:
        self.agent = agent
        self.renderer = renderer
        self.asker = asker
        self.thread_id = ""
        self._continue_command = continue_command

    @property
    def continue_command(self) -> str:
        """The command line that continues this thread."""
        return self._continue_command.format(thread_id=self.thread_id)

    async def open(self, thread_id: str | None) -> list[Interrupt]:
        """Start a new thread or load `thread_id` (and draw its history); return its questions."""
        pending: list[Interrupt] = []
        if thread_id is None:
            self.thread_id = new_thread_id()
        else:
            view = await self.agent.thread(thread_id)
            if view is None:
                raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
            if view.graph_id is not None and view.graph_id != self.agent.graph_id:
                owner, graph_id = view.graph_id, self.agent.graph_id
                message = WRONG_GRAPH.format(thread_id=thread_id, owner=owner, graph_id=graph_id)
                raise Conflict("wrong_graph", message)
            self.thread_id = thread_id
            self.renderer.history(view.messages, limit=HISTORY_LIMIT)
            pending = list(view.interrupts)
        self.renderer.note(THREAD_BANNER.format(thread_id=self.thread_id))
        self.renderer.command(self.continue_command)
        return pending

    async def one_shot(self, message: str, pending: Sequence[Interrupt] = ()) -> int:
        """Answer what is pending, run `message`, and return the exit code."""
        try:
            if pending:
                ending = await self._converse(pending=pending)
                if ending.kind != "done":
                    return self._exit_code(ending)
            return self._exit_code(await self._converse(message=message))
        except Leave:
            return EXIT_NEEDS_ANSWER

    async def interactive(self, pending: Sequence[Interrupt] = ()) -> int:
        """Converse until Ctrl-D or /exit; return the exit code."""
        try:
            if pending:
                ending = await self._converse(pending=pending)
                if ending.kind == "needs_answer":
                    return self._exit_code(ending)
            while True:
                message = await self._read_message()
                ending = await self._converse(message=message)
                if ending.kind == "needs_answer":
                    return self._exit_code(ending)
        except Leave:
            return EXIT_OK

    async def _read_message(self) -> str:
        if self.asker is not None:
            return await self.asker.message()
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.strip() in EXIT_COMMANDS:
                raise Leave
            if line.strip():
                return line.strip()

    async def _converse(
        self, *, message: str | None = None, pending: Sequence[Interrupt] = ()
    ) -> Ending:
        """Run `message` (or start from `pending`), answering interrupts until the run ends."""
        if message is not None:
            ending = await self._run(message=message)
        else:
            ending = Ending("interrupted", list(pending))
        while ending.kind == "interrupted":
            if self.asker is None:
                return Ending("needs_answer", ending.interrupts)
            try:
                answers = [await self.asker.answer(question) for question in ending.interrupts]
            except Leave:
                self.renderer.note(STILL_PENDING)
                self.renderer.command(self.continue_command)
                raise
            ending = await self._run(resume=answers)
            if ending.kind == "error" and ending.interrupts:
                # The answers were refused and the questions are still pending: ask again.
                ending = Ending("interrupted", ending.interrupts)
        return ending

    async def _run(
        self, *, message: str | None = None, resume: Sequence[ResumeEntry] = ()
    ) -> Ending:
        """One run; Ctrl-C (SIGINT) meanwhile stops it."""
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(self._consume(message, resume))
        handled = False
        with suppress(NotImplementedError, RuntimeError):  # no signals off the main thread
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            handled = True
        try:
            with _no_echo():
                return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled ourselves, not the run by Ctrl-C
            self.renderer.stopped()
            return Ending("stopped")
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)

    async def _consume(self, message: str | None, resume: Sequence[ResumeEntry]) -> Ending:
        ending: Ending | None = None
        try:
            events = self.agent.run(self.thread_id, message=message, resume=resume)
            async with aclosing(events):
                async for event in events:
                    self.renderer.event(event)
                    if isinstance(event, RunFinishedEvent):
                        outcome = event.outcome
                        if isinstance(outcome, RunFinishedInterruptOutcome) and outcome.interrupts:
                            ending = Ending("interrupted", list(outcome.interrupts))
                        else:
                            ending = Ending("done")
                    elif isinstance(event, RunErrorEvent):
                        ending = Ending("error")
        except ServiceError as exc:
            self.renderer.close()
            self.renderer.error(exc.message)
            if resume:
                return Ending("error", await self._still_pending())
            return Ending("error")
        finally:
            self.renderer.close()  # no live view outlives its run (Ctrl-C, a bug)
        if ending is None:
            self.renderer.close()
            self.renderer.error(STREAM_CUT)
            return Ending("error")
        return ending

    async def _still_pending(self) -> list[Interrupt]:
        """The thread's pending interrupts after a refused resume (none if unreadable)."""
        try:
            view = await self.agent.thread(self.thread_id)
        except ServiceError:
            return []
        return list(view.interrupts) if view is not None else []

    def _exit_code(self, ending: Ending) -> int:
        if ending.kind == "done":
            return EXIT_OK
        if ending.kind == "stopped":
            return EXIT_STOPPED
        if ending.kind == "needs_answer":
            questions = "；".join(
                f"「{payload_of(question).get('message') or question.reason}」"
                for question in ending.interrupts
            )
            self.renderer.error(
                NEEDS_ANSWER.format(questions=questions, command=self.continue_command)
            )
            return EXIT_NEEDS_ANSWER
        return EXIT_ERROR
