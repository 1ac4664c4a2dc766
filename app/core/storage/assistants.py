"""Created assistants (LangGraph's `POST /assistants`) as records, beside the runs.

Both backends, one schema text (as `app.core.storage.users`):

- agent_assistants: one row an assistant: its owner (the user who created it), the
  version in use, when it was created and last changed;
- agent_assistant_versions: every version of each, what a run of it uses: the graph, its
  name and description, and its `config`, `context` and `metadata` as JSON text.

A change is a new version and a choice of version (`set_latest`) moves the assistant
back to an older one: nothing is rewritten. Each change reads and writes in one
transaction held against the same change elsewhere (`_decide`, keyed by the assistant),
so two replicas' changes never make the same version twice.

`SqlAssistantStore` writes the queries once over the backend's primitives; each
backend's run store is one too (`assistant_store`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from app.core.storage.runs import storable
from app.core.storage.sql import Decision, Step

ASSISTANTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_assistants (
    assistant_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS agent_assistants_user ON agent_assistants (user_id, created_at);
CREATE TABLE IF NOT EXISTS agent_assistant_versions (
    assistant_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    graph_id TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT,
    config TEXT NOT NULL,
    context TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (assistant_id, version)
);
"""
ASSISTANTS_TABLES = ("agent_assistants", "agent_assistant_versions")

# The assistant with the version in use.
_CURRENT = (
    "SELECT a.assistant_id, a.user_id, v.version, v.graph_id, v.name, v.description,"
    " v.config, v.context, v.metadata, a.created_at, a.updated_at"
    " FROM agent_assistants a JOIN agent_assistant_versions v"
    " ON v.assistant_id = a.assistant_id AND v.version = a.version"
)
_VERSIONS = (
    "SELECT v.assistant_id, a.user_id, v.version, v.graph_id, v.name, v.description,"
    " v.config, v.context, v.metadata, v.created_at, v.created_at"
    " FROM agent_assistant_versions v JOIN agent_assistants a"
    " ON a.assistant_id = v.assistant_id WHERE v.assistant_id=? ORDER BY v.version DESC"
)
_INSERT_VERSION = (
    "INSERT INTO agent_assistant_versions (assistant_id, version, graph_id, name,"
    " description, config, context, metadata, created_at) VALUES (?,?,?,?,?,?,?,?,?)"
)
# Held by `_decide` for a change of one assistant (a key no thread id can be: ids have
# no spaces).
LOCK_KEY = "assistant {assistant_id}"


class AssistantRow(NamedTuple):
    """One assistant at one version: a version's own time is `created_at` and
    `updated_at` both."""

    assistant_id: str
    user_id: str
    version: int
    graph_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    context: dict[str, Any]
    metadata: dict[str, Any]
    created_at: float
    updated_at: float


def _row(found: Sequence[Any]) -> AssistantRow:
    (assistant_id, user_id, version, graph_id, name, description, config, context, metadata) = (
        found[:9]
    )
    return AssistantRow(
        str(assistant_id),
        str(user_id),
        int(version),
        str(graph_id),
        str(name),
        description,
        json.loads(config),
        json.loads(context),
        json.loads(metadata),
        float(found[9]),
        float(found[10]),
    )


def _version_params(row: AssistantRow, at: float) -> tuple[Any, ...]:
    return (
        row.assistant_id,
        row.version,
        row.graph_id,
        storable(row.name),
        None if row.description is None else storable(row.description),
        json.dumps(row.config, ensure_ascii=False),
        json.dumps(row.context, ensure_ascii=False),
        json.dumps(row.metadata, ensure_ascii=False),
        at,
    )


