"""The run log and the thread's state in LangGraph's own shapes: this protocol's one converter.

A run's log holds what the run produced once, as AG-UI events (`app.core.runs.log`); the
AG-UI routes send it as it is, and `StreamEncoder` reads the same entries and folds them
into LangGraph's stream parts: `values` (the state after each step), `updates` (what each
node wrote), `messages-tuple` and `messages` (the model's chunks, whole tool messages),
`custom`, `error`, then `end`. So a thread serves both protocols from one log, and the
AG-UI path pays nothing for this one. `events` is the fold again, in LangChain's
`astream_events` v2 shapes (the graph's and each step's chain start/end, the model's
start/stream/end, each tool's start/end), its run ids derived from the run's.

`checkpoints`, `tasks` and `debug` come from the run's checkpoints, which the log does
not hold: `Checkpoints` reads them from the checkpointer (those whose metadata names the
run, after the one a resumed run goes on from), and each is shown at a fixed place in
the fold: the k-th step's start shows those its tasks started from, the run's end the
rest, as LangGraph orders them (a step's task results, the checkpoint after it, the next
step's task starts). The reader waits at such a place for the checkpoints it needs
(LangGraph writes them in the background), so a rejoin shows the same parts at the same
places.

Frame ids are `<event seq>` for the first part an entry makes and `<seq>.<n>` for the
next ones: the fold is deterministic over the log, so a rejoin (`Last-Event-ID`) folds
from the start and sends what follows that id, each part once. The `metadata` part that
opens every stream has id `0`.

The rest of this module writes the resources (runs, threads, states, assistants) as
langgraph-sdk reads them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningMessageContentEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langgraph.constants import START
from langgraph.types import PregelTask, StateSnapshot

from app.core.runs.events import BREAKPOINT
from app.core.runs.log import Entry
from app.core.storage.runs import RunRecord, RunStatus, ThreadSummary
from graphs.provider_quirks import REASONING_KEY
from graphs.react import AGENT_NODE, TOOLS_NODE

# LangGraph's servers derive a graph's system assistant id so (langgraph-api, Aegra).
ASSISTANT_NAMESPACE: Final = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
# The stream modes this server folds the log into; others asked for are left out.
STREAM_MODES: Final = frozenset(
    {
        "values",
        "updates",
        "messages-tuple",
        "messages",
        "custom",
        "metadata",
        "checkpoints",
        "tasks",
        "debug",
        "events",
    }
)
# The modes made from the run's checkpoints (read from the checkpointer, not the log).
CHECKPOINT_MODES: Final = frozenset({"checkpoints", "tasks", "debug"})
# LangGraph's names for how a task was triggered: a node's edge, or a Send.
PULL: Final = "__pregel_pull"
PUSH: Final = "__pregel_push"
# astream_events' name for the chat model (LangChain names it after the model's class).
MODEL_NAME: Final = "ChatModel"
DEFAULT_MODES: Final = ("values",)
INTERRUPT_KEY: Final = "__interrupt__"
ERROR_KEY: Final = "__error__"
# Tool outcomes that LangChain calls a failed tool message (`status="error"`).
FAILED_OUTCOMES: Final = frozenset({"error", "timeout", "invalid_args", "unknown_tool"})
# Our run status -> LangGraph's (a cancelled run is `interrupted` there).
RUN_STATUS: Final[dict[RunStatus, str]] = {
    "queued": "pending",
    "running": "running",
    "interrupted": "interrupted",
    "success": "success",
    "error": "error",
    "cancelled": "interrupted",
}


def assistant_id(graph_id: str) -> str:
    """The system assistant id of `graph_id`."""
    return str(uuid.uuid5(ASSISTANT_NAMESPACE, graph_id))


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def dumps(data: Any) -> str:
    """JSON as the SDK reads it: messages as their pydantic dumps, anything else as text."""
    return json.dumps(data, ensure_ascii=False, default=_default, separators=(",", ":"))


def _default(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return value.model_dump()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class Part:
    """One stream part: its event name, its data and its id."""

    event: str
    data: Any
    id: str

    def sse(self) -> str:
        return f"event: {self.event}\ndata: {dumps(self.data)}\nid: {self.id}\n\n"


def metadata_part(run_id: str, attempt: int = 1) -> Part:
    return Part("metadata", {"run_id": run_id, "attempt": attempt}, "0")


def parse_event_id(value: str | None) -> tuple[int, int] | None:
    """A `Last-Event-ID` as (seq, n); None for none; ValueError for one this server
    never sent."""
    if value is None or not value.strip():
        return None
    seq, _, n = value.strip().partition(".")
    if not (seq.isascii() and seq.isdigit()) or (n and not (n.isascii() and n.isdigit())):
        raise ValueError(value)
    return int(seq), int(n or 0)


def stream_modes(asked: str | Sequence[str] | None) -> tuple[str, ...]:
    """The modes asked (a name or a list; none: `values`), in LangGraph's spelling."""
    if not asked:
        return DEFAULT_MODES
    return (asked,) if isinstance(asked, str) else tuple(asked)


