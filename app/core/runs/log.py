"""A run's event log in this process: numbered, written in batches, read once written.

`LiveLog.emit` numbers an event and hands it to the `LogWriter`, which writes whatever
is pending (of every run) in one transaction, streamed text within a few milliseconds
and other events within a few tens, then marks it durable. Readers
(`LiveLog.follow`) only ever see durable events: a crash can lose events that no
client has seen, never one that a client has, so ids stay unique across a restart.
Every event has its secrets masked before it is numbered: what the log holds is what
any client (SSE, the terminal, a rejoin) may see. Streamed pieces (text, reasoning, a
tool call's arguments) are masked as the whole text they make (`StreamMasker`): the
last few characters of each stream wait for the next piece or the stream's end.

Memory per run is bounded, not per event: consecutive pieces of one stream that the
writer has not taken yet are one event (one number, one row), so a reply costs a few
events per write, not one per token; and only the last `TAIL` written events stay in
memory for live readers, a reader further behind reads them from the store. No reader
sees an event before it is durable, so merging what none has seen keeps every id.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing, suppress
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Event,
    EventType,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
)
from pydantic import TypeAdapter

from app.core.storage.runs import RunEnd, RunStore
from tools.secrets import Redactor, StreamMasker

logger = logging.getLogger(__name__)

BURST_TURNS = 3
# Streamed text, what a reader watches appear: at most one write per COALESCE_S. Any
# other event waits up to BATCH_WAIT_S for company (the next text, the run's end): a
# run's lifecycle and tool events otherwise cost a transaction per phase of the run.
COALESCE_S = 0.004
BATCH_WAIT_S = 0.025
# Written events a live log keeps for its readers (who mostly follow within a batch);
# a reader further behind costs one store read.
TAIL = 256
STREAMED = frozenset({EventType.TEXT_MESSAGE_CONTENT, EventType.REASONING_MESSAGE_CONTENT})
TERMINAL = frozenset({EventType.RUN_FINISHED, EventType.RUN_ERROR})
_TERMINAL_JSON = ('{"type":"RUN_FINISHED"', '{"type":"RUN_ERROR"')
# A streamed text's pieces, and what ends each stream.
Piece = TextMessageContentEvent | ReasoningMessageContentEvent | ToolCallArgsEvent
StreamEnd = TextMessageEndEvent | ReasoningMessageEndEvent | ToolCallEndEvent
Stream = tuple[type[Piece], str]  # the type of its pieces and its message or call id
_event: TypeAdapter[Any] = TypeAdapter(Event)


def encode(event: BaseEvent) -> str:
    """The event as the JSON a client receives (AG-UI's own encoding)."""
    return event.model_dump_json(by_alias=True, exclude_none=True)


def decode(data: str) -> BaseEvent:
    event: BaseEvent = _event.validate_json(data)
    return event


@dataclass(slots=True)
class Entry:
    """One logged event: its number, its JSON and (when made here) the event itself.

    Made here, a piece's `data` is "" until its log seals it (`LiveLog.seal`).
    """

    seq: int
    data: str
    event: BaseEvent | None = None

    def typed(self) -> BaseEvent:
        if self.event is None:
            self.event = decode(self.data)
        return self.event


def _stream(piece: Piece) -> Stream:
    if isinstance(piece, ToolCallArgsEvent):
        return ToolCallArgsEvent, piece.tool_call_id
    return type(piece), piece.message_id


def _ended(end: StreamEnd) -> Stream:
    if isinstance(end, ToolCallEndEvent):
        return ToolCallArgsEvent, end.tool_call_id
    if isinstance(end, TextMessageEndEvent):
        return TextMessageContentEvent, end.message_id
    return ReasoningMessageContentEvent, end.message_id


class LiveLog:
    """The events of one run this process executes, after the `base` already stored."""

    def __init__(
        self,
        thread_id: str,
        run_id: str,
        writer: LogWriter,
        *,
        base: int = 0,
        redact: Redactor | None = None,
    ) -> None:
        self._redact = redact or Redactor(())
        self.thread_id = thread_id
        self.run_id = run_id
        self.base = base
        self.entries: list[Entry] = []  # the tail held in memory: seq `_first` onwards
        self._first = base + 1
        self._last = base
        self.durable = base
        # Every event up to `_stored` is in the store; after a lost write nothing more
        # leaves memory (a reader could find it nowhere else).
        self._stored = base
        self._lost = False
        self.closed = False  # no event will follow (the run ended, or was left to resume)
        self._writer = writer
        self._changed = asyncio.Event()
        # The open streams' maskers, by (piece type, stream id), and a piece of each to
        # copy for what they still hold.
        self._streams: dict[Stream, tuple[StreamMasker, Piece]] = {}
        # The last entry while further pieces of its stream may join it, and theirs.
        self._open: Entry | None = None
        self._open_stream: Stream | None = None
        self._parts: list[str] = []

    @property
    def last(self) -> int:
        return self._last

    def emit(self, event: BaseEvent) -> None:
        """Number `event` (its secrets masked) and queue it for writing (a piece may wait
        for the next one: see the module)."""
        for masked in self._masked(event):
            self._append(masked)

    def _masked(self, event: BaseEvent) -> list[BaseEvent]:
        """What to log for `event`: a piece as much of it as may be shown now; an end
        after what its stream still held; a run's end after what every stream held."""
        if not self._redact:
            return [event]
        if isinstance(event, Piece):
            masker, _ = self._streams.setdefault(
                _stream(event), (StreamMasker(self._redact), event)
            )
            shown = masker.feed(event.delta)
            return [event.model_copy(update={"delta": shown})] if shown else []
        if isinstance(event, StreamEnd):
            return [*self._rest(_ended(event)), event]
        if event.type in TERMINAL:
            return [piece for key in list(self._streams) for piece in self._rest(key)] + [event]
        return [event]

    def _rest(self, stream: Stream) -> list[BaseEvent]:
        opened = self._streams.pop(stream, None)
        if opened is None:
            return []
        masker, piece = opened
        rest = masker.flush()
        return [piece.model_copy(update={"delta": rest})] if rest else []

    def _append(self, event: BaseEvent) -> None:
        piece = event if isinstance(event, Piece) else None
        stream = _stream(piece) if piece is not None else None
        if piece is not None and self._open is not None and stream == self._open_stream:
            self._parts.append(piece.delta)
            return
        self.seal()
        self._last += 1
        entry = Entry(self._last, "", event)
        if piece is None:
            _fill(entry, event, self._redact)
        else:
            self._open, self._open_stream, self._parts = entry, stream, [piece.delta]
        self.entries.append(entry)
        self._writer.add(self, entry)

    def seal(self) -> None:
        """Close the open piece to further pieces and give it its JSON (the writer is
        taking it, or another event follows it)."""
        entry = self._open
        if entry is None:
            return
        event = entry.event
        assert event is not None
        if len(self._parts) > 1:
            event = event.model_copy(update={"delta": "".join(self._parts)})
        self._open, self._open_stream, self._parts = None, None, []
        _fill(entry, event, self._redact)

    def wrote(self, seq: int, *, stored: bool = True) -> None:
        """The writer is done with the events up to `seq` (`stored`: they are in the store)."""
        if not stored:
            self._lost = True
        elif not self._lost:
            self._stored = max(self._stored, seq)
        if seq > self.durable:
            self.durable = seq
            self._wake()
        drop = min(self._stored, self.durable) - self._first + 1 - TAIL
        if drop > 0:
            del self.entries[:drop]
            self._first += drop

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait(self) -> None:
        await self._changed.wait()

    async def follow(self, store: RunStore, after: int = 0) -> AsyncGenerator[Entry, None]:
        """The run's events after `after`: stored ones first, then each once it is durable."""
        async with aclosing(self.follow_batches(store, after)) as batches:
            async for batch in batches:
                for entry in batch:
                    yield entry

    async def follow_batches(
        self, store: RunStore, after: int = 0
    ) -> AsyncGenerator[list[Entry], None]:
        """`follow`, as the batches in which events became durable (a stream sends each
        batch at once: one write to the socket instead of one per event)."""
        while True:
            if after + 1 < self._first:  # stored before this process, or left memory since
                rows = await store.events(self.thread_id, self.run_id, after)
                first = self._first
                stored = [Entry(seq, data) for seq, data in rows if seq < first]
                after = max(after, first - 1)
                if stored:
                    yield stored
                continue
            start = after + 1 - self._first
            stop = self.durable + 1 - self._first
            batch = self.entries[start:stop]
            if batch and is_terminal(batch[-1]) and not self.closed:
                batch.pop()  # shown once the run has let its thread go: a reply may follow
            if batch:
                after = batch[-1].seq
                yield batch
                if is_terminal(batch[-1]):
                    return
            if self.closed and after >= self.last:
                return
            if not batch:
                await self._wait()


def _fill(entry: Entry, event: BaseEvent, redact: Redactor) -> None:
    """Give `entry` the event and its JSON, with any secret an upstream echoed masked."""
    data = encode(event)
    if redact.found(data):  # rare: the masking upstream of the log missed it
        clean = redact.value(event.model_dump(mode="json", by_alias=True))
        event = decode(json.dumps(clean, ensure_ascii=False))
        data = encode(event)
    entry.event, entry.data = event, data


def is_terminal(entry: Entry) -> bool:
    """True for a run's last event (RUN_FINISHED or RUN_ERROR)."""
    if entry.event is not None:
        return entry.event.type in TERMINAL
    return entry.data.startswith(_TERMINAL_JSON)


class LogWriter:
    """Writes every run's pending events in batches: one transaction per turn of its loop.

    Streamed text is written within `COALESCE_S` of the last write, any other event
    within `BATCH_WAIT_S` of being made (with the next write, if sooner). A run's end
    (`end`) goes in the same transaction as its last events, at once.
    """

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._pending: list[tuple[LiveLog, Entry]] = []
        self._ends: list[tuple[RunEnd, asyncio.Future[None]]] = []
        self._kick = asyncio.Event()
        self._hurry = asyncio.Event()  # streamed text or a run's end came: wait less
        self._streamed = False  # streamed text is pending
        self._pending_since = 0.0
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._written_at = 0.0

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="run-log-writer")

    def add(self, log: LiveLog, entry: Entry) -> None:
        if not self._pending:
            self._pending_since = asyncio.get_running_loop().time()
        self._pending.append((log, entry))
        if entry.event is not None and entry.event.type in STREAMED and not self._streamed:
            self._streamed = True
            self._hurry.set()
        self._idle.clear()
        self._kick.set()

    async def end(self, run_end: RunEnd) -> None:
        """Record a run's end after its events; return once it is written."""
        written = asyncio.get_running_loop().create_future()
        self._ends.append((run_end, written))
        self._idle.clear()
        self._kick.set()
        self._hurry.set()
        await written

    async def stop(self) -> None:
        """Write what is pending, then stop."""
        await self._idle.wait()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        while True:
            await self._kick.wait()
            # Let the runs that are producing finish their current burst first: one
            # transaction for many events costs less than one each, and they wait the
            # same for a client.
            for _ in range(BURST_TURNS):
                await asyncio.sleep(0)
            await self._coalesce()
            self._kick.clear()
            self._streamed = False
            batch, self._pending = self._pending, []
            ends, self._ends = self._ends, []
            newest: dict[LiveLog, int] = {}
            for log, entry in batch:
                newest[log] = entry.seq
            for log in newest:  # pieces that come during the write make new events
                log.seal()
            stored = True
            try:
                await self._store.write(
                    ((log.thread_id, log.run_id, entry.seq, entry.data) for log, entry in batch),
                    [run_end for run_end, _ in ends],
                )
            except Exception:  # a lost batch must not stop the runs: they are checkpointed
                stored = False
                logger.exception("could not write %d run events", len(batch))
            for log, seq in newest.items():  # one wake-up per run and batch, not per event
                log.wrote(seq, stored=stored)
            for _, written in ends:
                if not written.done():
                    written.set_result(None)
            self._written_at = asyncio.get_running_loop().time()
            if not self._pending and not self._ends:
                self._idle.set()

    async def _coalesce(self) -> None:
        """Until the pending events are due (see the class), or a run's end comes.

        Tokens a model streams fast (or many runs at once) would each cost a transaction
        and a socket write to every client: one write for all of them costs less, and a
        few milliseconds are not seen. A run's end is never held back.
        """
        loop = asyncio.get_running_loop()
        while not self._ends:
            due = self._pending_since + BATCH_WAIT_S
            if self._streamed:
                due = min(due, self._written_at + COALESCE_S)
            wait = due - loop.time()
            if wait <= 0:
                return
            self._hurry.clear()
            with suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._hurry.wait()
