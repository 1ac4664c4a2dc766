"""One run's log in the channels of LangGraph's thread-scoped streaming protocol ("v2",
`POST /threads/{thread_id}/stream/events`): the second encoder of the same AG-UI events
`encoding.StreamEncoder` folds into the run-scoped stream modes.

`ChannelEncoder` turns each logged event into protocol events `(method, data)`:
`lifecycle` (running, then completed, interrupted or failed), `input.requested` (one per
pending interrupt), `messages` (the model's reply as content blocks: message-start,
content-block-start/delta/finish, message-finish), `tools` (a tool's result, when it is
logged), and `values`, `updates`, `custom` as `StreamEncoder` folds them. It only makes
events; `thread_stream` numbers, filters and sends them.

These graphs have no subgraphs: every event is the root's (namespace `[]`). The
`checkpoints` and `tasks` channels are taken in a filter and carry nothing here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from ag_ui.core import (
    BaseEvent,
    ReasoningMessageContentEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome

from app.core.runs.events import BREAKPOINT
from app.http.langgraph.encoding import FAILED_OUTCOMES, INTERRUPT_KEY, StreamEncoder

# The channels a subscription may name (besides `custom:<name>`).
CHANNELS: Final = frozenset(
    {
        "values",
        "updates",
        "messages",
        "tools",
        "lifecycle",
        "input",
        "checkpoints",
        "tasks",
        "custom",
    }
)
# The run-scoped modes `StreamEncoder` makes for the channels it serves.
FOLDED_MODES: Final = ("values", "updates", "custom")
# The channel of each event method.
CHANNEL_OF: Final = {"input.requested": "input"}

Made = tuple[str, Any]


def channel_of(method: str) -> str:
    """The channel a protocol event's method belongs to."""
    return CHANNEL_OF.get(method, method)


@dataclass(slots=True)
class _Reply:
    """The model reply being streamed: its id and its content blocks so far."""

    id: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    open: int | None = None  # the index of the block being streamed
    calls: dict[str, int] = field(default_factory=dict)  # tool call id -> block index


