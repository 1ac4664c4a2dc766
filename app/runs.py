"""Preparing a run: new user messages, checked resumes, one run per thread at a time.

Refusals carry an HTTP status by one rule:
- 409: the thread's state does not allow it now (a run is in progress, the thread
  belongs to another graph, it waits for answers, nothing is pending, or the
  interrupt id is not pending);
- 422: the request itself is wrong (an answer of the wrong shape, a message too
  long or not text, no new user message, a bad thread id).
A refused resume changes nothing: the interrupt stays pending.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ag_ui.core import Message, ResumeEntry, TextPart, UserMessage
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StateSnapshot

from app.threads import graph_of, run_config
from tools.interrupts import Cancelled, InvalidAnswer, validate_answer

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")

BAD_THREAD_ID = "invalid thread id {value!r}: use 1-128 letters, digits or ._:@- characters"
THREAD_BUSY = "thread {thread_id} already has a run in progress; wait for it to finish"
WRONG_GRAPH = "thread {thread_id} belongs to graph {owner!r}, not {graph_id!r}"
AWAITING_ANSWERS = (
    "thread {thread_id} is waiting for answers to {ids}: send `resume` "
    '(status "resolved" with payload {{"value": ...}}, or status "cancelled")'
)
NOTHING_PENDING = "thread {thread_id} has no pending interrupt to resume"
UNKNOWN_INTERRUPT = (
    "interrupt {interrupt_id!r} is not pending on thread {thread_id} (pending: {ids})"
)
DUPLICATE_ANSWER = "interrupt {interrupt_id!r} is answered twice"
BAD_ANSWER = "answer to interrupt {interrupt_id!r} refused: {reason}"
NO_NEW_MESSAGE = "no new user message to run (every user message is already in the thread)"
NOT_TEXT = "message {message_id!r}: only text content is supported"
MESSAGE_TOO_LARGE = "message {message_id!r} is {size} bytes; the limit is {limit}"

# What the model reads for a tool call whose run was stopped before it answered.
CALL_ABANDONED = "该工具调用未执行：上一轮运行已被用户中止。"


class RunRefused(Exception):
    """A run the thread cannot take; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """What `events.stream_run` needs: the graph input (or resume) and the config."""

    thread_id: str
    input: dict[str, Any] | Command
    config: RunnableConfig


def check_thread_id(thread_id: str) -> str:
    """Return `thread_id` if it is a usable thread id, else refuse with 422."""
    if not THREAD_ID.fullmatch(thread_id):
        raise RunRefused(422, "bad_thread_id", BAD_THREAD_ID.format(value=thread_id[:140]))
    return thread_id


async def prepare_run(
    graph: CompiledStateGraph,
    *,
    graph_id: str,
    thread_id: str,
    messages: Sequence[Message],
    resume: Sequence[ResumeEntry] | None,
    max_message_bytes: int,
) -> PreparedRun:
    """Check the request against the thread's state and build the run's input.

    With `resume`, the answers become `Command(resume={interrupt_id: payload})`, each
    validated against its interrupt's payload first (`messages` are then history only).
    Otherwise the user messages the thread has not seen (by id) are the input.
    """
    config = run_config(check_thread_id(thread_id), graph_id)
    snapshot = await graph.aget_state(config)
    owner = graph_of(snapshot)
    if owner is not None and owner != graph_id:
        message = WRONG_GRAPH.format(thread_id=thread_id, owner=owner, graph_id=graph_id)
        raise RunRefused(409, "wrong_graph", message)
    if resume:
        return PreparedRun(thread_id, Command(resume=_answers(snapshot, thread_id, resume)), config)
    if snapshot.interrupts:
        ids = ", ".join(pending.id for pending in snapshot.interrupts)
        raise RunRefused(
            409, "awaiting_answers", AWAITING_ANSWERS.format(thread_id=thread_id, ids=ids)
        )
    history: list[AnyMessage] = snapshot.values.get("messages", []) if snapshot.values else []
    seen = {message.id for message in history}
    new = [
        _human(message, max_message_bytes)
        for message in messages
        if isinstance(message, UserMessage) and message.id not in seen
    ]
    if not new:
        raise RunRefused(422, "no_new_message", NO_NEW_MESSAGE)
    return PreparedRun(thread_id, {"messages": [*_abandoned_calls(history), *new]}, config)


