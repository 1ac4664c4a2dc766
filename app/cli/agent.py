"""The client contract of the terminal: what a chat needs from an agent.

Two implementations: in-process (`app.cli.local`, the run core here) and remote
(`app.cli.remote`, a running server over HTTP). Both yield the same typed AG-UI
events and raise `app.core.errors.ServiceError`s with a readable `message`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

from ag_ui.core import BaseEvent, ResumeEntry

from app.core.threads import ThreadView


class Agent(Protocol):
    """One agent, in-process or remote."""

    graph_id: str

    async def thread(self, thread_id: str) -> ThreadView | None:
        """The thread's messages and pending interrupts; None when it does not exist."""
        ...

    def run(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> AsyncGenerator[BaseEvent, None]:
        """Start a run (a new message, or answers to the pending interrupts); yield its events."""
        ...
