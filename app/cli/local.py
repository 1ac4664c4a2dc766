"""The in-process agent: the run core opened on AGENT_DB, runs made here.

Runs start through the same `AgentService.start_run` as the HTTP service, so a
thread reads and continues the same whichever client started it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager

from ag_ui.core import BaseEvent, ResumeEntry, UserMessage

from app.core.errors import NotFound
from app.core.service import AgentService, open_service
from app.core.threads import ThreadView
from app.settings import Settings


class LocalAgent:
    """Agent `graph_id` of a run core opened in this process."""

    def __init__(self, graph_id: str, service: AgentService) -> None:
        service.graph(graph_id)  # NotFound now, not at the first message
        self.graph_id = graph_id
        self._service = service

    async def thread(self, thread_id: str) -> ThreadView | None:
        """The thread's messages and pending interrupts; None when it does not exist."""
        try:
            return await self._service.thread(thread_id)
        except NotFound:
            return None

    async def run(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> AsyncGenerator[BaseEvent, None]:
        """Start a run (a new message, or answers to the pending interrupts); yield its events."""
        run = await self._service.start_run(
            self.graph_id,
            thread_id=thread_id,
            run_id=uuid.uuid4().hex,
            messages=[UserMessage(id=str(uuid.uuid4()), content=message)] if message else [],
            resume=list(resume) or None,
        )
        async with aclosing(run.events()) as events:
            async for event in events:
                yield event


@asynccontextmanager
async def open_local(graph_id: str, settings: Settings) -> AsyncIterator[LocalAgent]:
    """Agent `graph_id` on the store at `settings.agent_db` (opened for the block)."""
    async with open_service(settings, only=graph_id) as service:
        yield LocalAgent(graph_id, service)