class ChannelEncoder:
    """Turns one run's logged AG-UI events into protocol events, in log order.

    `folded` is the run's `StreamEncoder` (modes `FOLDED_MODES`): it holds the history
    before the run, so its `values` are the whole state, as the protocol sends them.
    """

    def __init__(self, folded: StreamEncoder) -> None:
        self._folded = folded
        self._reply: _Reply | None = None
        # Tool names by call id; a resumed run's tools were called in the run before.
        self._tool_names: dict[str, str] = {
            call["id"]: call["name"]
            for message in folded.values()["messages"]
            for call in getattr(message, "tool_calls", None) or ()
            if call.get("id")
        }

    @property
    def graph_id(self) -> str:
        return self._folded.graph_id

    def feed(self, event: BaseEvent) -> list[Made]:
        """The protocol events one logged event makes."""
        out: list[Made] = []
        if isinstance(event, RunStartedEvent):
            out.append(("lifecycle", {"event": "running", "graph_name": self.graph_id}))
        elif isinstance(event, TextMessageStartEvent):
            self._open_reply(event.message_id, out)
        elif isinstance(event, TextMessageContentEvent):
            reply = self._open_reply(event.message_id, out)
            index = self._open_block(reply, "text", {"type": "text", "text": ""}, out)
            reply.blocks[index]["text"] += event.delta
            out.append(_delta(index, {"type": "text-delta", "text": event.delta}))
        elif isinstance(event, TextMessageEndEvent):
            if self._reply is not None:
                self._close_block(self._reply, out)
        elif isinstance(event, ReasoningMessageContentEvent):
            reply = self._open_reply(event.message_id.split(":reasoning")[0], out)
            start = {"type": "reasoning", "reasoning": ""}
            index = self._open_block(reply, "reasoning", start, out)
            reply.blocks[index]["reasoning"] += event.delta
            out.append(_delta(index, {"type": "reasoning-delta", "reasoning": event.delta}))
        elif isinstance(event, ToolCallStartEvent):
            reply = self._open_reply(event.parent_message_id or event.tool_call_id, out)
            self._close_block(reply, out)
            self._tool_names[event.tool_call_id] = event.tool_call_name
            block = {
                "type": "tool_call_chunk",
                "id": event.tool_call_id,
                "name": event.tool_call_name,
                "args": "",
                "index": len(reply.calls),
            }
            reply.calls[event.tool_call_id] = self._start_block(reply, block, out)
        elif isinstance(event, ToolCallArgsEvent):
            self._call_args(event, out)
        elif isinstance(event, ToolCallEndEvent):
            open_reply = self._reply
            if (
                open_reply is not None
                and open_reply.calls.get(event.tool_call_id) == open_reply.open
            ):
                self._close_block(open_reply, out)
        elif isinstance(event, ToolCallResultEvent):
            self._end_reply(out)
            out += self._tool_result(event)
        elif isinstance(event, (StepFinishedEvent, RunFinishedEvent, RunErrorEvent)):
            self._end_reply(out)
        folded = self._folded.feed(event)
        out += [
            self._passed(mode, data)
            for mode, data in folded
            if mode in FOLDED_MODES and not (mode == "updates" and INTERRUPT_KEY in data)
        ]
        out += self._run_end(event)
        return out

    # --- messages ----------------------------------------------------------------------

    def _open_reply(self, message_id: str, out: list[Made]) -> _Reply:
        reply = self._reply
        if reply is not None and (message_id == reply.id or message_id.startswith(f"{reply.id}:")):
            return reply
        self._end_reply(out)
        self._reply = _Reply(id=message_id)
        out.append(("messages", {"event": "message-start", "role": "ai", "id": message_id}))
        return self._reply

    def _open_block(self, reply: _Reply, kind: str, start: dict[str, Any], out: list[Made]) -> int:
        """The index of the open block of `kind`, one started if another kind is open."""
        if reply.open is not None and reply.blocks[reply.open]["type"] == kind:
            return reply.open
        self._close_block(reply, out)
        return self._start_block(reply, start, out)

    def _start_block(self, reply: _Reply, block: dict[str, Any], out: list[Made]) -> int:
        index = len(reply.blocks)
        reply.blocks.append(dict(block))
        reply.open = index
        out.append(("messages", {"event": "content-block-start", "index": index, "content": block}))
        return index

    def _close_block(self, reply: _Reply, out: list[Made]) -> None:
        index, reply.open = reply.open, None
        if index is None:
            return
        block = reply.blocks[index]
        if block["type"] == "tool_call_chunk":
            block = {"type": "tool_call", "id": block["id"], "name": block["name"]} | {
                "args": _parsed_args(block["args"])
            }
            reply.blocks[index] = block
        out.append(
            ("messages", {"event": "content-block-finish", "index": index, "content": block})
        )

    def _call_args(self, event: ToolCallArgsEvent, out: list[Made]) -> None:
        reply = self._reply
        index = None if reply is None else reply.calls.get(event.tool_call_id)
        if reply is None or index is None or reply.open != index:
            return  # a call whose start this run did not log: its args show in values
        reply.blocks[index]["args"] += event.delta
        out.append(_delta(index, {"type": "tool-call-delta", "args": event.delta}))

    def _end_reply(self, out: list[Made]) -> None:
        reply, self._reply = self._reply, None
        if reply is None:
            return
        self._close_block(reply, out)
        out.append(("messages", {"event": "message-finish"}))

    # --- tools, values, the run's end --------------------------------------------------

    def _tool_result(self, event: ToolCallResultEvent) -> list[Made]:
        """A tool's start and end, both when its result is logged (the log does not hold
        when a tool started)."""
        metadata = event.metadata or {}
        name = self._tool_names.get(event.tool_call_id, "")
        content = event.content if isinstance(event.content, str) else str(event.content)
        started = {"event": "tool-started", "tool_call_id": event.tool_call_id, "tool_name": name}
        if metadata.get("outcome") in FAILED_OUTCOMES:
            ended = {"event": "tool-error", "tool_call_id": event.tool_call_id, "message": content}
        else:
            ended = {
                "event": "tool-finished",
                "tool_call_id": event.tool_call_id,
                "output": content,
            }
        return [("tools", started), ("tools", ended)]

    def _passed(self, mode: str, data: Any) -> Made:
        """A folded part as its channel's data: `values` without `__interrupt__` (the
        `input` channel says a pause; `feed` leaves its `updates` out), `updates` as
        {node, values}, `custom` as {name, payload}."""
        if mode == "values":
            return "values", {k: v for k, v in data.items() if k != INTERRUPT_KEY}
        if mode == "updates":
            node, values = next(iter(data.items()))
            return "updates", {"node": node, "values": values}
        if isinstance(data, dict) and set(data) == {"name", "value"}:
            return "custom", {"name": data["name"], "payload": data["value"]}
        return "custom", {"payload": data}

    def _run_end(self, event: BaseEvent) -> list[Made]:
        if isinstance(event, RunErrorEvent):
            return [("lifecycle", {"event": "failed", "graph_name": self.graph_id} | _error(event))]
        if not isinstance(event, RunFinishedEvent):
            return []
        if not isinstance(event.outcome, RunFinishedInterruptOutcome):
            return [("lifecycle", {"event": "completed", "graph_name": self.graph_id})]
        asked: list[Made] = [
            (
                "input.requested",
                {"interrupt_id": i.id, "payload": (i.metadata or {}).get("payload", i.message)},
            )
            for i in event.outcome.interrupts
            if i.reason != BREAKPOINT  # a breakpoint asks no one anything
        ]
        return [*asked, ("lifecycle", {"event": "interrupted", "graph_name": self.graph_id})]


def _delta(index: int, delta: dict[str, Any]) -> Made:
    return "messages", {"event": "content-block-delta", "index": index, "delta": delta}


def _parsed_args(text: str) -> dict[str, Any]:
    try:
        args = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def _error(event: RunErrorEvent) -> dict[str, Any]:
    return {"error": event.message, "code": event.code or "run_failed"}