@dataclass(slots=True)
class _Turn:
    """The model reply being streamed: its text, reasoning and tool calls."""

    id: str
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # id -> name, args


class StreamEncoder:
    """Folds one run's logged AG-UI events into LangGraph stream parts for `modes`.

    `before` is the thread's history when the run started, `added` the input messages
    the run added to it, `values` the state's other keys: together the first `values`.
    """

    def __init__(
        self,
        modes: Sequence[str],
        *,
        thread_id: str,
        run_id: str,
        graph_id: str,
        before: Sequence[AnyMessage],
        added: Sequence[AnyMessage] = (),
        values: Mapping[str, Any] | None = None,
        checkpoints: Checkpoints | None = None,
        first_due: int = 2,
    ) -> None:
        self.modes = frozenset(modes)
        self._values = {k: v for k, v in (values or {}).items() if k != "messages"}
        self._messages: list[AnyMessage] = []
        for message in (*before, *added):
            self._add(message)
        self.graph_id = graph_id
        self._events_out: list[tuple[str, Any]] = []  # where a reply's end event goes
        self._meta = {
            "thread_id": thread_id,
            "run_id": run_id,
            "graph_id": graph_id,
            "assistant_id": assistant_id(graph_id),
        }
        self._turn: _Turn | None = None
        self._node = AGENT_NODE
        # The calls of the history's last reply: a resumed run's tools step runs them.
        last = next((m for m in reversed(self._messages) if isinstance(m, AIMessage)), None)
        self._calls: list[dict[str, Any]] = (
            [dict(call) for call in last.tool_calls] if last is not None else []
        )
        self._step: list[AnyMessage] = []
        self._tool_names = {call["id"]: call["name"] for call in self._calls if call["id"]}
        self._partial: dict[str, AIMessageChunk] = {}  # `messages` mode: each reply so far
        self._seen: set[str] = set()
        self.ended = False
        # The checkpoint modes: the run's checkpoints read so far, how many are shown, how
        # many the first step's start shows (the input's two; a resumed run's one: the
        # checkpoint it goes on from), how many steps have started.
        self._checkpoints = checkpoints if self.modes & CHECKPOINT_MODES else None
        self._snapshots: Sequence[StateSnapshot] = ()
        self._shown = 0
        self._first_due = first_due
        self._steps = 0
        # The events mode: the input the run was given, and its own run id.
        self._input = {"messages": list(added)} if added else None
        self._events_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"run:{run_id}"))
        self._events_node: tuple[str, str] | None = None  # the step's (node, run id)
        self._events_model: str | None = None  # the model reply streamed now: its run id

    # --- entries -> parts ------------------------------------------------------------

    def parts(self, entry: Entry, after: tuple[int, int] | None = None) -> list[Part]:
        """The parts `entry` makes, numbered, those up to `after` left out."""
        made = self.feed(entry.typed())
        numbered = [
            Part(event, data, str(entry.seq) if n == 0 else f"{entry.seq}.{n}")
            for n, (event, data) in enumerate(made)
        ]
        if after is None:
            return numbered
        return [part for n, part in enumerate(numbered) if (entry.seq, n) > after]

    async def read(self, entry: Entry) -> None:
        """Read the checkpoints `entry`'s parts need (the checkpoint modes), before `parts`."""
        if self._checkpoints is None:
            return
        event = entry.typed()
        if isinstance(event, StepStartedEvent):
            need: int | None = self._steps + self._first_due
        elif isinstance(event, (RunFinishedEvent, RunErrorEvent)):
            need = None
        else:
            return
        if need is None or need > self._shown:
            self._snapshots = await self._checkpoints(need)

    def feed(self, event: BaseEvent) -> list[tuple[str, Any]]:
        """The (event, data) parts one AG-UI event makes."""
        out: list[tuple[str, Any]] = []
        self._events_out = out
        if isinstance(event, RunStartedEvent):
            self._emit_values(out)
            self._event(out, "on_chain_start", self.graph_id, self._events_id, input=self._input)
        elif isinstance(event, StepStartedEvent):
            self._node, self._step = event.step_name, []
            self._show_checkpoints(self._steps + self._first_due, out)
            self._steps += 1
            self._start_node_event(event.step_name, out)
        elif isinstance(event, StepFinishedEvent):
            self._finish_step(event.step_name, out)
        elif isinstance(event, ReasoningMessageContentEvent):
            turn = self._open_turn(event.message_id.split(":reasoning")[0])
            turn.reasoning.append(event.delta)
            chunk = AIMessageChunk(
                content="", id=turn.id, additional_kwargs={REASONING_KEY: event.delta}
            )
            self._chunk(chunk, out)
        elif isinstance(event, TextMessageStartEvent):
            self._open_turn(event.message_id)
        elif isinstance(event, TextMessageContentEvent):
            turn = self._open_turn(event.message_id)
            turn.text.append(event.delta)
            self._chunk(AIMessageChunk(content=event.delta, id=turn.id), out)
        elif isinstance(event, ToolCallStartEvent):
            turn = self._open_turn(event.parent_message_id or event.tool_call_id)
            index = len(turn.calls)
            turn.calls[event.tool_call_id] = (event.tool_call_name, [])
            self._tool_names[event.tool_call_id] = event.tool_call_name
            chunk = AIMessageChunk(
                content="",
                id=turn.id,
                tool_call_chunks=[
                    {
                        "id": event.tool_call_id,
                        "name": event.tool_call_name,
                        "args": "",
                        "index": index,
                        "type": "tool_call_chunk",
                    }
                ],
            )
            self._chunk(chunk, out)
        elif isinstance(event, ToolCallArgsEvent):
            self._call_args(event, out)
        elif isinstance(event, ToolCallResultEvent):
            self._tool_result(event, out)
        elif isinstance(event, CustomEvent):
            if "custom" in self.modes:
                data = (
                    event.value
                    if event.name == "custom"
                    else {"name": event.name, "value": event.value}
                )
                out.append(("custom", data))
            self._event(out, "on_custom_event", event.name, self._events_id, data=event.value)
        elif isinstance(event, RunFinishedEvent):
            self._finish_run(event, out)
        elif isinstance(event, RunErrorEvent):
            self._end_turn()
            self._show_checkpoints(None, out)
            out.append(("error", {"error": event.code or "run_failed", "message": event.message}))
            out.append(("end", None))
            self.ended = True
        return out

    # --- the fold --------------------------------------------------------------------

    def _add(self, message: AnyMessage) -> None:
        """Append `message`; one the history holds already (a rejoin of a run whose
        messages a later run handed to the transcript) moves to the end."""
        if message.id is not None:
            self._messages = [m for m in self._messages if m.id != message.id]
        self._messages.append(message)

    def _open_turn(self, message_id: str) -> _Turn:
        turn = self._turn
        if turn is not None and (message_id == turn.id or message_id.startswith(f"{turn.id}:")):
            return turn
        self._end_turn()
        self._turn = _Turn(id=message_id)
        return self._turn

    def _call_args(self, event: ToolCallArgsEvent, out: list[tuple[str, Any]]) -> None:
        turn = self._turn
        if turn is None or event.tool_call_id not in turn.calls:
            return
        turn.calls[event.tool_call_id][1].append(event.delta)
        index = list(turn.calls).index(event.tool_call_id)
        chunk = AIMessageChunk(
            content="",
            id=turn.id,
            tool_call_chunks=[
                {
                    "id": None,
                    "name": None,
                    "args": event.delta,
                    "index": index,
                    "type": "tool_call_chunk",
                }
            ],
        )
        self._chunk(chunk, out)

    def _end_turn(self) -> AIMessage | None:
        turn, self._turn = self._turn, None
        if turn is None:
            return None
        calls = []
        for call_id, (name, pieces) in turn.calls.items():
            try:
                args = json.loads("".join(pieces) or "{}")
            except json.JSONDecodeError:
                args = {}
            calls.append(
                {"id": call_id, "name": name, "args": args if isinstance(args, dict) else {}}
            )
        thought = "".join(turn.reasoning)
        reply = AIMessage(
            content="".join(turn.text),
            id=turn.id,
            tool_calls=calls,
            additional_kwargs={REASONING_KEY: thought} if thought else {},
        )
        self._add(reply)
        self._step.append(reply)
        self._partial.pop(turn.id, None)
        self._calls = calls
        if self._events_model is not None:
            model, self._events_model = self._events_model, None
            self._event(self._events_out, "on_chat_model_end", MODEL_NAME, model, output=reply)
        return reply

    def _finish_step(self, node: str, out: list[tuple[str, Any]]) -> None:
        if node == AGENT_NODE:
            self._end_turn()
            if self._step and "updates" in self.modes:
                out.append(("updates", {node: {"messages": self._step}}))
            self._emit_values(out)
        elif node == TOOLS_NODE:
            self._emit_values(out)
        if self._events_node is not None:
            name, node_id = self._events_node
            self._events_node = None
            self._event(
                out, "on_chain_end", name, node_id, parent=True, output={"messages": self._step}
            )
        self._step = []

    def _tool_result(self, event: ToolCallResultEvent, out: list[tuple[str, Any]]) -> None:
        metadata = event.metadata or {}
        outcome = metadata.get("outcome")
        # The run core's results are text; AG-UI's type allows parts too.
        content = event.content if isinstance(event.content, str) else str(event.content)
        message = ToolMessage(
            content=content,
            tool_call_id=event.tool_call_id,
            id=event.message_id or None,
            name=self._tool_names.get(event.tool_call_id),
            status="error" if outcome in FAILED_OUTCOMES else "success",
            artifact=metadata.get("data"),
            response_metadata={"outcome": outcome} if outcome else {},
        )
        self._add(message)
        self._step.append(message)
        if "events" in self.modes:
            name = message.name or "tool"
            tool_id = _derived_id(self._events_id, f"tool:{event.tool_call_id}")
            self._event(out, "on_tool_end", name, tool_id, parent=True, output=message)
        if "messages-tuple" in self.modes:
            out.append(("messages", [message, {**self._meta, "langgraph_node": TOOLS_NODE}]))
        if "messages" in self.modes:
            self._first_sight(message, TOOLS_NODE, out)
            out.append(("messages/complete", [message]))
        if "updates" in self.modes:
            out.append(("updates", {TOOLS_NODE: {"messages": [message]}}))

    def _chunk(self, chunk: AIMessageChunk, out: list[tuple[str, Any]]) -> None:
        if "events" in self.modes:
            self._model_event(chunk, out)
        if "messages-tuple" in self.modes:
            out.append(("messages", [chunk, {**self._meta, "langgraph_node": self._node}]))
        if "messages" in self.modes:
            key = chunk.id or ""
            self._first_sight(chunk, self._node, out)
            so_far = self._partial.get(key)
            merged = chunk if so_far is None else so_far + chunk
            self._partial[key] = merged
            out.append(("messages/partial", [merged]))

    def _first_sight(self, message: BaseMessage, node: str, out: list[tuple[str, Any]]) -> None:
        """`messages` mode: a message's metadata before its first part."""
        key = message.id or ""
        if key not in self._seen:
            self._seen.add(key)
            meta = {**self._meta, "langgraph_node": node}
            out.append(("messages/metadata", {key: {"metadata": meta}}))

    # --- events: astream_events v2 shapes ----------------------------------------------

    def _event(
        self,
        out: list[tuple[str, Any]],
        kind: str,
        name: str,
        run_id: str,
        *,
        parent: bool = False,
        **data: Any,
    ) -> None:
        if "events" not in self.modes:
            return
        node = self._events_node
        parents = [self._events_id] if parent or kind.startswith("on_chat") else []
        if node is not None and run_id != node[1] and parents:
            parents.append(node[1])
        metadata: dict[str, Any] = {"thread_id": self._meta["thread_id"], "graph_id": self.graph_id}
        if parents:
            metadata |= {"langgraph_node": self._node, "langgraph_step": self._steps}
        out.append(
            (
                "events",
                {
                    "event": kind,
                    "name": name,
                    "run_id": run_id,
                    "tags": [f"graph:step:{self._steps}"] if parents else [],
                    "metadata": metadata,
                    "data": data,
                    "parent_ids": parents,
                },
            )
        )

    def _start_node_event(self, node: str, out: list[tuple[str, Any]]) -> None:
        if "events" not in self.modes:
            return
        node_id = _derived_id(self._events_id, f"step:{self._steps}")
        self._events_node = (node, node_id)
        self._event(out, "on_chain_start", node, node_id, parent=True, input=self.values())
        if node == TOOLS_NODE:
            for call in self._calls:
                tool_id = _derived_id(self._events_id, f"tool:{call['id']}")
                self._event(
                    out, "on_tool_start", call["name"], tool_id, parent=True, input=call["args"]
                )

    def _model_event(self, chunk: AIMessageChunk, out: list[tuple[str, Any]]) -> None:
        if self._events_model is None:
            self._events_model = _derived_id(self._events_id, f"model:{chunk.id}")
            self._event(out, "on_chat_model_start", MODEL_NAME, self._events_model, input={})
        self._event(out, "on_chat_model_stream", MODEL_NAME, self._events_model, chunk=chunk)

    # --- checkpoints, tasks, debug: from the run's checkpoints -------------------------

    def _show_checkpoints(self, upto: int | None, out: list[tuple[str, Any]]) -> None:
        """The parts of the run's checkpoints up to the `upto`-th (None: all, and the last
        one's tasks that ended: interrupted or failed), those shown already left out."""
        if self._checkpoints is None:
            return
        found = self._snapshots
        last = len(found) if upto is None else min(upto, len(found))
        while self._shown < last:
            at = self._shown
            if at > 0:
                self._task_results(found[at - 1], found[at].created_at, out)
            self._checkpoint(found[at], out)
            self._task_starts(found[at], out)
            self._shown += 1
        if upto is None and found and self._shown == len(found):
            self._task_results(found[-1], found[-1].created_at, out)
            self._shown += 1  # the last one's results are shown too

    def _checkpoint(self, snapshot: StateSnapshot, out: list[tuple[str, Any]]) -> None:
        # What a checkpoint's tasks asked is known only once they ran, the fold shows it
        # sooner or later: only the one a resumed run goes on from shows it (asked before).
        first_of_resumed = self._shown == 0 and self._first_due == 1
        payload = checkpoint_payload(snapshot, interrupts=first_of_resumed)
        if "checkpoints" in self.modes:
            out.append(("checkpoints", payload))
        if "debug" in self.modes:
            shown = {
                **payload,
                "checkpoint": _checkpoint(snapshot.config),
                "parent_checkpoint": _checkpoint(snapshot.parent_config),
            }
            out.append(("debug", _debug("checkpoint", snapshot, shown)))

    def _task_starts(self, snapshot: StateSnapshot, out: list[tuple[str, Any]]) -> None:
        for task in snapshot.tasks:
            if task.name == START:  # hidden: LangGraph's task streams leave it out
                continue
            payload = {
                "id": task.id,
                "name": task.name,
                "input": task_input(snapshot, task),
                "triggers": [PUSH] if task.path[:1] == (PUSH,) else [f"branch:to:{task.name}"],
            }
            if "tasks" in self.modes:
                out.append(("tasks", payload))
            if "debug" in self.modes:
                out.append(("debug", _debug("task", snapshot, payload, step=1)))

    def _task_results(
        self, snapshot: StateSnapshot, at: str | None, out: list[tuple[str, Any]]
    ) -> None:
        for task in snapshot.tasks:
            if task.name == START:
                continue
            if task.result is None and task.error is None and not task.interrupts:
                continue  # not ended: a cancelled run's
            payload = {
                "id": task.id,
                "name": task.name,
                "error": str(task.error) if task.error else None,
                "result": task.result if task.result is not None else {},
                # A task that went on after its answers shows what it returned, as
                # LangGraph's resumed run does, not the questions it asked before.
                "interrupts": []
                if task.result is not None
                else [{"value": i.value, "id": i.id} for i in task.interrupts],
            }
            if "tasks" in self.modes:
                out.append(("tasks", payload))
            if "debug" in self.modes:
                out.append(("debug", _debug("task_result", snapshot, payload, step=1, at=at)))

    def _emit_values(self, out: list[tuple[str, Any]]) -> None:
        if "values" in self.modes:
            out.append(("values", self.values()))

    def values(self) -> dict[str, Any]:
        """The state as the fold has it now."""
        return {**self._values, "messages": list(self._messages)}

    def _finish_run(self, event: RunFinishedEvent, out: list[tuple[str, Any]]) -> None:
        if self._turn is not None:
            self._finish_step(AGENT_NODE, out)
        if isinstance(event.outcome, RunFinishedInterruptOutcome):
            pending = [
                {"value": (i.metadata or {}).get("payload", i.message), "id": i.id}
                for i in event.outcome.interrupts
                if i.reason != BREAKPOINT  # LangGraph shows a pause at a breakpoint as none
            ]
            # As LangGraph streams a pause: `updates` the interrupts alone, `values` the
            # whole state with them (a breakpoint left out there, as langgraph-api does).
            if "updates" in self.modes:
                out.append(("updates", {INTERRUPT_KEY: pending}))
            if "values" in self.modes and pending:
                out.append(("values", {**self.values(), INTERRUPT_KEY: pending}))
        self._show_checkpoints(None, out)
        self._event(out, "on_chain_end", self.graph_id, self._events_id, output=self.values())
        out.append(("end", None))
        self.ended = True


