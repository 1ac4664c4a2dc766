"""The run core's entry point: start a run, read or forget a thread.

`open_service(settings)` opens the checkpointer and compiles the agents once. Every
client (the HTTP routes, the in-process CLI) starts a run through
`AgentService.start_run`, which checks the request, claims the thread, prepares
the input and returns a `Run`: its `events()` stream the graph as AG-UI events
and release the thread when they end; `result()` folds a run into the messages it
added, read back from the thread's state. A run stopped while its answer streamed
keeps the text shown so far as the assistant's reply, marked stopped, and holds the
thread until that is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    Message,
    ResumeEntry,
    RunErrorEvent,
    RunFinishedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from app.core.errors import Conflict, NotFound
from app.core.events import EventTransformer, stream_run
from app.core.leases import Lease, ThreadLocks
from app.core.prepare import PreparedRun, check_thread_id, prepare_run
from app.core.registry import GraphInfo, available_graphs, compile_graphs, describe
from app.core.storage import open_checkpointer
from app.core.threads import ThreadView, delete_thread, read_thread, to_agui_messages
from app.settings import Settings
from graphs.model import ModelNotConfigured, shared_model
from graphs.react import AGENT_NODE

logger = logging.getLogger(__name__)

UNKNOWN_GRAPH = "unknown graph {graph_id!r}; available: {available}"
UNKNOWN_THREAD = "thread {thread_id} not found"
THREAD_RUNNING = "thread {thread_id} has a run in progress"


@dataclass(slots=True)
class RunResult:
    """What a run added to its thread (AG-UI messages), and how it ended."""

    messages: list[Message]
    interrupts: list[Interrupt]
    error: RunErrorEvent | None


class Run:
    """A started run: it holds its thread's lease until its events end or it is released."""

    def __init__(
        self,
        graph: CompiledStateGraph,
        prepared: PreparedRun,
        *,
        run_id: str,
        lease: Lease,
        stream_tokens: bool,
        writes: set[asyncio.Future[Any]],
    ) -> None:
        self._graph = graph
        self._prepared = prepared
        self._lease = lease
        self._stream_tokens = stream_tokens
        self._saving: asyncio.Future[Any] | None = None
        self._writes = writes
        self.thread_id = prepared.thread_id
        self.run_id = run_id

    async def events(self) -> AsyncGenerator[BaseEvent, None]:
        """The run's AG-UI events, RUN_STARTED to RUN_FINISHED or RUN_ERROR."""
        transformer = EventTransformer()
        try:
            events = stream_run(
                self._graph,
                thread_id=self.thread_id,
                run_id=self.run_id,
                input_or_command=self._prepared.input,
                config=self._prepared.config,
                stream_tokens=self._stream_tokens,
                transformer=transformer,
            )
            async with aclosing(events):
                async for event in events:
                    yield event
        except asyncio.CancelledError:
            reply = transformer.stopped_reply()
            if reply is not None:
                self._keep(reply)
            raise
        finally:
            self.release()

    def _keep(self, reply: AIMessage) -> None:
        """Write a stopped run's shown text to the thread; the lease waits for the write.

        A task of its own, not awaited: a cancelled caller (an HTTP disconnect cancels
        again at every await) must not lose it. The lease is marked abandoned, so a new
        run on the thread waits for it instead of being refused.
        """
        self._lease.abandon()
        self._saving = asyncio.ensure_future(
            self._graph.aupdate_state(
                self._prepared.config, {"messages": [reply]}, as_node=AGENT_NODE
            )
        )
        self._saving.add_done_callback(self._saved)
        self._writes.add(self._saving)
        self._saving.add_done_callback(self._writes.discard)

    def _saved(self, saving: asyncio.Future[Any]) -> None:
        if not saving.cancelled() and saving.exception() is not None:
            logger.error("could not keep a stopped reply", exc_info=saving.exception())
        self._lease.release()

    async def result(self) -> RunResult:
        """Run to the end; the messages it added, its interrupts, its error if any."""
        interrupts: list[Interrupt] = []
        error: RunErrorEvent | None = None
        async with aclosing(self.events()) as events:
            async for event in events:
                if isinstance(event, RunFinishedEvent):
                    if isinstance(event.outcome, RunFinishedInterruptOutcome):
                        interrupts = list(event.outcome.interrupts)
                elif isinstance(event, RunErrorEvent):
                    error = event
        snapshot = await self._graph.aget_state(self._prepared.config)
        known = self._prepared.known
        added = [
            message
            for message in (snapshot.values or {}).get("messages", [])
            if message.id not in known
        ]
        return RunResult(to_agui_messages(added), interrupts, error)

    def abandon(self) -> None:
        """The client went away: the run is about to be cancelled."""
        self._lease.abandon()

    def release(self) -> None:
        """Let the thread go (idempotent; the events release it themselves when they end).

        While a stopped reply is being written, the write releases it when done.
        """
        if self._saving is None or self._saving.done():
            self._lease.release()


