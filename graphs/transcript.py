"""Where a thread's messages go once no request will carry them again.

A graph's state is its working state: what the model can still be sent. A thread's
whole history is longer; the messages before the working state live in a `Transcript`
that whoever runs the graph supplies in the run's config (`config["configurable"]
["transcript"]`): the service keeps them in its database. Without one (`langgraph dev`,
Studio, a graph compiled alone) nothing leaves the state, which then holds the whole
thread, as LangGraph's own servers keep it.

Which messages leave is the context budget's call (`graphs/context.py`,
`out_of_view`): those folded into the summary, or dropped when the thread keeps no
summary. The agent node hands them to the transcript, then removes them from the
state in the same step: a step re-run after a crash hands them over again, so
`keep` must ignore messages it already holds (by id).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig

logger = logging.getLogger(__name__)

TRANSCRIPT_KEY: Final = "transcript"
NOT_HANDED_OVER = "%d messages stay in the working state: the transcript did not take them"


@runtime_checkable
class Transcript(Protocol):
    """A thread's messages older than its working state, in the order they were said."""

    async def keep(self, thread_id: str, messages: Sequence[AnyMessage]) -> None:
        """Append `messages` to the thread's transcript, skipping any it holds already."""
        ...


def transcript_of(config: RunnableConfig) -> Transcript | None:
    """The transcript the run's config supplies (None: the state keeps the whole thread)."""
    found = (config.get("configurable") or {}).get(TRANSCRIPT_KEY)
    return found if isinstance(found, Transcript) else None


async def hand_over(config: RunnableConfig, messages: Sequence[AnyMessage]) -> list[RemoveMessage]:
    """Hand `messages` to the run's transcript and return the removals that take them out
    of the state; none without a transcript, or when it failed (they stay, nothing lost)."""
    transcript = transcript_of(config)
    if transcript is None or not messages:
        return []
    try:
        await transcript.keep(str(config["configurable"]["thread_id"]), messages)
    except Exception:  # the run goes on with a larger state; the next step tries again
        logger.warning(NOT_HANDED_OVER, len(messages), exc_info=True)
        return []
    return [RemoveMessage(id=message.id) for message in messages if message.id]
