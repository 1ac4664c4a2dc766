"""The run core's entry point: start, follow and cancel runs; read or forget a thread.

`open_service(settings)` opens the checkpointer and the run store and compiles the
agents; with `recover=True` it resumes the runs a dead process left active. Every
client starts a run through `AgentService.start_run`: it checks the request, records
the run and executes it as a task of its own, so a run outlives the connection that
started it. A run's events go to its log (`app.core.runs.log`) and clients follow the
log, from the start or from any event.

One run per thread at a time, across every process on the database: the database
admits a run (`RunStore.admit`) and leases the thread to the running one; a new run
while another is active follows its multitask strategy (reject, enqueue, interrupt,
rollback), and a queued run takes its turn when the thread is free, woken by the end of
the run ahead of it (`app.core.runs.turns`).
`app.core.runs.recovery` keeps this process in step with the others: it renews the
leases, finds the runs of dead processes (which `take_over` resumes) and passes on the
cancels sent through another process. A run held here is an `app.core.runs.run.Run`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager, contextmanager, suppress
from typing import Any, cast

from ag_ui.core import (
    BaseEvent,
    Message,
    ResumeEntry,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointMetadata
from langgraph.errors import InvalidUpdateError
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import StateSnapshot
from pydantic import TypeAdapter

from app.core.errors import (
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ServiceError,
    TooMany,
    Unavailable,
    run_error_code,
)
from app.core.observability.telemetry import Telemetry
from app.core.registry import GraphInfo, available_graphs, compile_graphs, describe
from app.core.runs.events import (
    EventTransformer,
    close_open,
    run_error,
    run_error_event,
    stream_run,
)
from app.core.runs.log import Entry, LogWriter, decode, encode, is_terminal
from app.core.runs.prepare import (
    CALL_ABANDONED,
    PreparedRun,
    abandoned_calls,
    check_messages,
    check_node,
    check_thread_id,
    prepare_run,
)
from app.core.runs.recovery import Recovery, this_process
from app.core.runs.run import LEAVING, Run, messages_adapter
from app.core.runs.threads import (
    GRAPH_KEY,
    RUN_KEY,
    ThreadState,
    ThreadView,
    delete_thread,
    read_state,
    read_thread,
    run_config,
    state_history,
)
from app.core.runs.titles import ThreadTitles
from app.core.runs.transcript import ThreadTranscript
from app.core.runs.turns import Turns
from app.core.storage.backends import open_storage, settle_cancelled_writes
from app.core.storage.failures import is_lost
from app.core.storage.memory import open_memory
from app.core.storage.runs import (
    MultitaskStrategy,
    RunEnd,
    RunError,
    RunRecord,
    RunStatus,
    RunStore,
    StoredRun,
    ThreadOrigin,
    ThreadSummary,
    plain_title,
)
from app.core.users.fair_use import FairUse, TokenCount, day_of, too_many_runs
from app.core.users.identity import OPEN, Caller
from app.settings import Settings
from graphs.model import ModelNotConfigured, shared_model
from graphs.react import AGENT_NODE, TOOLS_NODE
from graphs.transcript import TRANSCRIPT_KEY
from tools.secrets import redactor_for

logger = logging.getLogger(__name__)

UNKNOWN_GRAPH = "unknown graph {graph_id!r}; available: {available}"
UNKNOWN_THREAD = "thread {thread_id} not found"
UNKNOWN_RUN = "run {run_id} not found on thread {thread_id}"
THREAD_BUSY = (
    "thread {thread_id} already has a run in progress ({run_id}); wait for it, or send "
    'with multitaskStrategy "enqueue", "interrupt" or "rollback"'
)
THREAD_RUNNING = "thread {thread_id} has a run in progress"
RUN_EXISTS = "thread {thread_id} already has a run {run_id}; use a new runId"
RUN_FINISHED = "run {run_id} has already finished ({status})"
EVENTS_EXPIRED = (
    "the events of run {run_id} have expired (kept {ttl:g} s after a run ends); "
    "read the thread's messages instead"
)
BAD_RUN_ID = "invalid run id {value!r}: use 1-128 letters, digits or ._:@- characters"
SHUTTING_DOWN = "the service is shutting down; retry in a moment"
THREAD_QUEUE_FULL = (
    "thread {thread_id} already has {limit} runs waiting (AGENT_MAX_QUEUED_PER_THREAD); "
    "retry when one has ended"
)
SERVICE_QUEUE_FULL = "{limit} runs are already waiting here (AGENT_MAX_QUEUED); retry later"
# What a refused client is told to wait: a queued run's turn comes when a run ends.
QUEUE_RETRY_AFTER_S = 5
BAD_TITLE = "a thread title must have 1-{limit} characters besides leading and trailing spaces"
MAX_TITLE_CHARS = 200
CANCELLED = "运行已被取消"
NOT_RESUMABLE = "运行无法恢复：智能体 {graph!r} 已不在本服务中"
RESUME_FAILED = "运行无法恢复：{reason}"
MOVED_ON = "运行无法恢复：此后会话中已有其他运行，继续它会改写新的历史"

# A new run waits this long for the runs of its thread that are leaving this process
# (being cancelled, suspended or recording their end) before it counts them as busy.
LEAVING_WAIT_S = 5.0
PURGE_EVERY_S = 60.0
READY_TIMEOUT_S = 1.0  # how long /readyz waits for the database
# Where a run request keeps what its protocol asked beyond the run (`start_run`).
PROTOCOL_KEY = "protocol"
# Where a run request keeps the checkpoint a fork starts from (`start_run`).
FORK_KEY = "checkpointId"
# Where a run request keeps LangGraph's breakpoints, and that it has no input (`start_run`).
BEFORE_KEY = "interruptBefore"
AFTER_KEY = "interruptAfter"
NO_INPUT_KEY = "noInput"
# Where a run request keeps the graph config and context its client asked for (`start_run`).
CONFIG_KEY = "config"
CONTEXT_KEY = "context"
UNKNOWN_CHECKPOINT = "thread {thread_id} has no checkpoint {checkpoint_id}"
# Where a run request keeps LangGraph's `command.update`/`goto` (`start_run`).
COMMAND_KEY = "command"
BAD_UPDATE = "the state update was refused: {reason}"
RUN_ACTIVE = "run {run_id} is {status}: cancel it first"
LATER_RUN = "run {run_id} cannot be rolled back: run {later} of the thread came after it"

# Another process's log: its events are not announced (a NOTIFY per log write would
# serialize every commit that carries one, on the busiest path), so a reader polls.
POLL_S = 0.1

_answers: TypeAdapter[list[ResumeEntry]] = TypeAdapter(list[ResumeEntry])


class AgentService:
    """The compiled agents on one database: runs, their logs, and one run per thread."""

    def __init__(
        self,
        settings: Settings,
        graphs: dict[str, CompiledStateGraph],
        listing: list[GraphInfo],
        saver: BaseCheckpointSaver,
        store: RunStore,
        telemetry: Telemetry | None = None,
        schema: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.settings = settings
        self.graphs = graphs
        self.listing = listing
        self.saver = saver
        self.store = store
        self.writer = LogWriter(store)
        # Where the graphs' working states hand what their models will not see again.
        self.transcript = ThreadTranscript(store, saver.serde)
        self.redact = redactor_for(settings)
        self.telemetry = telemetry or Telemetry()
        self.owner = this_process()
        self.lease_s = settings.agent_run_lease_s
        self.closing = False
        self._closing_at = 0.0
        self._purged_at = 0.0
        # The active (queued or running) runs of each thread this process holds, in order.
        self._threads: dict[str, list[Run]] = {}
        # Who waits for a thread's next admitted run (`admissions`).
        self._admission_waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._turns = Turns(store, self.owner, self.lease_s)
        self.recovery = Recovery(self)
        self.titles = ThreadTitles(settings, graphs, store, self.redact)
        self.fair_use = FairUse(
            store,
            rpm=settings.agent_user_rpm,
            max_runs=settings.agent_user_max_runs,
            tokens_per_day=settings.agent_user_tokens_per_day,
        )
        # Raises unless the database has its tables, restoring them where it can
        # (`app.core.storage.backends.Storage.schema`).
        self.schema = schema or _schema_unchecked
        # LangGraph's store, the graphs' `store` too (`app.core.storage.memory`); None
        # when the service was built without one.
        self.memory: BaseStore | None = None

    def graph(self, graph_id: str) -> CompiledStateGraph:
        """The compiled agent `graph_id`; NotFound when there is none."""
        graph = self.graphs.get(graph_id)
        if graph is None:
            available = ", ".join(self.graphs) or "none"
            raise NotFound(
                "unknown_graph", UNKNOWN_GRAPH.format(graph_id=graph_id[:100], available=available)
            )
        return graph

    def active_runs(self) -> list[tuple[str, RunStatus]]:
        """(graph, status) of every run this process holds (queued or running)."""
        return [(run.record.graph, run.record.status) for run in self.held_runs()]

    def held_runs(self) -> list[Run]:
        """Every run this process holds, each thread's in order."""
        return [run for queue in self._threads.values() for run in queue]

    @contextmanager
    def admissions(self, thread_id: str) -> Iterator[asyncio.Future[None]]:
        """A future done once this process admits a run to the thread, while in the block.

        Watch first, then read the thread's runs: a run admitted after the read is then
        never missed. One another process admits is heard where the store can tell
        (`RunStore.hear_ends`: PostgreSQL), else only by reading the store again.
        """
        arrived = asyncio.get_running_loop().create_future()
        waiting = self._admission_waiters.setdefault(thread_id, set())
        waiting.add(arrived)
        try:
            yield arrived
        finally:
            waiting.discard(arrived)
            if not waiting:
                del self._admission_waiters[thread_id]

    def _admitted(self, thread_id: str) -> None:
        for arrived in self._admission_waiters.get(thread_id, ()):
            if not arrived.done():
                arrived.set_result(None)

    def held(self, thread_id: str, run_id: str) -> Run | None:
        """The run `run_id` of the thread if this process holds it."""
        return next((r for r in self._threads.get(thread_id, ()) if r.run_id == run_id), None)

    async def ready(self) -> str | None:
        """None when the service takes runs; else why not (`draining`, `database`).

        Ready means the database answers and has its tables: a database that lost them
        gets them back first (`Storage.schema`), or the service is not ready.
        """
        if self.closing:
            return "draining"
        try:
            await self.store.probe(READY_TIMEOUT_S)
            await self.schema()
        except Exception:  # any failure to answer means not ready; the reason is logged
            logger.exception("readiness: the database did not answer")
            return "database"
        return None

    # --- starting ------------------------------------------------------------------------

    async def start_run(
        self,
        graph_id: str,
        *,
        thread_id: str,
        run_id: str,
        messages: Sequence[Message] = (),
        resume: Sequence[ResumeEntry] | None = None,
        stream_tokens: bool = True,
        multitask_strategy: MultitaskStrategy = "reject",
        origin: ThreadOrigin = "api",
        caller: Caller = OPEN,
        protocol: Mapping[str, Any] | None = None,
        checkpoint_id: str | None = None,
        interrupt_before: Sequence[str] | None = None,
        interrupt_after: Sequence[str] | None = None,
        command: Mapping[str, Any] | None = None,
        no_input: bool = False,
        config: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> Run:
        """Check, record and start a run: the one way a run starts (`origin`: where a
        thread it starts is said to be started; `caller`: who starts it, the owner of a
        thread it starts; another user's thread is NotFound unless `caller` is an admin;
        `protocol`: what the client's protocol asked beyond the run itself, kept with the
        request for its readers, e.g. LangGraph's stream modes; `checkpoint_id`: run from
        that checkpoint of the thread rather than its latest, a fork, as LangGraph's time
        travel does; `interrupt_before`/`interrupt_after`: LangGraph's breakpoints, node
        names or "*"; `command`: LangGraph's `update` and `goto`, JSON, as `prepare_run`
        takes them; `no_input`: with no messages, answers or command, go on from where the
        thread stands, as after a breakpoint or a state update; `config`: a graph config
        (`configurable`, `recursion_limit`, `tags`, `metadata`) under the service's own,
        and `context` the graph's context, both kept with the request so that a run taken
        over runs with them too).

        Raises a ServiceError (nothing recorded, nothing changed) when the request or
        the thread's state refuses it. The run then executes on its own; follow it
        with `Run.entries()`/`events()`, stop it with `cancel()`.
        """
        if self.closing:
            raise Unavailable("shutting_down", SHUTTING_DOWN)
        graph = self.graph(graph_id)
        check_thread_id(thread_id)
        check_run_id(run_id)
        if not caller.admin:
            # Before anything that could tell the thread exists (busy, a run id taken).
            await self.check_owner(thread_id, caller)
            await self.fair_use.before_run(caller)
        if checkpoint_id is not None:
            at = run_config(thread_id, graph_id)
            at["configurable"]["checkpoint_id"] = checkpoint_id
            if await self.saver.aget_tuple(at) is None:
                missing = UNKNOWN_CHECKPOINT.format(
                    thread_id=thread_id, checkpoint_id=checkpoint_id
                )
                raise NotFound("unknown_thread", missing[:300])
        await self._wait_for_leaving(thread_id)
        ahead = list(self._threads.get(thread_id, ()))
        if any(run.run_id == run_id for run in ahead):
            raise Conflict("run_exists", RUN_EXISTS.format(thread_id=thread_id, run_id=run_id))
        if ahead and multitask_strategy == "reject":
            busy = THREAD_BUSY.format(thread_id=thread_id, run_id=ahead[0].run_id)
            raise Conflict("thread_busy", busy)
        if ahead and self._queued() >= self.settings.agent_max_queued:
            limit = self.settings.agent_max_queued
            raise queue_full(SERVICE_QUEUE_FULL.format(limit=limit))
        request = {
            "messages": [m.model_dump(mode="json", by_alias=True) for m in messages],
            "resume": [r.model_dump(mode="json", by_alias=True) for r in resume or ()],
            "streamTokens": stream_tokens,
        }
        if protocol is not None:
            request[PROTOCOL_KEY] = dict(protocol)
        if checkpoint_id is not None:
            request[FORK_KEY] = checkpoint_id
        if interrupt_before:
            request[BEFORE_KEY] = _breakpoints(interrupt_before)
        if interrupt_after:
            request[AFTER_KEY] = _breakpoints(interrupt_after)
        if command:
            request[COMMAND_KEY] = dict(command)
        if no_input:
            request[NO_INPUT_KEY] = True
        if config:
            request[CONFIG_KEY] = dict(config)
        if context:
            request[CONTEXT_KEY] = dict(context)
        record = RunRecord(
            run_id=run_id,
            thread_id=thread_id,
            graph=graph_id,
            status="queued" if ahead else "running",
            created_at=time.time(),
        )
        run = self._new_run(graph, record, request)
        queue = self._threads.setdefault(thread_id, [])
        queue.append(run)  # claimed before the first await: a concurrent start sees it
        try:
            prepared = await self._prepare(run, graph)
            run.checkpoint_before = prepared.checkpoint_id
            stored = StoredRun(
                record=record,
                owner=self.owner,
                request=request,
                checkpoint_before=prepared.checkpoint_id,
            )
            admission = await self.store.admit(
                stored,
                strategy=multitask_strategy,
                ttl_s=self.lease_s,
                max_queued=self.settings.agent_max_queued_per_thread,
                origin=origin,
                user_id=caller.user_id,
                any_owner=caller.admin,
                max_runs=self.fair_use.max_runs(caller),
            )
            if admission.outcome == "foreign":
                raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
            if admission.outcome == "limited":
                raise too_many_runs(self.settings.agent_user_max_runs)
            if admission.outcome == "exists":
                raise Conflict("run_exists", RUN_EXISTS.format(thread_id=thread_id, run_id=run_id))
            if admission.outcome == "busy":
                busy = THREAD_BUSY.format(thread_id=thread_id, run_id=admission.ahead[0])
                raise Conflict("thread_busy", busy)
            if admission.outcome == "full":
                limit = self.settings.agent_max_queued_per_thread
                raise queue_full(THREAD_QUEUE_FULL.format(thread_id=thread_id, limit=limit))
        except BaseException:
            self._leave(run)
            raise
        self._admitted(thread_id)  # its record is stored: the thread's run list shows it
        queued = admission.status == "queued"
        record.status = "queued" if queued else "running"
        if not queued:
            run.leased_at = time.monotonic()
        if queued and multitask_strategy in ("interrupt", "rollback"):
            # Runs held here stop at once; others when their process reads the request.
            if multitask_strategy == "rollback":
                run.rollback_from = next((r for r in ahead if r.record.status == "running"), None)
                run.rollback_id = admission.rollback_from
            for earlier in ahead:
                earlier.cancel()
        ready = None if queued or admission.stale else prepared  # None: prepared at its start
        run.task = asyncio.create_task(self._execute(run, graph, ready), name=f"run {run_id}")
        return run

    async def _wait_for_leaving(self, thread_id: str) -> None:
        """Give the thread's runs a moment to leave when all are on their way out (being
        cancelled, suspended or recording their end), so "stop, then send" works."""
        queue = self._threads.get(thread_id)
        if queue and all(run.phase in LEAVING for run in queue):
            with suppress(TimeoutError):
                async with asyncio.timeout(LEAVING_WAIT_S):
                    for run in list(queue):
                        await run.left.wait()

    async def _prepare(
        self, run: Run, graph: CompiledStateGraph, checkpoint_id: str | None = None
    ) -> PreparedRun:
        request = run.request
        checkpoint_id = checkpoint_id or request.get(FORK_KEY)
        return await prepare_run(
            graph,
            graph_id=run.record.graph,
            thread_id=run.thread_id,
            messages=messages_adapter.validate_python(request["messages"]),
            resume=_answers.validate_python(request["resume"]) or None,
            max_message_bytes=self.settings.agent_max_message_bytes,
            checkpoint_id=checkpoint_id,
            transcript=self.transcript,
            command=request.get(COMMAND_KEY),
            no_input=bool(request.get(NO_INPUT_KEY)),
        )

    # --- executing -----------------------------------------------------------------------

    async def _execute(
        self,
        run: Run,
        graph: CompiledStateGraph,
        prepared: PreparedRun | None,
        *,
        resumed: bool = False,
    ) -> None:
        """Run to the end, writing every event to the run's log and its end to its record."""
        transformer = EventTransformer()
        status: RunStatus = "error"
        error: RunError | None = None
        watch = self.telemetry.watch(run.record.graph, run.thread_id, run.run_id)
        usage = TokenCount(watch.observe if watch.handler is not None else None)
        try:
            if run.phase != "underway":  # stopped while it was admitted, before it had a task
                raise asyncio.CancelledError
            fork: str | None = None
            if prepared is None:
                prepared, fork = await self._begin(run, graph)
            if not resumed:  # a fork starts from its checkpoint (a rollback's wins)
                fork = fork or run.request.get(FORK_KEY)
            run.prepared = prepared
            watch.entered(None if resumed else run.request.get("resume"))
            asked: dict[str, Any] = run.request.get(CONFIG_KEY) or {}
            metadata = {
                **(asked.get("metadata") or {}),
                **prepared.config.get("metadata", {}),
                RUN_KEY: run.run_id,
            }
            configurable = {
                **(asked.get("configurable") or {}),
                **prepared.config["configurable"],
                TRANSCRIPT_KEY: self.transcript,
            }
            events = stream_run(
                graph,
                thread_id=run.thread_id,
                run_id=run.run_id,
                input_or_command=None if resumed else prepared.input,
                config=watch.config(
                    cast(
                        RunnableConfig,
                        {
                            **asked,
                            **prepared.config,
                            "configurable": configurable,
                            "metadata": metadata,
                        },
                    )
                ),
                context=run.request.get(CONTEXT_KEY),
                stream_tokens=bool(run.request.get("streamTokens", True)),
                transformer=transformer,
                checkpoint_id=fork,
                announce=run.log.last == 0,
                observe=usage.observe,
                interrupt_before=run.request.get(BEFORE_KEY),
                interrupt_after=run.request.get(AFTER_KEY),
            )
            async with aclosing(events):
                async for event in events:
                    run.log.emit(event)
                    watch.event(event)
                    status, error = _status_after(event, status, error)
        except asyncio.CancelledError:
            _uncancel()
            await settle_cancelled_writes(self.saver)
            if run.phase == "suspending":
                watch.finish("suspended", None)
                run.log.close()
                self._leave(run)
                raise
            if run.prepared is not None:  # it entered its graph: keep what it showed
                await self._keep_stopped(run, graph, transformer)
            status, error = "cancelled", RunError(code="cancelled", message=CANCELLED)
            self._fail(run, error)
        except ServiceError as exc:  # the thread's state refused a queued run at its turn
            status, error = "error", RunError(code=exc.code, message=exc.message)
            self._fail(run, error)
        except Exception as exc:  # the run's top-level handler: a run never stays active
            logger.exception("run %s on thread %s failed to start", run.run_id, run.thread_id)
            failed = run_error(exc)  # `storage_unavailable` when its database was lost
            status, error = (
                "error",
                RunError(code=run_error_code(failed.code), message=failed.message),
            )
            self._fail(run, error)
        watch.finish(status, error.code if error is not None else None)
        await self._finish(run, status, error, usage.tokens)

    async def _begin(self, run: Run, graph: CompiledStateGraph) -> tuple[PreparedRun, str | None]:
        """Wait for the thread unless leased, then prepare from the state then (or a
        rollback's): a queued run, or one admitted `stale`.

        The turn is the database's admission order, which runs of this process may
        have reached in another order than they started: waiting here for the runs
        started earlier could wait for a run that waits for this one.
        """
        if run.leased_at is None:
            await self._turns.take(run.thread_id, run.run_id)
            run.leased_at = time.monotonic()
        fork: str | None = None
        source = run.rollback_from
        rolled_back = source is not None and source.prepared is not None
        if source is not None:
            fork = source.checkpoint_before
        elif run.rollback_id is not None:  # it ran in another process
            undone = await self.store.get(run.thread_id, run.rollback_id)
            rolled_back = undone is not None
            fork = undone.checkpoint_before if undone is not None else None
        if rolled_back and fork is None:  # the thread began with that run: roll back to nothing
            await delete_thread(self.saver, run.thread_id)
        prepared = await self._prepare(run, graph, fork if rolled_back else None)
        run.checkpoint_before = prepared.checkpoint_id
        await self.store.started(
            run.thread_id, run.run_id, owner=self.owner, checkpoint_before=prepared.checkpoint_id
        )
        run.record.status = "running"
        return prepared, fork

    async def _keep_stopped(
        self, run: Run, graph: CompiledStateGraph, transformer: EventTransformer
    ) -> None:
        """Keep a cancelled run's shown text as a stopped reply, and answer its open calls."""
        prepared = run.prepared
        if prepared is None:
            return
        try:
            snapshot = await graph.aget_state(prepared.config)
            history: list[AnyMessage] = (snapshot.values or {}).get("messages", [])
            reply = transformer.stopped_reply()
            writes: list[AnyMessage] = [*abandoned_calls(history, CALL_ABANDONED)]
            if reply is not None:
                writes.append(reply)
            if writes:
                node = AGENT_NODE if reply is not None else TOOLS_NODE
                await graph.aupdate_state(prepared.config, {"messages": writes}, as_node=node)
        except Exception:  # the cancel still ends the run; the next run closes open calls
            logger.exception("could not keep what run %s left", run.run_id)

    def _fail(self, run: Run, error: RunError) -> None:
        if run.log.last == 0:
            run.log.emit(RunStartedEvent(thread_id=run.thread_id, run_id=run.run_id))
        run.log.emit(run_error_event(error.code, error.message))

    async def _finish(
        self, run: Run, status: RunStatus, error: RunError | None, tokens: int = 0
    ) -> None:
        run.enter("finishing")
        try:
            finished_at = time.time()
            end = RunEnd(run.thread_id, run.run_id, status, finished_at, error, self.owner)
            await self.writer.end(end)
            await self.store.record_usage(run.thread_id, day_of(), tokens)
            run.record.status, run.record.error = status, error
            run.record.finished_at = finished_at
            if status == "success":  # the model answered: its thread may want a title
                self.titles.after_exchange(run.thread_id, run.run_id, run.record.graph)
        except Exception:
            logger.exception("could not record the end of run %s", run.run_id)
        finally:
            self._leave(run)
            run.log.close()
        if time.monotonic() - self._purged_at >= PURGE_EVERY_S:
            self._purged_at = time.monotonic()
            with suppress(Exception):
                await self.store.expire(time.time() - self.settings.agent_run_events_ttl_s)

    def _queued(self) -> int:
        """How many runs this process holds that wait for their turn."""
        return sum(run.record.status == "queued" for runs in self._threads.values() for run in runs)

    def _leave(self, run: Run) -> None:
        queue = self._threads.get(run.thread_id)
        if queue is not None and run in queue:
            queue.remove(run)
            if not queue:
                del self._threads[run.thread_id]
        run.enter("left")
        self._turns.wake(run.thread_id)  # its end is recorded (or it never began)

    def heard_admission(self, thread_id: str | None) -> None:
        """The store heard a run admitted (`RunStore.hear_ends`), maybe by another
        process: who waits for the thread's next run reads its runs again (None: all)."""
        for waited in [thread_id] if thread_id is not None else list(self._admission_waiters):
            self._admitted(waited)

    def heard_end(self, thread_id: str | None, owner: str | None) -> None:
        """The store heard a run end (`RunStore.hear_ends`): the thread's turn may be free."""
        if owner != self.owner or thread_id is None:  # this process's own woke it already
            self._turns.wake(thread_id)

    # --- reading and cancelling ----------------------------------------------------------

    async def run_record(self, thread_id: str, run_id: str) -> RunRecord:
        """One run of the thread; NotFound when there is none."""
        live = self.held(check_thread_id(thread_id), check_run_id(run_id))
        if live is not None:
            return live.record
        stored = await self.store.get(thread_id, run_id)
        if stored is None:
            raise NotFound("unknown_run", UNKNOWN_RUN.format(run_id=run_id, thread_id=thread_id))
        return stored.record

    async def runs(self, thread_id: str, *, must_exist: bool = False) -> list[RunRecord]:
        """The thread's runs, newest first (live ones as this process sees them). With
        `must_exist`, NotFound for a thread with no runs, no checkpoints and no record of
        its making: one deleted answers as one that never was."""
        records = await self.store.of_thread(check_thread_id(thread_id))
        if must_exist and not records and await self.created_thread(thread_id) is None:
            await self.thread(thread_id)
        live = {run.run_id: run.record for run in self._threads.get(thread_id, ())}
        return [live.get(record.run_id, record) for record in records]

    async def join(
        self, thread_id: str, run_id: str, after: int = 0
    ) -> AsyncGenerator[Entry, None]:
        """The run's events after `after`, then the live ones to its last event.

        NotFound for an unknown run, Gone when its events have expired.
        """
        return _flat(await self.join_batches(thread_id, run_id, after))

    async def join_batches(
        self, thread_id: str, run_id: str, after: int = 0
    ) -> AsyncGenerator[list[Entry], None]:
        """`join`, in batches (see `Run.batches`)."""
        live = self.held(check_thread_id(thread_id), check_run_id(run_id))
        if live is not None:
            return live.batches(after)
        stored = await self.store.get(thread_id, run_id)
        if stored is None:
            raise NotFound("unknown_run", UNKNOWN_RUN.format(run_id=run_id, thread_id=thread_id))
        record, ttl = stored.record, self.settings.agent_run_events_ttl_s
        if record.finished_at is not None and record.finished_at < time.time() - ttl:
            raise Gone("run_expired", EVENTS_EXPIRED.format(run_id=run_id, ttl=ttl))
        return self._stored_entries(stored, after)

    async def _stored_entries(
        self, stored: StoredRun, after: int
    ) -> AsyncGenerator[list[Entry], None]:
        """A run another process executes (or executed): its log, polled until it ends.

        A database lost meanwhile ends it with RUN_ERROR `storage_unavailable`, numbered
        as the last event sent (it is in no log: a rejoin from there gets what followed).
        """
        try:
            async for batch in self._polled_entries(stored, after):
                after = batch[-1].seq
                yield batch
        except Exception as exc:
            if not is_lost(exc):
                raise
            yield [Entry(after, encode(run_error(exc)))]

    async def _polled_entries(
        self, stored: StoredRun, after: int
    ) -> AsyncGenerator[list[Entry], None]:
        record = stored.record
        while True:
            rows = await self.store.events(record.thread_id, record.run_id, after)
            batch: list[Entry] = []
            for seq, data in rows:
                batch.append(Entry(seq, data))
                if is_terminal(batch[-1]):
                    break
            if batch:
                after = batch[-1].seq
                yield batch
                if is_terminal(batch[-1]):
                    return
            now = await self.store.get(record.thread_id, record.run_id)
            if now is None or not now.record.active:
                if not rows:
                    return
                continue
            await asyncio.sleep(POLL_S)  # another process writes it; nothing to wait on here

    async def cancel_run(self, thread_id: str, run_id: str) -> RunRecord:
        """Ask a queued or running run to stop; Conflict when it has finished."""
        live = self.held(check_thread_id(thread_id), check_run_id(run_id))
        if live is None:
            stored = await self.store.get(thread_id, run_id)
            if stored is None:
                unknown = UNKNOWN_RUN.format(run_id=run_id, thread_id=thread_id)
                raise NotFound("unknown_run", unknown)
            if stored.record.active and await self.store.request_cancel(thread_id, run_id):
                return stored.record  # its holder stops it (its cancel watcher, `recovery`)
            status = stored.record.status
            raise Conflict("run_finished", RUN_FINISHED.format(run_id=run_id, status=status))
        live.cancel()
        return live.record

    # --- threads -------------------------------------------------------------------------

    async def thread(self, thread_id: str) -> ThreadView:
        """The thread's messages and pending interrupts; NotFound when it does not exist."""
        thread_id = check_thread_id(thread_id)
        view = await read_thread(self.graphs, self.saver, thread_id, self.transcript)
        if view is None:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        if self.redact.found(view.model_dump_json()):  # a reply that quoted a secret
            view = ThreadView.model_validate(self.redact.value(view.model_dump(by_alias=True)))
        return view

    async def state(self, thread_id: str, checkpoint_id: str | None = None) -> ThreadState:
        """The thread's state at `checkpoint_id` (None: its latest), its messages the whole
        history; NotFound when there is no such thread or checkpoint. Not masked: the
        caller encodes it, and masks what it encodes (`redact`)."""
        thread_id = check_thread_id(thread_id)
        found = await read_state(self.graphs, self.saver, thread_id, self.transcript, checkpoint_id)
        if found is None:
            if checkpoint_id is not None:
                missing = UNKNOWN_CHECKPOINT.format(
                    thread_id=thread_id, checkpoint_id=checkpoint_id
                )
                raise NotFound("unknown_thread", missing[:300])
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        return found

    async def history(
        self, thread_id: str, *, limit: int, before: str | None = None
    ) -> list[StateSnapshot]:
        """The thread's checkpoints as states, newest first; NotFound for no thread."""
        latest = await self.state(thread_id)
        graph = self.graph(latest.graph_id)
        return await state_history(graph, thread_id, latest.graph_id, limit=limit, before=before)

    async def create_thread(
        self,
        thread_id: str,
        metadata: Mapping[str, Any],
        *,
        replace: bool = False,
        caller: Caller = OPEN,
    ) -> bool:
        """Record a thread before its first run, with its metadata, owned by `caller`
        (LangGraph's `POST /threads`); False when it was recorded already (`replace`: its
        metadata is replaced then)."""
        check_thread_id(thread_id)
        text = json.dumps(dict(metadata), ensure_ascii=False)
        return await self.store.create_thread(
            thread_id, text, time.time(), replace=replace, user_id=caller.user_id
        )

    async def created_thread(self, thread_id: str) -> tuple[dict[str, Any], float] | None:
        """The metadata and creation time `create_thread` recorded, or None."""
        found = await self.store.created_thread(check_thread_id(thread_id))
        if found is None:
            return None
        metadata = json.loads(found[0])
        return (metadata if isinstance(metadata, dict) else {}), found[1]

    async def run_start(self, thread_id: str, run_id: str) -> StoredRun:
        """A run's record, request and the checkpoint it started from (live as this
        process holds it); NotFound when there is none."""
        live = self.held(check_thread_id(thread_id), check_run_id(run_id))
        if live is not None:
            return StoredRun(
                record=live.record,
                owner=self.owner,
                request=live.request,
                checkpoint_before=live.checkpoint_before,
            )
        stored = await self.store.get(thread_id, run_id)
        if stored is None:
            raise NotFound("unknown_run", UNKNOWN_RUN.format(run_id=run_id, thread_id=thread_id))
        return stored

    async def threads(
        self, graph_id: str | None = None, limit: int = 50, owner: str | None = None
    ) -> list[ThreadSummary]:
        """The threads of `graph_id` (NotFound when it is unknown) or of every graph, of
        `owner` or everyone's, newest activity first, at most `limit`."""
        if graph_id is not None:
            self.graph(graph_id)
        found = await self.store.threads(graph_id, limit, owner)
        return [self._masked(summary) for summary in found]

    async def check_owner(self, thread_id: str, caller: Caller) -> None:
        """NotFound when the thread is another user's and `caller` is no admin: someone
        else's thread is answered as one that does not exist."""
        if caller.admin:
            return
        check_thread_id(thread_id)  # 422 for a bad id, as its route would answer
        owner = await self.store.thread_owner(thread_id)
        if owner is not None and owner != caller.user_id:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))

    async def rename_thread(self, thread_id: str, title: str) -> ThreadSummary:
        """Give the thread a title of its own (1-200 characters once rid of bidirectional
        controls and trimmed), kept across its later runs; NotFound when it has no runs."""
        check_thread_id(thread_id)
        title = plain_title(title).strip()
        if not 1 <= len(title) <= MAX_TITLE_CHARS:
            raise Invalid("bad_title", BAD_TITLE.format(limit=MAX_TITLE_CHARS))
        summary = await self.store.rename_thread(thread_id, title)
        if summary is None:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        return self._masked(summary)

    def _masked(self, summary: ThreadSummary) -> ThreadSummary:
        # A title is the user's text: it may quote a secret, as a thread view may.
        title = self.redact(summary.title)
        return summary if title == summary.title else summary.model_copy(update={"title": title})

    async def forget_thread(self, thread_id: str) -> None:
        """Forget the thread's checkpoints and runs (refused while a run is active);
        NotFound when there is no such thread (one deleted already included)."""
        held = bool(self._threads.get(check_thread_id(thread_id)))
        records = await self.store.of_thread(thread_id)
        if held or any(record.active for record in records):
            raise Conflict("thread_busy", THREAD_RUNNING.format(thread_id=thread_id))
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if not records and await self.saver.aget_tuple(config) is None:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        await delete_thread(self.saver, thread_id)
        await self.store.forget_thread(thread_id)
        await self.store.scrub()  # what the thread said leaves the files now, not some day

    # --- LangGraph's thread operations: state updates, copies, runs deleted -------------

    async def _check_idle(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs; Conflict `thread_busy` while one is queued or running (as
        `forget_thread` refuses)."""
        records = await self.runs(thread_id)
        if self._threads.get(thread_id) or any(record.active for record in records):
            raise Conflict("thread_busy", THREAD_RUNNING.format(thread_id=thread_id))
        return records

    async def update_state(
        self,
        thread_id: str,
        values: Any,
        *,
        as_node: str | None = None,
        checkpoint_id: str | None = None,
    ) -> RunnableConfig:
        """Write `values` to the thread's state as node `as_node` wrote them (LangGraph's
        `update_state`), from its latest checkpoint or `checkpoint_id`; `as_node="__copy__"`
        (no values) copies that checkpoint into a new latest one, which a run with no input
        (`no_input`) runs from. The config of the checkpoint written.

        NotFound for no such thread or checkpoint; Conflict `thread_busy` while a run is
        active; Invalid `unknown_node` or `invalid_update`. The transcript is untouched:
        the thread's history stays its kept messages, then the new state's.
        """
        state = await self.state(thread_id, checkpoint_id)
        await self._check_idle(thread_id)
        graph = self.graph(state.graph_id)
        if as_node is not None:
            check_node(graph, state.graph_id, as_node)
        check_messages(values, self.settings.agent_max_message_bytes)
        config = run_config(thread_id, state.graph_id)
        if checkpoint_id is not None:
            config["configurable"]["checkpoint_id"] = checkpoint_id
        try:
            written = await graph.aupdate_state(config, values, as_node=as_node)
        except (InvalidUpdateError, ValueError, TypeError, NotImplementedError) as exc:
            raise Invalid("invalid_update", BAD_UPDATE.format(reason=exc)[:300]) from None
        await self._mark_graph(written, state.graph_id)
        return written

    async def _mark_graph(self, config: RunnableConfig, graph_id: str) -> None:
        """Give the checkpoint at `config` its graph in its metadata where it has none: a
        `__copy__` writes its own metadata, and a thread's latest checkpoint says which
        graph the thread is (`app.core.runs.threads`)."""
        saved = await self.saver.aget_tuple(config)
        if saved is None or saved.metadata.get(GRAPH_KEY) == graph_id:
            return
        # The same checkpoint written again: both savers replace a checkpoint by its id.
        parent = saved.parent_config or {
            "configurable": {**saved.config["configurable"], "checkpoint_id": None}
        }
        metadata = cast(CheckpointMetadata, {**saved.metadata, GRAPH_KEY: graph_id})
        await self.saver.aput(parent, saved.checkpoint, metadata, {})

    async def copy_thread(self, thread_id: str, caller: Caller = OPEN) -> str:
        """A new thread with the thread's checkpoints (each with its parent and pending
        writes), ended runs, transcript and metadata, owned by `caller`; its id. NotFound
        for no such thread; Conflict `thread_busy` while a run is active."""
        check_thread_id(thread_id)
        records = await self._check_idle(thread_id)
        probe: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        saved = [found async for found in self.saver.alist(probe)]
        if not saved and not records and await self.store.created_thread(thread_id) is None:
            raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
        target = str(uuid.uuid4())
        await self.store.copy_thread(thread_id, target, user_id=caller.user_id, now=time.time())
        try:
            for found in reversed(saved):  # oldest first: a parent before its children
                configurable = found.config["configurable"]
                ns = configurable.get("checkpoint_ns", "")
                parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
                at: RunnableConfig = {"configurable": {"thread_id": target, "checkpoint_ns": ns}}
                at["configurable"]["checkpoint_id"] = parent
                checkpoint = found.checkpoint
                written = await self.saver.aput(
                    at, checkpoint, found.metadata, dict(checkpoint["channel_versions"])
                )
                by_task: dict[str, list[tuple[str, Any]]] = {}
                for task_id, channel, value in found.pending_writes or ():
                    by_task.setdefault(task_id, []).append((channel, value))
                for task_id, writes in by_task.items():
                    await self.saver.aput_writes(written, writes, task_id)
        except BaseException:
            with suppress(Exception):
                await delete_thread(self.saver, target)
                await self.store.forget_thread(target)
            raise
        return target

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        """Forget an ended run's record and log (the thread's checkpoints stay); NotFound
        for no such run, Conflict `run_active` for a queued or running one."""
        record = await self.run_record(thread_id, run_id)
        if record.active or not await self.store.delete_run(thread_id, run_id):
            status = record.status
            raise Conflict("run_active", RUN_ACTIVE.format(run_id=run_id, status=status))

    async def roll_back_run(self, thread_id: str, run_id: str) -> None:
        """Undo a run that has ended or is ending (cancelled): once it has, the thread's
        state goes back to where the run started (that checkpoint copied as the latest;
        no checkpoint at all for a run the thread began with) if the run wrote any, and
        its record and log are forgotten, as LangGraph's cancel with `action=rollback`
        does. NotFound for no such run; Conflict `run_active` when it has not ended within
        a few seconds, `thread_busy` when a later run of the thread has come since."""
        stored = await self._ended(thread_id, run_id)
        records = await self.runs(thread_id)
        if records and records[0].run_id != run_id:
            message = LATER_RUN.format(run_id=run_id, later=records[0].run_id)
            raise Conflict("thread_busy", message)
        graph_id = stored.record.graph
        config = run_config(thread_id, graph_id)
        wrote = [
            found async for found in self.saver.alist(config, filter={RUN_KEY: run_id}, limit=1)
        ]
        before = stored.checkpoint_before
        if wrote and before is None:  # the thread began with this run: no state before
            await delete_thread(self.saver, thread_id)
        elif wrote and before is not None:
            latest = await self.saver.aget_tuple(config)
            if latest is None or latest.config["configurable"].get("checkpoint_id") != before:
                config["configurable"]["checkpoint_id"] = before
                written = await self.graph(graph_id).aupdate_state(config, None, as_node="__copy__")
                await self._mark_graph(written, graph_id)
        await self.store.delete_run(thread_id, run_id)

    async def _ended(self, thread_id: str, run_id: str) -> StoredRun:
        """The run once it has left this process and its end is recorded (a cancelled
        run records its end right after its last event); Conflict `run_active` when that
        takes more than a few seconds."""
        live = self.held(check_thread_id(thread_id), check_run_id(run_id))
        with suppress(TimeoutError):
            async with asyncio.timeout(LEAVING_WAIT_S):
                if live is not None:
                    await live.left.wait()
                while True:
                    stored = await self.run_start(thread_id, run_id)
                    if not stored.record.active and self.held(thread_id, run_id) is None:
                        return stored
                    await asyncio.sleep(POLL_S)  # another process records it
        status = (await self.run_start(thread_id, run_id)).record.status
        raise Conflict("run_active", RUN_ACTIVE.format(run_id=run_id, status=status))

    async def created_threads(
        self, owner: str | None, limit: int
    ) -> list[tuple[str, dict[str, Any], float, bool]]:
        """(thread_id, metadata, created_at, has runs) of the threads made by LangGraph's
        `POST /threads` (or copied), of `owner` or everyone's, newest first."""
        found = []
        for thread_id, text, created_at, has_runs in await self.store.created_threads(owner, limit):
            metadata = json.loads(text)
            found.append(
                (thread_id, metadata if isinstance(metadata, dict) else {}, created_at, has_runs)
            )
        return found

    async def set_thread_metadata(self, thread_id: str, metadata: Mapping[str, Any]) -> None:
        """Merge `metadata` into the thread's (kept with its creation record, made now
        for a thread started by a run); NotFound for no such thread."""
        check_thread_id(thread_id)
        created = await self.created_thread(thread_id)
        if created is None:
            owner = await self.store.thread_owner(thread_id)
            if owner is None:
                raise NotFound("unknown_thread", UNKNOWN_THREAD.format(thread_id=thread_id))
            # Made when its first run was: the record says when the thread began.
            began = min((r.created_at for r in await self.runs(thread_id)), default=time.time())
            await self.store.create_thread(thread_id, "{}", began, user_id=owner)
            created = ({}, began)
        text = json.dumps({**created[0], **metadata}, ensure_ascii=False)
        await self.store.create_thread(thread_id, text, created[1], replace=True)

    # --- taking over a run another process left ------------------------------------------

    async def take_over(self, stored: StoredRun) -> Run:
        """Resume a run another process left, once the store let this one adopt it: the
        one way a run is taken over (at start-up, or by the heartbeat)."""
        record = stored.record
        logged = await self.store.events(record.thread_id, record.run_id)
        graph = self.graphs.get(record.graph)
        run = self._new_run(
            graph,
            record,
            stored.request,
            base=logged[-1][0] if logged else 0,
            checkpoint_before=stored.checkpoint_before,
        )
        if record.status == "running":  # adopting it took its lease
            run.leased_at = time.monotonic()
        self._threads.setdefault(record.thread_id, []).append(run)
        events = [decode(data) for _, data in logged]
        run.rollback_id = stored.rollback_from
        run.task = asyncio.create_task(
            self._continue(run, graph, stored, events), name=f"run {record.run_id}"
        )
        return run

    def _new_run(
        self,
        graph: CompiledStateGraph | None,
        record: RunRecord,
        request: dict[str, Any],
        *,
        base: int = 0,
        checkpoint_before: str | None = None,
    ) -> Run:
        return Run(
            graph,
            record,
            request,
            store=self.store,
            writer=self.writer,
            redact=self.redact,
            base=base,
            checkpoint_before=checkpoint_before,
        )

    async def _continue(
        self,
        run: Run,
        graph: CompiledStateGraph | None,
        stored: StoredRun,
        logged: list[BaseEvent],
    ) -> None:
        """Finish a run a dead process left: close its log's open parts, then go on."""
        logger.info("resuming run %s on thread %s", run.run_id, run.thread_id)
        if logged and is_terminal(Entry(0, "", logged[-1])):
            status, error = _status_after(logged[-1], "error", None)
            await self._finish(run, status, error)
            return
        for event in close_open(logged):
            run.log.emit(event)
        if graph is None:
            await self._refuse_resume(run, NOT_RESUMABLE.format(graph=run.record.graph))
            return
        if stored.record.status == "queued":
            await self._execute(run, graph, None)
            return
        config = run_config(run.thread_id, run.record.graph)
        latest = await self.saver.aget_tuple(config)
        latest_id = latest.config["configurable"].get("checkpoint_id") if latest else None
        if latest is not None and latest.metadata.get(RUN_KEY) == run.run_id:
            # It got as far as a checkpoint of its own: go on from there.
            prepared = PreparedRun(run.thread_id, {}, config, frozenset(), latest_id)
            await self._execute(run, graph, prepared, resumed=True)
            return
        if latest_id != stored.checkpoint_before:  # other runs wrote since: too late
            await self._refuse_resume(run, MOVED_ON)
            return
        try:  # it wrote nothing: start it again
            prepared = await self._prepare(run, graph)
        except ServiceError as exc:
            await self._refuse_resume(run, RESUME_FAILED.format(reason=exc))
            return
        await self._execute(run, graph, prepared)

    async def _refuse_resume(self, run: Run, message: str) -> None:
        error = RunError(code="not_resumable", message=message)
        self._fail(run, error)
        await self._finish(run, "error", error)

    # --- shutdown ------------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Refuse new runs from now on; the grace period for running ones starts."""
        if not self.closing:
            self.closing = True
            self._closing_at = time.monotonic()

    async def close(self, *, cancel_runs: bool = False) -> None:
        """Let running runs finish within the grace period; leave the rest to resume.

        With `cancel_runs` (a terminal closing: its user left), they are cancelled now.
        """
        self.begin_shutdown()
        runs = self.held_runs()
        tasks = [run.task for run in runs if run.task is not None]
        grace = self.settings.agent_shutdown_grace_s - (time.monotonic() - self._closing_at)
        if cancel_runs:
            for run in runs:
                run.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=None if cancel_runs else max(0.0, grace))
        to_resume = [run for run in runs if run.phase != "left"]
        for run in to_resume:
            logger.info("leaving run %s to resume at the next start", run.run_id)
            run.suspend()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = self.settings.agent_shutdown_grace_s - (time.monotonic() - self._closing_at)
        await self.titles.close(wait_s=0 if cancel_runs else left)
        await self.recovery.stop()
        await self.writer.stop()
        for run in to_resume:  # another process may take them over now, not a lease later
            if run.leased_at is not None:
                with suppress(Exception):
                    await self.store.release(run.thread_id, run.run_id)


