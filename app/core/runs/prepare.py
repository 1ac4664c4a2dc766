"""Checking a run against its thread and building its input: new messages or checked answers.

Refusals follow the status rule of `app.core.errors`: 409 (`Conflict`) when the
thread's state does not allow it now, 422 (`Invalid`) when the request itself is
wrong. A refused resume changes nothing: the interrupt stays pending.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import Message, ResumeEntry, TextPart, UserMessage
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Send, StateSnapshot

from app.core.errors import Conflict, Invalid
from app.core.runs.threads import graph_of, run_config
from app.core.runs.transcript import ThreadTranscript
from graphs.tools_node import tool_reply
from tools.interrupts import Cancelled, InvalidAnswer, validate_answer

THREAD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")

BAD_THREAD_ID = "invalid thread id {value!r}: use 1-128 letters, digits or ._:@- characters"
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
DUPLICATE_MESSAGE = "new user messages share an id ({ids}): give each message its own id"
BAD_ANSWER = "answer to interrupt {interrupt_id!r} refused: {reason}"
NO_USER_MESSAGE = "no user message to run: send one in `messages`, or answers in `resume`"
NOTHING_TO_RUN = "thread {thread_id} has nothing to run from where it stands: send a user message"
BAD_UPDATE = "command.update names no key of the graph's state: {keys}"
BAD_MESSAGES = "the update's messages are not messages: {reason}"
NOT_AN_UPDATE = "command.update must be an object of the state's keys and their values"
UNKNOWN_NODE = "{what} {node!r} is no node of graph {graph_id!r} (nodes: {nodes})"
NO_NEW_MESSAGE = "no new user message to run (every user message is already in the thread)"
NOT_TEXT = "message {message_id!r}: only text content is supported"
MESSAGE_TOO_LARGE = "message {message_id!r} is {size} bytes; the limit is {limit}"
ANSWER_TOO_LARGE = (
    "answer to interrupt {interrupt_id!r} is {size} bytes as JSON; the limit is {limit}"
)

# What the model reads for a tool call whose run ended before it answered: stopped by
# the user (written when the cancel lands), or ended otherwise (a crash, a failure:
# found by the next run).
CALL_ABANDONED = "该工具调用未执行：上一轮运行已被用户中止。"
CALL_INTERRUPTED = "该工具调用没有完成：上一轮运行意外中断，结果未知。"


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """What `events.stream_run` needs: the graph input (or resume; None: go on from the
    checkpoint) and the config.

    `known` holds the ids of the messages the thread had before, plus the input's:
    whatever else the thread holds after the run is what the run added. `checkpoint_id`
    is the checkpoint the run starts from (None: a new thread).
    """

    thread_id: str
    input: dict[str, Any] | Command | None
    config: RunnableConfig
    known: frozenset[str]
    checkpoint_id: str | None = None


def check_thread_id(thread_id: str) -> str:
    """Return `thread_id` if it is a usable thread id, else refuse with 422."""
    if not THREAD_ID.fullmatch(thread_id):
        raise Invalid("bad_thread_id", BAD_THREAD_ID.format(value=thread_id[:140]))
    return thread_id


async def prepare_run(
    graph: CompiledStateGraph,
    *,
    graph_id: str,
    thread_id: str,
    messages: Sequence[Message],
    resume: Sequence[ResumeEntry] | None,
    max_message_bytes: int,
    checkpoint_id: str | None = None,
    transcript: ThreadTranscript | None = None,
    command: Mapping[str, Any] | None = None,
    no_input: bool = False,
) -> PreparedRun:
    """Check the request against the thread's state and build the run's input.

    With `resume`, the answers become `Command(resume={interrupt_id: payload})`, each
    validated against its interrupt's payload first (`messages` are then history only).
    Otherwise the user messages the thread has not seen (by id, in its state or its
    `transcript`) are the input. `command` (LangGraph's `update` and `goto`, a `goto`
    naming nodes of the graph) goes with the answers, or is the input by itself. With
    `no_input` the run goes on from where the thread stands with no input (LangGraph's
    `input: null`: after a breakpoint, a state update), refused with `no_user_message`
    when no step is next. The state is the latest checkpoint's, or `checkpoint_id`'s (a
    rollback, a fork).
    """
    config = run_config(check_thread_id(thread_id), graph_id)
    at = config
    if checkpoint_id is not None:
        at = {**config, "configurable": {**config["configurable"], "checkpoint_id": checkpoint_id}}
    snapshot = await graph.aget_state(at)
    start = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
    owner = graph_of(snapshot)
    if owner is not None and owner != graph_id:
        message = WRONG_GRAPH.format(thread_id=thread_id, owner=owner, graph_id=graph_id)
        raise Conflict("wrong_graph", message)
    history: list[AnyMessage] = snapshot.values.get("messages", []) if snapshot.values else []
    seen = {message.id for message in history if message.id}
    directed = _directions(graph, graph_id, command or {}, max_message_bytes)
    if resume:
        answers = _answers(snapshot, thread_id, resume, max_message_bytes)
        resumed: Command[Any] = Command(resume=answers, **directed)
        return PreparedRun(thread_id, resumed, config, frozenset(seen), start)
    if snapshot.interrupts:
        ids = ", ".join(pending.id for pending in snapshot.interrupts)
        raise Conflict("awaiting_answers", AWAITING_ANSWERS.format(thread_id=thread_id, ids=ids))
    if directed:
        return PreparedRun(thread_id, Command(**directed), config, frozenset(seen), start)
    if no_input:
        if not snapshot.next:
            raise Invalid("no_user_message", NOTHING_TO_RUN.format(thread_id=thread_id))
        return PreparedRun(thread_id, None, config, frozenset(seen), start)
    unseen = [m for m in messages if isinstance(m, UserMessage) and m.id not in seen]
    if unseen and history and transcript is not None:  # a client resending older messages
        earlier = await transcript.holds(thread_id, [message.id for message in unseen])
        unseen = [message for message in unseen if message.id not in earlier]
    new = [_human(message, max_message_bytes) for message in unseen]
    new_ids = [message.id for message in new]
    twice = sorted({str(i) for i in new_ids if new_ids.count(i) > 1})
    if twice:
        raise Invalid("duplicate_message", DUPLICATE_MESSAGE.format(ids=", ".join(twice)))
    if not new:
        # A request without a user message is wrong on its face; one whose messages the
        # thread already holds is refused by the thread's state (a retried request).
        if not any(isinstance(message, UserMessage) for message in messages):
            raise Invalid("no_user_message", NO_USER_MESSAGE)
        raise Conflict("no_new_message", NO_NEW_MESSAGE)
    added = [*abandoned_calls(history, CALL_INTERRUPTED), *new]
    known = frozenset(seen | {message.id for message in added if message.id})
    return PreparedRun(thread_id, {"messages": added}, config, known, start)


def check_messages(values: Any, max_bytes: int) -> None:
    """Refuse (422) `values["messages"]` of a state update or `command.update` that are
    not messages (`invalid_update`) or hold one over the message limit
    (`message_too_large`), as a user message would be."""
    if not isinstance(values, dict) or values.get("messages") is None:
        return
    found = values["messages"]
    try:
        messages = convert_to_messages(found if isinstance(found, list) else [found])
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise Invalid("invalid_update", BAD_MESSAGES.format(reason=exc)[:300]) from None
    for message in messages:
        size = len(json.dumps(message.content, ensure_ascii=False).encode())
        if size > max_bytes:
            detail = MESSAGE_TOO_LARGE.format(message_id=message.id, size=size, limit=max_bytes)
            raise Invalid("message_too_large", detail)


def _directions(
    graph: CompiledStateGraph, graph_id: str, command: Mapping[str, Any], max_bytes: int
) -> dict[str, Any]:
    """`Command`'s `update` and `goto` as LangGraph takes them: a goto is a node name, a
    `{"node", "input"}` (a `Send`), or a list of those, each node one of the graph's."""
    directed: dict[str, Any] = {}
    update = command.get("update")
    if update is not None and not isinstance(update, dict):
        raise Invalid("invalid_update", NOT_AN_UPDATE)
    if update is not None:
        unknown_keys = sorted(str(key) for key in update if key not in graph.channels)
        if unknown_keys or any(str(key).startswith("__") for key in update):
            bad = ", ".join(unknown_keys) or ", ".join(map(str, update))
            raise Invalid("invalid_update", BAD_UPDATE.format(keys=bad)[:300])
        check_messages(update, max_bytes)
        directed["update"] = update
    goto = command.get("goto")
    if goto is None:
        return directed
    nodes = [name for name in graph.nodes if not name.startswith("__")]
    targets: list[str | Send] = []
    for item in goto if isinstance(goto, list) else [goto]:
        node = item.get("node") if isinstance(item, dict) else item
        if not isinstance(node, str) or node not in nodes:
            unknown = UNKNOWN_NODE.format(
                what="command.goto", node=node, graph_id=graph_id, nodes=", ".join(nodes)
            )
            raise Invalid("unknown_node", unknown[:300])
        targets.append(Send(node, item.get("input")) if isinstance(item, dict) else node)
    directed["goto"] = targets if isinstance(goto, list) else targets[0]
    return directed


