"""A run this process holds: its record, its event log, its task and its phase.

The phase is the one truth of where the run stands in this process (`NEXT_PHASES` has
the moves between them):

- `underway`: queued or running (its record says which); nothing asked it to stop;
- `cancelling`: asked to stop; it ends `cancelled`;
- `suspending`: stopped for a shutdown or a lost lease; it stays active in the database,
  for the next start or another process to resume;
- `finishing`: its end is being recorded;
- `left`: this process holds it no more (it ended, was refused, or was suspended).

`Run.left`, the event others wait on, is set exactly when the phase becomes `left`.
Whether it entered its graph is whether it has a `prepared` run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from ag_ui.core import BaseEvent, Interrupt, Message, RunErrorEvent, RunFinishedEvent
from ag_ui.core.events import RunFinishedInterruptOutcome
from langgraph.graph.state import CompiledStateGraph
from pydantic import TypeAdapter

from app.core.runs.log import Entry, LiveLog, LogWriter
from app.core.runs.prepare import PreparedRun
from app.core.runs.threads import to_agui_messages
from app.core.storage.runs import RunRecord, RunStore
from tools.secrets import Redactor

RunPhase = Literal["underway", "cancelling", "suspending", "finishing", "left"]
NEXT_PHASES: dict[RunPhase, frozenset[RunPhase]] = {
    "underway": frozenset({"cancelling", "suspending", "finishing", "left"}),
    "cancelling": frozenset({"suspending", "finishing", "left"}),
    # A suspend lands at the task's next await: the run may be recording its end by then.
    "suspending": frozenset({"finishing", "left"}),
    "finishing": frozenset({"suspending", "left"}),
    "left": frozenset(),
}
# On their way out of this process: a new run of their thread may wait for them.
LEAVING: frozenset[RunPhase] = frozenset({"cancelling", "suspending", "finishing"})

messages_adapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


@dataclass(slots=True)
class RunResult:
    """What a run added to its thread (AG-UI messages), and how it ended."""

    messages: list[Message]
    interrupts: list[Interrupt]
    error: RunErrorEvent | None


class Run:
    """A run this process executes: its record, its event log, its task and its phase."""

    def __init__(
        self,
        graph: CompiledStateGraph | None,
        record: RunRecord,
        request: dict[str, Any],
        *,
        store: RunStore,
        writer: LogWriter,
        redact: Redactor,
        base: int = 0,
        checkpoint_before: str | None = None,
    ) -> None:
        self.record = record
        self.request = request
        self.log = LiveLog(record.thread_id, record.run_id, writer, base=base, redact=redact)
        self.task: asyncio.Task[None] | None = None
        self.prepared: PreparedRun | None = None  # set as it enters its graph
        self.checkpoint_before = checkpoint_before
        self.rollback_from: Run | None = None
        self.rollback_id: str | None = None  # the run a rollback undoes, wherever it ran
        self.leased_at: float | None = None  # when this process got the thread's lease
        self.left = asyncio.Event()
        self._phase: RunPhase = "underway"
        self._store = store
        self._redact = redact
        self._graph = graph

    @property
    def thread_id(self) -> str:
        return self.record.thread_id

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def phase(self) -> RunPhase:
        return self._phase

    def enter(self, phase: RunPhase) -> None:
        """Move to `phase`; a move the lifecycle does not have is a bug (ValueError)."""
        if phase == self._phase:
            return
        if phase not in NEXT_PHASES[self._phase]:
            raise ValueError(f"run {self.run_id}: no way from {self._phase} to {phase}")
        self._phase = phase
        if phase == "left":
            self.left.set()

    def entries(self, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's logged events after `after`, then each new one, to its last."""
        return self.log.follow(self._store, after)

    def batches(self, after: int = 0) -> AsyncGenerator[list[Entry], None]:
        """`entries`, in the batches they were written in."""
        return self.log.follow_batches(self._store, after)

    async def events(self, after: int = 0) -> AsyncIterator[BaseEvent]:
        """The same, as typed AG-UI events (RUN_STARTED to RUN_FINISHED or RUN_ERROR)."""
        async with aclosing(self.entries(after)) as entries:
            async for entry in entries:
                yield entry.typed()

    async def result(self) -> RunResult:
        """Wait for the run's end; the messages it added, its interrupts, its error if any."""
        interrupts: list[Interrupt] = []
        error: RunErrorEvent | None = None
        async for event in self.events():
            if isinstance(event, RunFinishedEvent):
                if isinstance(event.outcome, RunFinishedInterruptOutcome):
                    interrupts = list(event.outcome.interrupts)
            elif isinstance(event, RunErrorEvent):
                error = event
        prepared = self.prepared
        if prepared is None or self._graph is None:
            return RunResult([], interrupts, error)
        snapshot = await self._graph.aget_state(prepared.config)
        added = [
            message
            for message in (snapshot.values or {}).get("messages", [])
            if message.id not in prepared.known
        ]
        messages = to_agui_messages(added)
        redact = self._redact
        if any(redact.found(message.model_dump_json()) for message in messages):
            messages = messages_adapter.validate_python(
                redact.value([m.model_dump(by_alias=True) for m in messages])
            )
        return RunResult(messages, interrupts, error)

    def cancel(self) -> None:
        """Stop the run at its next await point; its log ends `cancelled`. Only an
        underway run: one that is stopping or recording its end already goes its way."""
        if self._phase != "underway":
            return
        self.enter("cancelling")
        if self.task is not None:
            self.task.cancel()

    def suspend(self) -> None:
        """Stop the run for a shutdown or a lost lease: it stays active, for the next
        start or another process to resume."""
        if self._phase in ("suspending", "left"):
            return
        self.enter("suspending")
        if self.task is not None and not self.task.done():
            self.task.cancel()