def _answers(
    snapshot: StateSnapshot, thread_id: str, resume: Sequence[ResumeEntry]
) -> dict[str, Any]:
    pending = {interrupt.id: interrupt.value for interrupt in snapshot.interrupts}
    if not pending:
        raise RunRefused(409, "nothing_pending", NOTHING_PENDING.format(thread_id=thread_id))
    answers: dict[str, Any] = {}
    for entry in resume:
        interrupt_id = entry.interrupt_id
        if interrupt_id not in pending:
            message = UNKNOWN_INTERRUPT.format(
                interrupt_id=interrupt_id, thread_id=thread_id, ids=", ".join(pending)
            )
            raise RunRefused(409, "unknown_interrupt", message)
        if interrupt_id in answers:
            raise RunRefused(
                422, "duplicate_answer", DUPLICATE_ANSWER.format(interrupt_id=interrupt_id)
            )
        if entry.status == "cancelled":
            answers[interrupt_id] = {"cancelled": True}
            continue
        payload = pending[interrupt_id]
        try:
            validate_answer(payload if isinstance(payload, dict) else {}, entry.payload)
        except Cancelled:
            pass  # {"cancelled": true} under status "resolved" is a cancel too
        except InvalidAnswer as exc:
            message = BAD_ANSWER.format(interrupt_id=interrupt_id, reason=exc)
            raise RunRefused(422, "invalid_answer", message) from None
        answers[interrupt_id] = entry.payload
    return answers


def _human(message: UserMessage, max_bytes: int) -> HumanMessage:
    content = message.content
    if isinstance(content, str):
        text = content
    elif all(isinstance(part, TextPart) for part in content):
        text = "".join(part.text for part in content if isinstance(part, TextPart))
    else:
        raise RunRefused(422, "unsupported_content", NOT_TEXT.format(message_id=message.id))
    size = len(text.encode())
    if size > max_bytes:
        detail = MESSAGE_TOO_LARGE.format(message_id=message.id, size=size, limit=max_bytes)
        raise RunRefused(422, "message_too_large", detail)
    return HumanMessage(content=text, id=message.id)


def _abandoned_calls(history: Sequence[AnyMessage]) -> list[ToolMessage]:
    """Results for the tool calls a stopped run left unanswered.

    Providers reject a history where an assistant's tool call has no tool message,
    so a thread whose run was cancelled mid-tools would otherwise be stuck.
    """
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, AIMessage):
            answered = {
                later.tool_call_id
                for later in history[index + 1 :]
                if isinstance(later, ToolMessage)
            }
            return [
                ToolMessage(
                    content=CALL_ABANDONED,
                    name=call["name"],
                    tool_call_id=call["id"] or "",
                    status="error",
                )
                for call in message.tool_calls
                if call["id"] not in answered
            ]
    return []


class ThreadLocks:
    """One run per thread at a time, in this process."""

    def __init__(self, *, abandoned_wait_s: float = 5.0) -> None:
        self._leases: dict[str, Lease] = {}
        self._abandoned_wait_s = abandoned_wait_s

    def busy(self, thread_id: str) -> bool:
        return thread_id in self._leases

    async def claim(self, thread_id: str) -> Lease:
        """The thread's lease; refuse with 409 while another run holds it.

        A run whose client has gone away is being cancelled: wait (briefly) for it
        to let go instead of refusing, so a "stop, then send" from a UI just works.
        """
        held = self._leases.get(thread_id)
        if held is not None and held.abandoned:
            with suppress(TimeoutError):
                async with asyncio.timeout(self._abandoned_wait_s):
                    await held.released.wait()
            held = self._leases.get(thread_id)
        if held is not None:
            raise RunRefused(409, "thread_busy", THREAD_BUSY.format(thread_id=thread_id))
        lease = Lease(self, thread_id)
        self._leases[thread_id] = lease
        return lease

    def _release(self, lease: Lease) -> None:
        if self._leases.get(lease.thread_id) is lease:
            del self._leases[lease.thread_id]


class Lease:
    """A claim on one thread; `release()` is idempotent."""

    __slots__ = ("_locks", "abandoned", "released", "thread_id")

    def __init__(self, locks: ThreadLocks, thread_id: str) -> None:
        self._locks = locks
        self.thread_id = thread_id
        self.abandoned = False
        self.released = asyncio.Event()

    def abandon(self) -> None:
        """The client went away: the run is about to be cancelled."""
        self.abandoned = True

    def release(self) -> None:
        self._locks._release(self)
        self.released.set()