def check_node(graph: CompiledStateGraph, graph_id: str, as_node: str) -> str:
    """`as_node` if a state update may be made as it (a node of the graph, or
    `__copy__`), else 422 `unknown_node`."""
    if as_node == "__copy__" or as_node in graph.nodes:
        return as_node
    nodes = ", ".join(graph.nodes)
    unknown = UNKNOWN_NODE.format(what="as_node", node=as_node, graph_id=graph_id, nodes=nodes)
    raise Invalid("unknown_node", unknown[:300])


def _answers(
    snapshot: StateSnapshot, thread_id: str, resume: Sequence[ResumeEntry], max_bytes: int
) -> dict[str, Any]:
    pending = {interrupt.id: interrupt.value for interrupt in snapshot.interrupts}
    if not pending:
        raise Conflict("nothing_pending", NOTHING_PENDING.format(thread_id=thread_id))
    answers: dict[str, Any] = {}
    for entry in resume:
        interrupt_id = entry.interrupt_id
        if interrupt_id not in pending:
            message = UNKNOWN_INTERRUPT.format(
                interrupt_id=interrupt_id, thread_id=thread_id, ids=", ".join(pending)
            )
            raise Conflict("unknown_interrupt", message)
        if interrupt_id in answers:
            raise Invalid("duplicate_answer", DUPLICATE_ANSWER.format(interrupt_id=interrupt_id))
        if entry.status == "cancelled":
            answers[interrupt_id] = {"cancelled": True}
            continue
        # An answer becomes a tool result the model reads: held to a message's limit.
        size = len(json.dumps(entry.payload, ensure_ascii=False).encode())
        if size > max_bytes:
            detail = ANSWER_TOO_LARGE.format(interrupt_id=interrupt_id, size=size, limit=max_bytes)
            raise Invalid("message_too_large", detail)
        payload = pending[interrupt_id]
        try:
            validate_answer(payload if isinstance(payload, dict) else {}, entry.payload)
        except Cancelled:
            pass  # {"cancelled": true} under status "resolved" is a cancel too
        except InvalidAnswer as exc:
            message = BAD_ANSWER.format(interrupt_id=interrupt_id, reason=exc)
            raise Invalid("invalid_answer", message) from None
        answers[interrupt_id] = entry.payload
    return answers


def _human(message: UserMessage, max_bytes: int) -> HumanMessage:
    content = message.content
    if isinstance(content, str):
        text = content
    elif all(isinstance(part, TextPart) for part in content):
        text = "".join(part.text for part in content if isinstance(part, TextPart))
    else:
        raise Invalid("unsupported_content", NOT_TEXT.format(message_id=message.id))
    size = len(text.encode())
    if size > max_bytes:
        detail = MESSAGE_TOO_LARGE.format(message_id=message.id, size=size, limit=max_bytes)
        raise Invalid("message_too_large", detail)
    return HumanMessage(content=text, id=message.id)


def abandoned_calls(history: Sequence[AnyMessage], text: str) -> list[ToolMessage]:
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
                tool_reply(call, text, "abandoned")
                for call in message.tool_calls
                if call["id"] not in answered
            ]
    return []
