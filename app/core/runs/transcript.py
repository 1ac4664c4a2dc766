"""A thread's transcript in the run store: the messages its graph's working state let go.

The agents' graphs keep in their state only what the model can still be sent
(`graphs/transcript.py`); the service hands every run this transcript, which keeps the
rest in the run store's agent_messages, serialized as the checkpointer serializes
them. A thread's history is its transcript followed by its state's messages
(`history`): a rollback to a checkpoint from before a hand-over brings messages back
into the state, and those count where the state has them.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage
from langgraph.checkpoint.serde.base import SerializerProtocol

from app.core.storage.runs import KeptMessage, RunStore


class ThreadTranscript:
    """`graphs.transcript.Transcript` on a run store, in a checkpointer's serialization."""

    def __init__(self, store: RunStore, serde: SerializerProtocol) -> None:
        self._store = store
        self._serde = serde

    async def keep(self, thread_id: str, messages: Sequence[AnyMessage]) -> None:
        kept = [
            KeptMessage(message.id, *self._serde.dumps_typed(message))
            for message in messages
            if message.id
        ]
        await self._store.keep_messages(thread_id, kept)

    async def history(self, thread_id: str, state: Sequence[AnyMessage]) -> list[AnyMessage]:
        """The thread's whole history: its kept messages, then the state's `state`."""
        kept = await self._store.kept_messages(thread_id)
        if not kept:
            return list(state)
        current = {message.id for message in state}
        earlier = [
            self._serde.loads_typed((row.type, row.data))
            for row in kept
            if row.message_id not in current
        ]
        return [*earlier, *state]

    async def holds(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """Which of the message `ids` the thread's transcript holds."""
        return await self._store.kept_ids(thread_id, ids)
