"""A terminal conversation with one agent: runs, interrupts answered, Ctrl-C, leaving.

The session talks to an `Agent` (`app.cli.agent`: in-process or over HTTP); both
yield the same AG-UI events, which go to the one renderer (`app.cli.terminal`).
Interrupts that end a run are asked with `app.cli.asking` and answered in one resume;
a refused answer asks again. Each run is followed with `app.cli.following`: Ctrl-C
while it streams asks the run to stop, and the thread stays usable. Opening a thread
whose newest run is still queued or running joins that run first, drawn like a live one.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ag_ui.core import Interrupt, Message, ResumeEntry, UserMessage

from app.cli.agent import Agent, RunInfo
from app.cli.asking import EXIT_COMMANDS, Asker, Leave, payload_of
from app.cli.following import Drawn, Ending, follow
from app.cli.terminal import Renderer
from app.core.errors import Conflict, NotFound, ServiceError
from app.core.runs.threads import ThreadPage

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_NEEDS_ANSWER: Final = 3
EXIT_STOPPED: Final = 130

THREAD_BANNER: Final = "会话 {thread_id}，继续这段对话："  # the command follows on its own line
UNKNOWN_THREAD: Final = "找不到会话 {thread_id}"
WRONG_GRAPH: Final = "会话 {thread_id} 属于智能体 {owner}，不是 {graph_id}"
JOINING: Final = "会话中有一个运行尚未结束，接着显示它（Ctrl-C 停止它）："
NEEDS_ANSWER: Final = (
    "运行在等待回答：{questions}；标准输入不是终端，无法在这里提问。在终端中继续：{command}"
)
STILL_PENDING: Final = "问题仍待回答，之后继续："  # the command follows on its own line
# The turns (a user message and what answered it) an opened thread shows of its history.
HISTORY_TURNS: Final = 20


@dataclass(frozen=True, slots=True)
class History:
    """The end of a thread's history that the terminal shows, and how many messages it leaves
    out before that."""

    messages: list[Message]
    older: int = 0


@dataclass(slots=True)
class Opening:
    """Where an opened thread stands: its pending questions, or a run to join first."""

    pending: list[Interrupt] = field(default_factory=list)
    joining: str | None = None  # the id of the thread's run under way
    drawn: Drawn = field(default_factory=Drawn)  # what the history showed of it


def _user_messages(messages: Sequence[Message]) -> int:
    return sum(isinstance(message, UserMessage) for message in messages)


def _turns_start(messages: Sequence[Message], turns: int) -> int:
    """Where the last `turns` turns of `messages` start (a turn starts at a user message);
    0 when there are fewer."""
    users = [i for i, message in enumerate(messages) if isinstance(message, UserMessage)]
    return users[-turns] if len(users) >= turns else 0


def new_thread_id() -> str:
    """A fresh thread id (the form the service uses too)."""
    return uuid.uuid4().hex


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

    async def open(self, thread_id: str | None) -> Opening:
        """Start a new thread or load `thread_id` (and draw its history); say where it stands."""
        opening = Opening()
        if thread_id is None:
            self.thread_id = new_thread_id()
        else:
            # The run first: one that ends meanwhile is then in the history read next.
            active = await self.agent.under_way(thread_id)
            view = await self.agent.thread(thread_id)
            if view is None and active is None:
                raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
            self._check_graph(thread_id, view.graph_id if view is not None else None, active)
            self.thread_id = thread_id
            history = await self._history(view) if view is not None else History([])
            self.renderer.history(history.messages, older=history.older)
            if active is not None:
                # Its own end says what is pending then; the history's questions are its input.
                opening = Opening(joining=active.run_id, drawn=Drawn.of(history.messages))
            elif view is not None:
                opening = Opening(pending=list(view.interrupts))
        self.renderer.note(THREAD_BANNER.format(thread_id=self.thread_id))
        self.renderer.command(self.continue_command)
        if opening.joining is not None:
            self.renderer.note(JOINING)
        return opening

    async def _history(self, page: ThreadPage) -> History:
        """The last HISTORY_TURNS turns, reading older pages from `page` on as they need."""
        messages = list(page.messages)
        older = page.older
        while older is not None and _user_messages(messages) < HISTORY_TURNS:
            earlier = await self.agent.thread(self.thread_id, before=older.before)
            if earlier is None:  # forgotten meanwhile: what was read is all there is
                break
            messages[:0] = earlier.messages
            older = earlier.older
        start = _turns_start(messages, HISTORY_TURNS)
        return History(messages[start:], older=start + (older.count if older else 0))

    def _check_graph(self, thread_id: str, owner: str | None, active: RunInfo | None) -> None:
        """Refuse a thread of another agent (known from its view, or its run under way)."""
        owner = owner or (active.graph if active is not None else None)
        if owner is not None and owner != self.agent.graph_id:
            graph_id = self.agent.graph_id
            message = WRONG_GRAPH.format(thread_id=thread_id, owner=owner, graph_id=graph_id)
            raise Conflict("wrong_graph", message)

    async def one_shot(self, message: str, opening: Opening | None = None) -> int:
        """Join what is under way, answer what is pending, run `message`; the exit code."""
        opening = opening or Opening()
        try:
            if opening.joining is not None or opening.pending:
                ending = await self._converse(opening=opening)
                if ending.kind != "done":
                    return self._exit_code(ending)
            return self._exit_code(await self._converse(message=message))
        except Leave:
            return EXIT_NEEDS_ANSWER

    async def interactive(self, opening: Opening | None = None) -> int:
        """Join what is under way, then converse until Ctrl-D or /exit; the exit code."""
        opening = opening or Opening()
        try:
            if opening.joining is not None or opening.pending:
                ending = await self._converse(opening=opening)
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
        self, *, message: str | None = None, opening: Opening | None = None
    ) -> Ending:
        """Run `message` (or join / answer what `opening` found) until the run ends."""
        if message is not None:
            ending = await self._run(message=message)
        elif opening is not None and opening.joining is not None:
            run = self.agent.join(self.thread_id, opening.joining)
            ending = await follow(run, self.renderer, drawn=opening.drawn)
        else:
            ending = Ending("interrupted", list(opening.pending if opening else ()))
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
        """One new run, followed to its end (Ctrl-C meanwhile stops it)."""
        run = self.agent.start(self.thread_id, message=message, resume=resume)
        ending = await follow(run, self.renderer)
        if ending.kind == "failed":
            # A refused resume leaves its questions pending: they are asked again.
            return Ending("error", await self._still_pending() if resume else [])
        return ending

    async def _still_pending(self) -> list[Interrupt]:
        """The thread's pending interrupts after a refused resume (none if unreadable)."""
        try:
            view = await self.agent.thread(self.thread_id, limit=1)  # only its questions
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