async def _flat(batches: AsyncGenerator[list[Entry], None]) -> AsyncGenerator[Entry, None]:
    async with aclosing(batches):
        async for batch in batches:
            for entry in batch:
                yield entry


def _breakpoints(nodes: Sequence[str]) -> str | list[str]:
    """Breakpoint nodes as LangGraph takes them: "*" (every node) is a string, not a name."""
    return "*" if "*" in ([nodes] if isinstance(nodes, str) else nodes) else list(nodes)


def check_run_id(run_id: str) -> str:
    """Return `run_id` if it is a usable run id (same rule as thread ids), else 422."""
    try:
        return check_thread_id(run_id)
    except Invalid:
        raise Invalid("bad_run_id", BAD_RUN_ID.format(value=run_id[:140])) from None


def new_run_id() -> str:
    return uuid.uuid4().hex


def _status_after(
    event: BaseEvent, status: RunStatus, error: RunError | None
) -> tuple[RunStatus, RunError | None]:
    """The run's status after `event` (its last event decides)."""
    if isinstance(event, RunFinishedEvent):
        interrupted = isinstance(event.outcome, RunFinishedInterruptOutcome)
        return ("interrupted" if interrupted else "success"), None
    if isinstance(event, RunErrorEvent):
        return "error", RunError(code=run_error_code(event.code), message=event.message)
    return status, error