class SqlAssistantStore(ABC):
    """The assistants' queries; a backend provides the primitives (`SqlRunStore`'s)."""

    @abstractmethod
    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any: ...

    @abstractmethod
    async def _decide(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None: ...

    @abstractmethod
    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]: ...

    async def create_assistant(self, row: AssistantRow) -> AssistantRow | None:
        """Record a new assistant at version 1 (`row`'s version is ignored); None
        (nothing written) when its id is taken: the existing one is `assistant(id)`."""
        created = row._replace(version=1)
        done: list[bool] = []

        def decide(rows: list[list[Sequence[Any]]]) -> Sequence[Step]:
            if rows[0]:
                return ()
            done.append(True)
            return (
                (
                    "INSERT INTO agent_assistants (assistant_id, user_id, version, created_at,"
                    " updated_at) VALUES (?,?,1,?,?)",
                    (row.assistant_id, row.user_id, row.created_at, row.created_at),
                ),
                (_INSERT_VERSION, _version_params(created, row.created_at)),
            )

        await self._decide(
            LOCK_KEY.format(assistant_id=row.assistant_id),
            (("SELECT 1 FROM agent_assistants WHERE assistant_id=?", (row.assistant_id,)),),
            decide,
        )
        return created if done else None

    async def assistant(self, assistant_id: str) -> AssistantRow | None:
        """The assistant at the version in use, or None."""
        rows = await self._read(f"{_CURRENT} WHERE a.assistant_id=?", (assistant_id,))
        return _row(rows[0]) if rows else None

    async def assistants(self, user_id: str | None) -> list[AssistantRow]:
        """The assistants of `user_id` (None: everyone's), newest first."""
        if user_id is None:
            rows = await self._read(f"{_CURRENT} ORDER BY a.created_at DESC", ())
        else:
            rows = await self._read(
                f"{_CURRENT} WHERE a.user_id=? ORDER BY a.created_at DESC", (user_id,)
            )
        return [_row(found) for found in rows]

    async def assistant_versions(self, assistant_id: str) -> list[AssistantRow]:
        """Every version of the assistant, newest first (none: no such assistant)."""
        return [_row(found) for found in await self._read(_VERSIONS, (assistant_id,))]

    async def change_assistant(
        self, assistant_id: str, change: Callable[[AssistantRow], AssistantRow], now: float
    ) -> AssistantRow | None:
        """A new version, `change(the version in use)`, numbered after the newest, and in
        use from now; None when there is no such assistant."""
        made: list[AssistantRow] = []

        def decide(rows: list[list[Sequence[Any]]]) -> Sequence[Step]:
            if not rows[0]:
                return ()
            newest = max(int(found[0]) for found in rows[1]) if rows[1] else 0
            current = _row(rows[0][0])
            new = change(current)._replace(version=newest + 1, updated_at=now)
            made.append(new)
            return (
                (_INSERT_VERSION, _version_params(new, now)),
                (
                    "UPDATE agent_assistants SET version=?, updated_at=? WHERE assistant_id=?",
                    (new.version, now, assistant_id),
                ),
            )

        await self._decide(
            LOCK_KEY.format(assistant_id=assistant_id),
            (
                (f"{_CURRENT} WHERE a.assistant_id=?", (assistant_id,)),
                (
                    "SELECT version FROM agent_assistant_versions WHERE assistant_id=?",
                    (assistant_id,),
                ),
            ),
            decide,
        )
        return made[0] if made else None

    async def set_assistant_version(self, assistant_id: str, version: int, now: float) -> bool:
        """Use `version` of the assistant from now; False when it has no such version."""
        count = await self._transaction(
            (
                (
                    "UPDATE agent_assistants SET version=?, updated_at=? WHERE assistant_id=?"
                    " AND EXISTS (SELECT 1 FROM agent_assistant_versions v"
                    " WHERE v.assistant_id=? AND v.version=?)",
                    (version, now, assistant_id, assistant_id, version),
                ),
            )
        )
        return bool(count)

    async def delete_assistant(self, assistant_id: str) -> bool:
        """Forget the assistant and its versions; False when there was none."""
        count = await self._transaction(
            (
                ("DELETE FROM agent_assistant_versions WHERE assistant_id=?", (assistant_id,)),
                ("DELETE FROM agent_assistants WHERE assistant_id=?", (assistant_id,)),
            )
        )
        return bool(count)


def assistant_store(store: object) -> SqlAssistantStore:
    """The run store as the assistants' store (every backend's run store is one)."""
    if not isinstance(store, SqlAssistantStore):
        raise TypeError(f"{type(store).__name__} keeps no assistants")
    return store
