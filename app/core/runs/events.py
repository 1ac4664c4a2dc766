"""LangGraph stream -> AG-UI 1.0 events: the one transformer every client shares.

`stream_run` drives a compiled ReAct graph (`AGENT_NODE`, `TOOLS_NODE`) and yields
typed `ag_ui.core` events in the contract's order: RUN_STARTED, per model turn the
text and tool-call events, TOOL_CALL_RESULT per executed call, STEP_STARTED/FINISHED
per node, then RUN_FINISHED (outcome success or interrupt) or RUN_ERROR. No HTTP here:
the SSE endpoint encodes these events, the CLI renders them.

Tool-call arguments: however the provider chunked them (split over many deltas, whole
in one chunk with the name, interleaved between parallel calls, or not streamed at
all), the TOOL_CALL_ARGS deltas of one call concatenate to its complete JSON
arguments. Chunks are tracked by their `index`; the final AIMessage of the agent
node's update is the truth, and whatever the chunks missed is emitted from it before
TOOL_CALL_END. A TOOL_CALL_RESULT carries the call's outcome in `metadata`
(`{"outcome": "ok" | "error" | "declined" | ...}`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, cast

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome, RunFinishedSuccessOutcome
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, StreamMode

from app.core.errors import ErrorCode
from app.core.observability.telemetry import FAILED
from app.core.runs.threads import STOPPED_KEY, pending_interrupts, text_of, tool_result_metadata
from app.core.storage.failures import is_lost
from graphs.model import ModelError, ModelNotConfigured
from graphs.provider_quirks import REASONING_KEY, reasoning_of
from graphs.react import AGENT_NODE, TOOLS_NODE

logger = logging.getLogger(__name__)

STREAM_MODES: Final[list[StreamMode]] = ["messages", "updates", "custom"]
# Without "messages" the model is not asked to stream: each turn arrives whole.
WHOLE_MODES: Final[list[StreamMode]] = ["updates", "custom"]
_INTERRUPT_KEY: Final = "__interrupt__"
# The reason of the interrupt a run paused at a breakpoint ends with (`interrupt_before`).
BREAKPOINT: Final = "breakpoint"

# What a client reads when a run fails: readable, no secrets, no stack trace.
RECURSION_LIMIT = "运行步数超过上限，已停止"
INTERNAL_ERROR = "运行失败：服务内部错误（详情见服务端日志）"
STORAGE_LOST = "运行失败：数据库暂时无法访问，请稍后重试"

RUN_LOG = "run thread=%s run=%s graph=%s outcome=%s steps=%d duration_ms=%.1f"


async def stream_run(
    graph: CompiledStateGraph,
    *,
    thread_id: str,
    run_id: str,
    input_or_command: dict[str, Any] | Command | None,
    config: RunnableConfig,
    stream_tokens: bool = True,
    transformer: EventTransformer | None = None,
    checkpoint_id: str | None = None,
    announce: bool = True,
    observe: Callable[[str, Any], None] | None = None,
    interrupt_before: Sequence[str] | None = None,
    interrupt_after: Sequence[str] | None = None,
    context: Mapping[str, Any] | None = None,
) -> AsyncGenerator[BaseEvent, None]:
    """Run `graph` on one thread and yield the run's AG-UI events.

    With `stream_tokens=False` (a client that only wants the outcome) the model answers
    in one piece: the same events come, each text and tool call as a single delta, and
    the per-token cost of streaming is not paid. A failure becomes a final RUN_ERROR
    event (and is logged with its traceback); cancellation (the client went away)
    propagates after closing the graph stream, so the thread keeps its last
    checkpoint. Pass `transformer` to read, after a cancel, what it had streamed.
    `checkpoint_id` runs from that checkpoint instead of the latest (a rollback);
    `announce=False` leaves out RUN_STARTED (a resumed run already sent it).
    `observe` sees every `(mode, data)` item of the graph's stream first (telemetry),
    and `(FAILED, exception)` when the run fails. `interrupt_before`/`interrupt_after`
    (node names, or "*") are LangGraph's breakpoints: a run paused at one ends with an
    interrupt outcome whose one interrupt has reason `breakpoint` (AG-UI wants one).
    `context` is the graph's runtime context.
    Logs one summary line per run.
    """
    started = time.perf_counter()
    tracker = transformer or EventTransformer()
    outcome = "cancelled"
    if announce:
        yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    start = config
    if checkpoint_id is not None:
        configurable = {**config["configurable"], "checkpoint_id": checkpoint_id}
        start = {**config, "configurable": configurable}
    try:
        stream = cast(
            AsyncGenerator[tuple[str, Any], None],
            graph.astream(
                input_or_command,
                start,
                stream_mode=STREAM_MODES if stream_tokens else WHOLE_MODES,
                interrupt_before=interrupt_before,
                interrupt_after=interrupt_after,
                # The agents declare no context schema: LangGraph passes it on as it is.
                context=cast(Any, dict(context) if context else None),
            ),
        )
        async with aclosing(stream):
            async for mode, data in stream:
                if observe is not None:
                    observe(mode, data)
                if tracker.feed(mode, data):
                    for event in tracker.drain():
                        yield event
        tracker.close()
        for event in tracker.drain():
            yield event
        interrupts = await pending_interrupts(graph, config) if tracker.interrupted else []
        if tracker.interrupted and not interrupts and (interrupt_before or interrupt_after):
            interrupts = await breakpoint_of(graph, config)
        if interrupts:
            outcome = "interrupt"
            finished = RunFinishedInterruptOutcome(interrupts=interrupts)
            yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=finished)
        else:
            outcome = "success"
            success = RunFinishedSuccessOutcome()
            yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, outcome=success)
    except Exception as exc:  # the run's top-level handler: report it, never break the stream
        if isinstance(exc, ModelNotConfigured):  # every run fails so until it is fixed
            _report_once(exc)
        else:
            logger.exception("run failed thread=%s run=%s graph=%s", thread_id, run_id, graph.name)
        outcome = "error"
        if observe is not None:
            observe(FAILED, exc)
        tracker.close()
        for event in tracker.drain():
            yield event
        yield run_error(exc)
    finally:
        elapsed_ms = (time.perf_counter() - started) * 1000
        logger.info(RUN_LOG, thread_id, run_id, graph.name, outcome, tracker.steps, elapsed_ms)


async def breakpoint_of(graph: CompiledStateGraph, config: RunnableConfig) -> list[Interrupt]:
    """A pause at a breakpoint as one AG-UI interrupt (none when nothing is next)."""
    snapshot = await graph.aget_state(config)
    if not snapshot.next:
        return []
    checkpoint_id = (snapshot.config or {}).get("configurable", {}).get("checkpoint_id")
    return [
        Interrupt(
            id=f"{BREAKPOINT}:{checkpoint_id}",
            reason=BREAKPOINT,
            metadata={"next": list(snapshot.next)},
        )
    ]


_reported: set[str] = set()  # configuration errors already logged by this process


def _report_once(exc: ModelNotConfigured) -> None:
    """A configuration error: one line, once per process, not a traceback per run."""
    if str(exc) not in _reported:
        _reported.add(str(exc))
        logger.error("configuration error: %s", exc)


def run_error(exc: BaseException) -> RunErrorEvent:
    """The RUN_ERROR event for a failed run: a readable message and a code."""
    if isinstance(exc, ModelNotConfigured):
        return run_error_event("model_not_configured", str(exc))
    if isinstance(exc, ModelError):  # its message is written to be shown to users
        return run_error_event("model_error", str(exc))
    if isinstance(exc, GraphRecursionError):
        return run_error_event("recursion_limit", RECURSION_LIMIT)
    if is_lost(exc):  # its checkpoints cannot be written: what it did since is not kept
        return run_error_event("storage_unavailable", STORAGE_LOST)
    return run_error_event("internal_error", INTERNAL_ERROR)


def run_error_event(code: ErrorCode, message: str) -> RunErrorEvent:
    """RUN_ERROR with one of the service's codes (AG-UI's own type takes any string)."""
    return RunErrorEvent(code=code, message=message)


def close_open(events: Iterable[BaseEvent]) -> list[BaseEvent]:
    """The END/FINISHED events for what `events` (a log cut short by a crash) left open."""
    texts: dict[str, None] = {}
    calls: dict[str, None] = {}
    thoughts: dict[str, None] = {}
    step: str | None = None
    for event in events:
        if isinstance(event, ReasoningStartEvent):
            thoughts[event.message_id] = None
        elif isinstance(event, ReasoningEndEvent):
            thoughts.pop(event.message_id, None)
        elif isinstance(event, TextMessageStartEvent):
            texts[event.message_id] = None
        elif isinstance(event, TextMessageEndEvent):
            texts.pop(event.message_id, None)
        elif isinstance(event, ToolCallStartEvent):
            calls[event.tool_call_id] = None
        elif isinstance(event, ToolCallEndEvent):
            calls.pop(event.tool_call_id, None)
        elif isinstance(event, StepStartedEvent):
            step = event.step_name
        elif isinstance(event, StepFinishedEvent):
            step = None
    closing: list[BaseEvent] = []
    for thought in thoughts:
        closing += [
            ReasoningMessageEndEvent(message_id=thought),
            ReasoningEndEvent(message_id=thought),
        ]
    closing += [TextMessageEndEvent(message_id=text) for text in texts]
    closing += [ToolCallEndEvent(tool_call_id=call) for call in calls]
    if step is not None:
        closing.append(StepFinishedEvent(step_name=step))
    return closing


def _dumps(args: Mapping[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


@dataclass(slots=True)
class _Call:
    """A tool call being streamed: chunks are keyed by their index."""

    id: str | None = None
    name: str | None = None
    args: str = ""
    started: bool = False


@dataclass(slots=True)
class _Turn:
    """One model reply (one AI message) being streamed."""

    id: str
    text: list[str] = field(default_factory=list)
    text_id: str | None = None
    segments: int = 0
    calls: dict[int | str, _Call] = field(default_factory=dict)
    last_key: int | str | None = None
    reasoning: list[str] = field(default_factory=list)
    reasoning_id: str | None = None  # the open reasoning message, if any
    reasoning_parts: int = 0


class EventTransformer:
    """Folds LangGraph stream items into AG-UI events; `drain()` hands out what is ready."""

    def __init__(self) -> None:
        self._out: list[BaseEvent] = []
        self._turn: _Turn | None = None
        self._step: str | None = None
        self.steps = 0
        self.interrupted = False

    def drain(self) -> list[BaseEvent]:
        out, self._out = self._out, []
        return out

    def feed(self, mode: str, data: Any) -> bool:
        """Take one `(mode, data)` stream item; True when events are ready."""
        if mode == "messages":
            message, meta = data
            if isinstance(message, AIMessageChunk) and meta.get("langgraph_node") == AGENT_NODE:
                self._chunk(message)
        elif mode == "updates":
            for node, update in data.items():
                self._update(node, update)
        elif mode == "custom":
            self._custom(data)
        return bool(self._out)

    def stopped_reply(self) -> AIMessage | None:
        """The text the open model turn had streamed, as a reply marked stopped (or None)."""
        turn = self._turn
        text = "".join(turn.text) if turn is not None else ""
        if turn is None or not text.strip():
            return None
        thought = "".join(turn.reasoning)
        return AIMessage(
            content=text,
            id=turn.id or None,
            response_metadata={STOPPED_KEY: True},
            additional_kwargs={REASONING_KEY: thought} if thought else {},
        )

    def close(self) -> None:
        """End whatever is still open (turn, step) before the run's last event."""
        if self._turn is not None:
            self._end_turn(self._turn, None)
        if self._step is not None:
            self._out.append(StepFinishedEvent(step_name=self._step))
            self._step = None

    # --- steps -----------------------------------------------------------------------

    def _enter(self, node: str) -> None:
        if node == self._step:
            return
        if self._step is not None:
            self._out.append(StepFinishedEvent(step_name=self._step))
        self._out.append(StepStartedEvent(step_name=node))
        self._step = node
        self.steps += 1

    # --- model output ----------------------------------------------------------------

    def _chunk(self, chunk: AIMessageChunk) -> None:
        self._enter(AGENT_NODE)
        content = chunk.content
        text = content if isinstance(content, str) else text_of(content)
        parts = chunk.tool_call_chunks
        thought = reasoning_of(chunk.additional_kwargs)
        if not text and not parts and not thought:
            return  # role-only and closing chunks (whose id may be a synthetic one)
        turn = self._turn
        if turn is None or (chunk.id and chunk.id != turn.id):
            if turn is not None:
                self._end_turn(turn, None)
            turn = self._turn = _Turn(id=chunk.id or "")
        if thought:
            self._reason(turn, thought)
        if text:
            self._text(turn, text)
        for part in parts:
            self._call_chunk(turn, part["index"], part["id"], part["name"], part["args"])

    def _reason(self, turn: _Turn, delta: str) -> None:
        if turn.reasoning_id is None:
            turn.reasoning_parts += 1
            part = "" if turn.reasoning_parts == 1 else f":{turn.reasoning_parts}"
            turn.reasoning_id = f"{turn.id}:reasoning{part}"
            self._out.append(ReasoningStartEvent(message_id=turn.reasoning_id))
            self._out.append(
                ReasoningMessageStartEvent(message_id=turn.reasoning_id, role="reasoning")
            )
        _keep(turn.reasoning, delta)
        self._out.append(ReasoningMessageContentEvent(message_id=turn.reasoning_id, delta=delta))

    def _end_reasoning(self, turn: _Turn) -> None:
        """Close the open reasoning: what follows is the answer or a tool call."""
        if turn.reasoning_id is not None:
            self._out.append(ReasoningMessageEndEvent(message_id=turn.reasoning_id))
            self._out.append(ReasoningEndEvent(message_id=turn.reasoning_id))
            turn.reasoning_id = None

    def _text(self, turn: _Turn, delta: str) -> None:
        self._end_reasoning(turn)
        if turn.text_id is None:
            # Text after tool calls started goes into a fresh text message.
            turn.segments += 1
            turn.text_id = turn.id if turn.segments == 1 else f"{turn.id}:{turn.segments}"
            self._out.append(TextMessageStartEvent(message_id=turn.text_id, role="assistant"))
        _keep(turn.text, delta)
        self._out.append(TextMessageContentEvent(message_id=turn.text_id, delta=delta))

    def _end_text(self, turn: _Turn) -> None:
        if turn.text_id is not None:
            self._out.append(TextMessageEndEvent(message_id=turn.text_id))
            turn.text_id = None

    def _call_chunk(
        self,
        turn: _Turn,
        index: int | None,
        call_id: str | None,
        name: str | None,
        args: str | None,
    ) -> None:
        key: int | str | None = index if index is not None else call_id or turn.last_key
        if key is None:
            key = 0
        call = turn.calls.get(key)
        if call is not None and call_id and call.id and call_id != call.id:
            # Another call at the same index (some gateways send each parallel call whole
            # at index 0): keep it apart, as LangChain's merge does.
            key = call_id
            call = turn.calls.get(key)
        turn.last_key = key
        if call is None:
            call = turn.calls[key] = _Call()
        if call_id and not call.id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        if call.started:
            if args:
                call.args += args
                self._out.append(ToolCallArgsEvent(tool_call_id=call.id or "", delta=args))
            return
        if args:
            call.args += args
        if call.id and call.name:
            self._start_call(turn, call.id, call.name)
            call.started = True
            if call.args:
                self._out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.args))

    def _start_call(self, turn: _Turn, call_id: str, name: str) -> None:
        self._end_reasoning(turn)
        self._end_text(turn)
        self._out.append(
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=turn.id)
        )

    def _end_turn(self, turn: _Turn, final: AIMessage | None) -> None:
        """Emit what the chunks missed (from `final`, the truth), then close the turn."""
        if final is not None:
            thought = reasoning_of(final.additional_kwargs)
            if thought and not turn.reasoning:  # not streamed (a whole reply): say it first
                self._reason(turn, thought)
            self._reconcile_text(turn, text_of(final.content))
        self._end_reasoning(turn)
        self._end_text(turn)
        started = {call.id: call for call in turn.calls.values() if call.started}
        for tool_call in final.tool_calls if final is not None else ():
            call_id, args = tool_call["id"] or "", tool_call["args"]
            call = started.pop(call_id, None)
            if call is None:
                self._start_call(turn, call_id, tool_call["name"])
                self._out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=_dumps(args)))
            else:
                missing = _missing_args(call.args, args)
                if missing:
                    self._out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=missing))
            self._out.append(ToolCallEndEvent(tool_call_id=call_id))
        for dropped in started:  # streamed but dropped (invalid arguments): still closed
            self._out.append(ToolCallEndEvent(tool_call_id=dropped or ""))
        if self._turn is turn:
            self._turn = None

    def _reconcile_text(self, turn: _Turn, final: str) -> None:
        if not final:
            return
        streamed = "".join(turn.text)
        if final != streamed and final.startswith(streamed):
            self._text(turn, final[len(streamed) :])

    # --- node updates ----------------------------------------------------------------

    def _update(self, node: str, update: Any) -> None:
        if node == _INTERRUPT_KEY:
            self.interrupted = True
            return
        messages = update.get("messages") if isinstance(update, dict) else None
        self._enter(node)
        if not messages:
            return
        if node == AGENT_NODE:
            calls = False
            for message in messages:
                if isinstance(message, AIMessage):
                    # The open turn is this node's model stream; no turn: nothing was streamed.
                    self._end_turn(self._turn or _Turn(id=message.id or ""), message)
                    calls = calls or bool(message.tool_calls)
            if calls:
                # The tools run next: say so now, not once the first one has finished.
                self._enter(TOOLS_NODE)
            return
        for message in messages:
            if isinstance(message, ToolMessage):
                self._out.append(
                    ToolCallResultEvent(
                        message_id=message.id or "",
                        tool_call_id=message.tool_call_id,
                        content=text_of(message.content),
                        role="tool",
                        metadata=tool_result_metadata(message),
                    )
                )

    def _custom(self, data: Any) -> None:
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            self._out.append(CustomEvent(name=data["name"], value=data.get("value")))
        else:
            self._out.append(CustomEvent(name="custom", value=data))


# Pieces of a streamed text held apart before they are joined: a str costs ~50 bytes
# beside its characters, 30,000 tokens' worth would be megabytes.
KEEP_PIECES = 256


def _keep(pieces: list[str], delta: str) -> None:
    """Add `delta` to the text `pieces` make, joined every `KEEP_PIECES`."""
    pieces.append(delta)
    if len(pieces) >= KEEP_PIECES:
        pieces[:] = ["".join(pieces)]


def _missing_args(streamed: str, args: Mapping[str, Any]) -> str:
    """What to append to the streamed argument text so that it parses to `args`."""
    if not streamed:
        return _dumps(args)
    try:
        if json.loads(streamed) == args:
            return ""
    except json.JSONDecodeError:
        pass
    whole = _dumps(args)
    # A cut-off stream can be completed; a diverging one cannot be taken back.
    return whole[len(streamed) :] if whole.startswith(streamed) else ""