async def _schema_unchecked() -> None:
    return None


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


@asynccontextmanager
async def open_service(
    settings: Settings,
    *,
    only: str | None = None,
    recover: bool = False,
    cancel_on_close: bool = False,
    telemetry: Telemetry | None = None,
) -> AsyncIterator[AgentService]:
    """The service on `settings.agent_db`, every agent compiled (or just `only`).

    With `recover` (a server), the runs a dead process left active are resumed at once,
    and runs still going at the end are left for the next start; with
    `cancel_on_close` (a terminal, whose user has left) they are cancelled instead.
    `telemetry` (default: none) measures and traces the runs (`app.core.observability.telemetry`).
    """
    telemetry = telemetry or Telemetry()
    async with open_storage(settings) as (saver, store, schema), open_memory(settings) as memory:
        modules = available_graphs(settings, only)
        graphs = compile_graphs(modules, saver, settings)
        for graph in graphs.values():
            graph.store = memory  # what a node gets as its `store` (LangGraph's runtime)
        # HTTP clients and TLS set-up are start-up work; a missing key is not fatal here:
        # the first run reports it.
        with suppress(ModelNotConfigured):
            telemetry.watch_model(shared_model(settings))
        listing = describe(modules)
        service = AgentService(settings, graphs, listing, saver, store, telemetry, schema)
        service.memory = memory
        if telemetry.metrics is not None:
            telemetry.metrics.watch_active(service.active_runs)
        service.writer.start()
        await store.renew(service.owner, service.lease_s)  # alive before any run is admitted
        await store.expire(time.time() - settings.agent_run_events_ttl_s)
        async with store.hear_ends(service.heard_end, admitted=service.heard_admission):
            service.recovery.start(adopt=recover)
            if recover:
                resumed = await service.recovery.recover()
                if resumed:
                    logger.info("resuming %d run(s) left by a stopped process", resumed)
            try:
                yield service
            finally:
                await service.close(cancel_runs=cancel_on_close)


def queue_full(message: str) -> TooMany:
    """429 `queue_full`, with when to try again."""
    return TooMany("queue_full", message, headers={"Retry-After": str(QUEUE_RETRY_AFTER_S)})
