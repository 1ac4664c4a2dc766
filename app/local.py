"""The in-process agent: the graph compiled on the SQLite saver at AGENT_DB, run here.

Runs go through the same `app.runs.prepare_run` and `app.events.stream_run` as the
HTTP service, so a thread reads and continues the same whichever client started it.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing, asynccontextmanager
from typing import Final

from ag_ui.core import BaseEvent, ResumeEntry, UserMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from app.chat import AgentError
from app.checkpoint import open_checkpointer
from app.events import stream_run
from app.registry import GRAPH_MODULES
from app.runs import RunRefused, check_thread_id, prepare_run
from app.settings import Settings
from app.threads import ThreadView, read_thread

UNKNOWN_AGENT: Final = "没有名为 {graph_id!r} 的智能体（可用：{available}）"


class LocalAgent:
    """One agent run in this process on the checkpointer `saver`."""

    def __init__(
        self,
        graph_id: str,
        graph: CompiledStateGraph,
        saver: BaseCheckpointSaver,
        settings: Settings,
    ) -> None:
        self.graph_id = graph_id
        self._graph = graph
        self._saver = saver
        self._settings = settings

    async def thread(self, thread_id: str) -> ThreadView | None:
        """The thread's messages and pending interrupts; None when it does not exist."""
        try:
            check_thread_id(thread_id)
        except RunRefused as exc:
            raise AgentError(exc.message, code=exc.code) from None
        return await read_thread({self.graph_id: self._graph}, self._saver, thread_id)

    async def run(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> AsyncGenerator[BaseEvent, None]:
        """Start a run (a new message, or answers to the pending interrupts); yield its events."""
        messages = [UserMessage(id=str(uuid.uuid4()), content=message)] if message else []
        try:
            prepared = await prepare_run(
                self._graph,
                graph_id=self.graph_id,
                thread_id=thread_id,
                messages=messages,
                resume=list(resume) or None,
                max_message_bytes=self._settings.agent_max_message_bytes,
            )
        except RunRefused as exc:
            raise AgentError(exc.message, code=exc.code, status=exc.status) from None
        events = stream_run(
            self._graph,
            thread_id=prepared.thread_id,
            run_id=uuid.uuid4().hex,
            input_or_command=prepared.input,
            config=prepared.config,
        )
        async with aclosing(events):
            async for event in events:
                yield event


@asynccontextmanager
async def open_local(graph_id: str, settings: Settings) -> AsyncIterator[LocalAgent]:
    """Agent `graph_id` compiled on the saver at `settings.agent_db` (opened for the block)."""
    module_name = GRAPH_MODULES.get(graph_id)
    if module_name is None:
        available = ", ".join(GRAPH_MODULES)
        raise AgentError(UNKNOWN_AGENT.format(graph_id=graph_id, available=available))
    module = importlib.import_module(module_name)
    async with open_checkpointer(settings.agent_db) as saver:
        yield LocalAgent(graph_id, module.make_graph(saver), saver, settings)
