"""The in-process agent: the run core opened on AGENT_DB, runs made here.

Runs start through the same `AgentService.start_run` as the HTTP service, so a
thread reads and continues the same whichever client started it. A run's events
follow its event log: leaving them does not stop the run, `stop()` (`Run.cancel()`)
does. A chat opened here joins no run another process left under way.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Final

from ag_ui.core import BaseEvent, ResumeEntry, UserMessage

from app.cli.agent import RunInfo
from app.core.errors import Conflict, ErrorCode, NotFound
from app.core.runs.run import Run
from app.core.runs.service import AgentService, open_service
from app.core.runs.threads import PAGE_MESSAGES, ThreadPage, page_of
from app.settings import Settings

RUN_FINISHED: Final[ErrorCode] = "run_finished"  # the code of a cancel that came too late


class LocalAgent:
    """Agent `graph_id` of a run core opened in this process."""

    def __init__(self, graph_id: str, service: AgentService) -> None:
        service.graph(graph_id)  # NotFound now, not at the first message
        self.graph_id = graph_id
        self._service = service

    async def thread(
        self, thread_id: str, *, limit: int = PAGE_MESSAGES, before: str | None = None
    ) -> ThreadPage | None:
        """A page of the thread's messages, as `GET /api/threads/{id}` gives it, and its
        pending interrupts; None when it does not exist."""
        try:
            view = await self._service.thread(thread_id)
        except NotFound:
            return None
        return page_of(view, limit=limit, before=before)

    async def under_way(self, thread_id: str) -> RunInfo | None:
        """None: this process has run nothing yet when a chat opens.

        A run that another process recorded as running is not joined: when that process
        was a chat whose terminal closed, nothing will ever finish the run (only a
        server resumes such runs), and following it would wait forever.
        """
        return None

    def start(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> LocalRun:
        """A new run, started through `AgentService.start_run` when its events are read."""
        return LocalRun(self._service, self.graph_id, thread_id, message=message, resume=resume)

    def join(self, thread_id: str, run_id: str) -> LocalJoin:
        """A run the store says is under way: its event log, from the first event."""
        return LocalJoin(self._service, thread_id, run_id)


class LocalRun:
    """A run this process starts; `stop()` cancels it once it has started."""

    def __init__(
        self,
        service: AgentService,
        graph_id: str,
        thread_id: str,
        *,
        message: str | None,
        resume: Sequence[ResumeEntry],
    ) -> None:
        self._service = service
        self._graph_id = graph_id
        self._thread_id = thread_id
        self._message = message
        self._resume = list(resume)
        self._run: Run | None = None
        self._started = asyncio.Event()  # the run exists (or was refused)

    async def events(self) -> AsyncGenerator[BaseEvent, None]:
        """The run's events; a refused run raises ServiceError."""
        message = self._message
        try:
            self._run = await self._service.start_run(
                self._graph_id,
                thread_id=self._thread_id,
                run_id=uuid.uuid4().hex,
                messages=[UserMessage(id=str(uuid.uuid4()), content=message)] if message else [],
                resume=self._resume or None,
                origin="terminal",
            )
        finally:
            self._started.set()
        async with aclosing(self._run.entries()) as entries:
            async for entry in entries:
                yield entry.typed()

    async def stop(self) -> None:
        """Cancel the run (a refused one has nothing to cancel)."""
        await self._started.wait()
        if self._run is not None:
            self._run.cancel()


class LocalJoin:
    """A run found under way in the store, followed through its event log."""

    def __init__(self, service: AgentService, thread_id: str, run_id: str) -> None:
        self._service = service
        self._thread_id = thread_id
        self._run_id = run_id

    async def events(self) -> AsyncGenerator[BaseEvent, None]:
        """The run's logged events, then live ones to its end."""
        joined = await self._service.join(self._thread_id, self._run_id)
        async with aclosing(joined) as entries:
            async for entry in entries:
                yield entry.typed()

    async def stop(self) -> None:
        """Cancel the run, wherever it executes (nothing to do once it has ended)."""
        try:
            await self._service.cancel_run(self._thread_id, self._run_id)
        except Conflict as exc:
            if exc.code != RUN_FINISHED:
                raise


@asynccontextmanager
async def open_local(graph_id: str, settings: Settings) -> AsyncIterator[LocalAgent]:
    """Agent `graph_id` on the store at `settings.agent_db` (opened for the block).

    A run still going when the block ends is cancelled: nobody is left to see it.
    """
    async with open_service(settings, only=graph_id, cancel_on_close=True) as service:
        yield LocalAgent(graph_id, service)