# The run's checkpoints as the encoder asks for them: the first `need` at least (None:
# all), oldest first, after waiting for them where they are still being written.
Checkpoints = Callable[[int | None], Awaitable[Sequence[StateSnapshot]]]


def _derived_id(base: str, part: str) -> str:
    """A run id for a part of the run (a step, a model reply, a tool call): the same on
    every fold."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{base}/{part}"))


def checkpoint_payload(snapshot: StateSnapshot, *, interrupts: bool = False) -> dict[str, Any]:
    """A checkpoint as LangGraph's `checkpoints` mode has it when it is written: its
    tasks not run yet, so without interrupts unless `interrupts` (a resumed run's first
    checkpoint: its tasks asked before this run began)."""
    return {
        "config": _config(snapshot.config),
        "parent_config": _config(snapshot.parent_config),
        "values": dict(snapshot.values or {}),
        "metadata": dict(snapshot.metadata or {}),
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "interrupts": [{"value": i.value, "id": i.id} for i in task.interrupts]
                if interrupts
                else [],
                "state": None,
            }
            for task in snapshot.tasks
        ],
    }


def _config(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable", {})
    return {
        "configurable": {
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "thread_id": configurable.get("thread_id"),
            "checkpoint_id": configurable.get("checkpoint_id"),
        }
    }


def task_input(snapshot: StateSnapshot, task: PregelTask) -> Any:
    """What a task of `snapshot` is given: a node the state; a Send (the tools node's
    tasks) its packet, one per call of the last reply in order (`plan_tool_tasks`)."""
    values = dict(snapshot.values or {})
    if task.path[:1] != (PUSH,):
        return values
    index = task.path[1] if len(task.path) > 1 and isinstance(task.path[1], int) else 0
    last = next((m for m in reversed(values.get("messages", [])) if isinstance(m, AIMessage)), None)
    calls: list[Any] = [*last.tool_calls, *last.invalid_tool_calls] if last is not None else []
    return {"call": calls[index]} if index < len(calls) else {}


def _debug(
    kind: str, snapshot: StateSnapshot, payload: Any, *, step: int = 0, at: str | None = None
) -> dict[str, Any]:
    """A `debug` part: what it is, when (the checkpoint's time), the step and the payload."""
    return {
        "type": kind,
        "timestamp": at or snapshot.created_at,
        "step": (snapshot.metadata or {}).get("step", 0) + step,
        "payload": payload,
    }


# --- resources ---------------------------------------------------------------------


def human_messages(messages: Iterable[Mapping[str, Any]]) -> list[HumanMessage]:
    """A run request's AG-UI user messages as the HumanMessages the run adds."""
    return [
        HumanMessage(content=m.get("content") or "", id=m.get("id"))
        for m in messages
        if m.get("role") == "user"
    ]


def run_resource(record: RunRecord, request: Mapping[str, Any]) -> dict[str, Any]:
    """A run as langgraph-sdk's `Run`."""
    asked = request.get("protocol") or {}
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "assistant_id": asked.get("assistant_id") or assistant_id(record.graph),
        "created_at": iso(record.created_at),
        "updated_at": iso(record.finished_at or record.created_at),
        "status": RUN_STATUS[record.status],
        "metadata": asked.get("metadata") or {},
        "multitask_strategy": asked.get("multitask_strategy") or "enqueue",
        "kwargs": {"stream_mode": list(stream_modes(asked.get("stream_mode")))},
    }


