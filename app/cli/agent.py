"""The client contract of the terminal: what a chat needs from an agent.

Two implementations: in-process (`app.cli.local`, the run core here) and remote
(`app.cli.remote`, a running server over HTTP). Both yield the same typed AG-UI
events and raise `app.core.errors.ServiceError`s with a readable `message`.

A run is followed through a `Following`: its events (iterated once), and `stop()`,
which asks the run itself to stop. Leaving the events early only stops reading: the
run goes on where it runs (on a server, `--thread` joins it later).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from ag_ui.core import BaseEvent, ResumeEntry

from app.core.errors import ErrorCode
from app.core.runs.threads import PAGE_MESSAGES, ThreadPage

ACTIVE: Final = frozenset({"queued", "running"})
CANCELLED: Final[ErrorCode] = "cancelled"  # the RUN_ERROR code of a run stopped on request


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What the terminal reads of a run record."""

    run_id: str
    status: str
    graph: str | None = None

    @property
    def active(self) -> bool:
        """Queued or running: its events are still to come."""
        return self.status in ACTIVE


class Following(Protocol):
    """One run as the terminal follows it."""

    def events(self) -> AsyncGenerator[BaseEvent, None]:
        """The run's events, RUN_STARTED to RUN_FINISHED or RUN_ERROR (a refusal raises)."""
        ...

    async def stop(self) -> None:
        """Ask the run to stop: its events then end with RUN_ERROR code `cancelled`.

        Returns once the request is made (waiting for the run to have started, if it
        has not yet); a run that already ended is left as it is. A failure to ask
        raises ServiceError.
        """
        ...


class Agent(Protocol):
    """One agent, in-process or remote."""

    graph_id: str

    async def thread(
        self, thread_id: str, *, limit: int = PAGE_MESSAGES, before: str | None = None
    ) -> ThreadPage | None:
        """The thread's latest `limit` messages before message `before` (none: the newest)
        and its pending interrupts; None when it does not exist."""
        ...

    async def under_way(self, thread_id: str) -> RunInfo | None:
        """The thread's newest run if it is queued or running and can be followed from here."""
        ...

    def start(
        self,
        thread_id: str,
        *,
        message: str | None = None,
        resume: Sequence[ResumeEntry] = (),
    ) -> Following:
        """A new run (a message, or answers to the pending interrupts), started as it is read."""
        ...

    def join(self, thread_id: str, run_id: str) -> Following:
        """A run already under way: its events from the first, then live to its end."""
        ...