class AgentService:
    """The compiled agents on one checkpointer, and one run per thread at a time."""

    def __init__(
        self,
        settings: Settings,
        graphs: dict[str, CompiledStateGraph],
        listing: list[GraphInfo],
        saver: BaseCheckpointSaver,
    ) -> None:
        self.settings = settings
        self.graphs = graphs
        self.listing = listing
        self.saver = saver
        self.locks = ThreadLocks()
        # Writes a stopped run left going; the store stays open until they land.
        self.writes: set[asyncio.Future[Any]] = set()

    def graph(self, graph_id: str) -> CompiledStateGraph:
        """The compiled agent `graph_id`; NotFound when there is none."""
        graph = self.graphs.get(graph_id)
        if graph is None:
            available = ", ".join(self.graphs) or "none"
            raise NotFound(
                "unknown_graph", UNKNOWN_GRAPH.format(graph_id=graph_id[:100], available=available)
            )
        return graph

    async def start_run(
        self,
        graph_id: str,
        *,
        thread_id: str,
        run_id: str,
        messages: Sequence[Message] = (),
        resume: Sequence[ResumeEntry] | None = None,
        stream_tokens: bool = True,
    ) -> Run:
        """Check, claim the thread, prepare: the one way a run starts.

        Raises a ServiceError (nothing changed, the thread left free) when the request
        or the thread's state refuses the run.
        """
        graph = self.graph(graph_id)
        lease = await self.locks.claim(check_thread_id(thread_id))
        try:
            prepared = await prepare_run(
                graph,
                graph_id=graph_id,
                thread_id=thread_id,
                messages=messages,
                resume=resume,
                max_message_bytes=self.settings.agent_max_message_bytes,
            )
        except BaseException:
            lease.release()
            raise
        return Run(
            graph,
            prepared,
            run_id=run_id,
            lease=lease,
            stream_tokens=stream_tokens,
            writes=self.writes,
        )

    async def thread(self, thread_id: str) -> ThreadView:
        """The thread's messages and pending interrupts; NotFound when it does not exist."""
        view = await read_thread(self.graphs, self.saver, check_thread_id(thread_id))
        if view is None:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        return view

    async def forget_thread(self, thread_id: str) -> None:
        """Forget every checkpoint of the thread (refused while a run is in progress)."""
        if self.locks.busy(check_thread_id(thread_id)):
            raise Conflict("thread_busy", THREAD_RUNNING.format(thread_id=thread_id))
        await delete_thread(self.saver, thread_id)


@asynccontextmanager
async def open_service(
    settings: Settings, *, only: str | None = None
) -> AsyncIterator[AgentService]:
    """The service on `settings.agent_db`, every agent compiled (or just `only`)."""
    async with open_checkpointer(settings.agent_db) as saver:
        modules = available_graphs(settings, only)
        graphs = compile_graphs(modules, saver, settings)
        # HTTP clients and TLS set-up are start-up work; a missing key is not fatal here:
        # the first run reports it.
        with suppress(ModelNotConfigured):
            shared_model(settings)
        service = AgentService(settings, graphs, describe(modules), saver)
        try:
            yield service
        finally:
            await asyncio.gather(*service.writes, return_exceptions=True)