def thread_status(records: Sequence[RunRecord]) -> str:
    """idle, busy, interrupted or error, from the thread's runs (newest first)."""
    if any(record.active for record in records):
        return "busy"
    if records and records[0].status in ("interrupted", "error"):
        return records[0].status
    return "idle"


def interrupts_of(snapshot: StateSnapshot) -> dict[str, list[dict[str, Any]]]:
    """The pending interrupts by task id, as LangGraph's thread shows them."""
    return {
        task.id: [{"value": i.value, "id": i.id} for i in task.interrupts]
        for task in snapshot.tasks
        if task.interrupts
    }


def thread_resource(
    thread_id: str,
    *,
    graph_id: str | None,
    created_at: float,
    updated_at: float,
    status: str,
    values: Mapping[str, Any] | None = None,
    interrupts: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A thread as langgraph-sdk's `Thread`."""
    meta = dict(metadata or {})
    if graph_id is not None:
        meta.setdefault("graph_id", graph_id)
        meta.setdefault("assistant_id", assistant_id(graph_id))
    return {
        "thread_id": thread_id,
        "created_at": iso(created_at),
        "updated_at": iso(updated_at),
        "state_updated_at": iso(updated_at),
        "metadata": meta,
        "status": status,
        "values": dict(values) if values is not None else None,
        "interrupts": dict(interrupts or {}),
        "config": {},
        "error": None,
    }


def summary_resource(summary: ThreadSummary) -> dict[str, Any]:
    """A listed thread (`POST /threads/search`)."""
    status = {"queued": "busy", "running": "busy", "interrupted": "interrupted", "error": "error"}
    return thread_resource(
        summary.thread_id,
        graph_id=summary.graph_id,
        created_at=summary.updated_at,
        updated_at=summary.updated_at,
        status=status.get(summary.status, "idle"),
        metadata={"title": summary.title},
    )


def state_resource(
    snapshot: StateSnapshot, messages: Sequence[AnyMessage] | None = None
) -> dict[str, Any]:
    """One checkpoint as langgraph-sdk's `ThreadState` (`messages`: the whole history
    in place of the state's own, for the latest state of a long thread)."""
    values = dict(snapshot.values or {})
    if messages is not None:
        values["messages"] = list(messages)
    return {
        "values": values,
        "next": list(snapshot.next),
        "tasks": [
            {
                "id": task.id,
                "name": task.name,
                "path": list(task.path),
                "error": str(task.error) if task.error else None,
                "interrupts": [{"value": i.value, "id": i.id} for i in task.interrupts],
                "checkpoint": None,
                "state": None,
                "result": task.result,
            }
            for task in snapshot.tasks
        ],
        "checkpoint": _checkpoint(snapshot.config),
        "metadata": dict(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": _checkpoint(snapshot.parent_config),
        "interrupts": [{"value": i.value, "id": i.id} for i in snapshot.interrupts],
        "checkpoint_id": (snapshot.config or {}).get("configurable", {}).get("checkpoint_id"),
        "parent_checkpoint_id": (snapshot.parent_config or {})
        .get("configurable", {})
        .get("checkpoint_id"),
    }


def _checkpoint(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    configurable = config.get("configurable", {})
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }
