"""The run store's queries, written once for SQLite and PostgreSQL (`app.core.runs.RunStore`).

`SqlRunStore` keeps the contract over two primitives each backend provides:
`_transaction(steps)` runs `(sql, params)` steps in one transaction and returns the last
step's row count (its rows with `fetch=True`), `_read(sql, params)` runs one query. The
SQL is written with `?` placeholders; the few dialect differences are class attributes:
`GREATEST` (SQLite's scalar MAX, PostgreSQL's GREATEST) and `NOW` (the database's clock
in epoch seconds, which leases use so that replicas never compare their own clocks).
Both backends give agent_runs a `rowid` in insertion order (SQLite's own, a PostgreSQL
identity column of that name): the tie-break between runs created in the same instant.
Text a user or an upstream wrote (titles, error messages) is stored with NUL as U+FFFD
on both: PostgreSQL's text cannot hold NUL, and both must read back the same.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from app.core.runs import (
    Ending,
    RunError,
    RunRecord,
    StoredRun,
    ThreadSummary,
    default_title,
    storable,
)

COLUMNS = (
    "thread_id, run_id, graph, status, created_at, finished_at, error_code, error_message,"
    " owner, request, checkpoint_before"
)
# The latest run's status rides along from agent_runs (its primary key starts with
# thread_id), so no status is kept twice.
SUMMARY = (
    "SELECT t.thread_id, t.graph, t.title, t.updated_at, (SELECT r.status FROM agent_runs r"
    " WHERE r.thread_id = t.thread_id ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1)"
    " FROM agent_threads t"
)
# A run's rows, oldest first per thread, for rebuilding the thread list (`threads_from_runs`).
RUNS_FOR_THREADS = (
    "SELECT thread_id, graph, request, created_at, COALESCE(finished_at, created_at)"
    " FROM agent_runs ORDER BY thread_id, created_at, rowid"
)
INSERT_THREAD = (
    "INSERT INTO agent_threads (thread_id, graph, title, created_at, updated_at) VALUES (?,?,?,?,?)"
)

Step = tuple[str, Any]  # (sql, params): params a tuple, or a list of tuples for many rows


def stored_run(row: Sequence[Any]) -> StoredRun:
    """A row of COLUMNS as the stored run."""
    (thread_id, run_id, graph, status, created, finished, code, message, owner, request, before) = (
        row
    )
    error = RunError(code=code, message=message or "") if code is not None else None
    record = RunRecord(
        run_id=run_id,
        thread_id=thread_id,
        graph=graph,
        status=status,
        created_at=created,
        finished_at=finished,
        error=error,
    )
    return StoredRun(
        record=record, owner=owner, request=json.loads(request), checkpoint_before=before
    )


def summary(row: Sequence[Any]) -> ThreadSummary:
    """A row of SUMMARY as the thread's list entry."""
    thread_id, graph, title, updated_at, status = row
    return ThreadSummary(
        thread_id=thread_id, graph_id=graph, title=title, updated_at=updated_at, status=status
    )


class SqlRunStore(ABC):
    """`RunStore` in SQL; a backend adds the connection, the schema and the probe."""

    GREATEST: ClassVar[str]
    NOW: ClassVar[str]

    @abstractmethod
    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any:
        """Run `steps` in one transaction; the last one's row count, or its rows (`fetch`).

        A step with an empty list of rows is skipped. A cancelled caller does not stop
        the transaction.
        """

    @abstractmethod
    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]:
        """The rows of one query."""

    @abstractmethod
    async def probe(self, timeout_s: float) -> None: ...

    async def create(self, stored: StoredRun) -> bool:
        record = stored.record
        title = default_title(stored.request.get("messages") or ())
        count = await self._transaction(
            (
                (
                    f"{INSERT_THREAD} ON CONFLICT (thread_id) DO UPDATE SET"
                    " graph=excluded.graph,"
                    f" updated_at={self.GREATEST}(agent_threads.updated_at, excluded.updated_at)"
                    # a run id the thread has used is refused: its row stays as it was
                    " WHERE NOT EXISTS (SELECT 1 FROM agent_runs"
                    " WHERE thread_id=excluded.thread_id AND run_id=?)",
                    (
                        record.thread_id,
                        record.graph,
                        title,
                        record.created_at,
                        record.created_at,
                        record.run_id,
                    ),
                ),
                (
                    f"INSERT INTO agent_runs ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                    " ON CONFLICT DO NOTHING",
                    (
                        record.thread_id,
                        record.run_id,
                        record.graph,
                        record.status,
                        record.created_at,
                        None,
                        None,
                        None,
                        stored.owner,
                        json.dumps(stored.request, ensure_ascii=False),
                        stored.checkpoint_before,
                    ),
                ),
            )
        )
        return bool(count == 1)

    async def started(
        self, thread_id: str, run_id: str, *, owner: str, checkpoint_before: str | None
    ) -> None:
        await self._transaction(
            (
                (
                    "UPDATE agent_runs SET status='running', owner=?, checkpoint_before=?"
                    " WHERE thread_id=? AND run_id=?",
                    (owner, checkpoint_before, thread_id, run_id),
                ),
            )
        )

    async def claim(self, thread_id: str, run_id: str, owner: str) -> None:
        await self._transaction(
            (
                (
                    "UPDATE agent_runs SET owner=? WHERE thread_id=? AND run_id=?",
                    (owner, thread_id, run_id),
                ),
            )
        )

    async def get(self, thread_id: str, run_id: str) -> StoredRun | None:
        rows = await self._read(
            f"SELECT {COLUMNS} FROM agent_runs WHERE thread_id=? AND run_id=?",
            (thread_id, run_id),
        )
        return stored_run(rows[0]) if rows else None

    async def of_thread(self, thread_id: str) -> list[RunRecord]:
        rows = await self._read(
            f"SELECT {COLUMNS} FROM agent_runs WHERE thread_id=?"
            " ORDER BY created_at DESC, rowid DESC",
            (thread_id,),
        )
        return [stored_run(row).record for row in rows]

    async def active(self) -> list[StoredRun]:
        rows = await self._read(
            f"SELECT {COLUMNS} FROM agent_runs WHERE status IN ('queued', 'running')"
            " ORDER BY created_at, rowid",
            (),
        )
        return [stored_run(row) for row in rows]

    async def write(
        self, events: Iterable[tuple[str, str, int, str]], endings: Iterable[Ending] = ()
    ) -> None:
        endings = list(endings)
        await self._transaction(
            (
                (
                    "INSERT INTO agent_run_events (thread_id, run_id, seq, data)"
                    " VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
                    list(events),
                ),
                (
                    "UPDATE agent_runs SET status=?, finished_at=?, error_code=?, error_message=?"
                    " WHERE thread_id=? AND run_id=?",
                    [
                        (
                            end.status,
                            end.finished_at,
                            end.error.code if end.error else None,
                            storable(end.error.message) if end.error else None,
                            end.thread_id,
                            end.run_id,
                        )
                        for end in endings
                    ],
                ),
                (
                    f"UPDATE agent_threads SET updated_at={self.GREATEST}(updated_at, ?)"
                    " WHERE thread_id=?",
                    [(end.finished_at, end.thread_id) for end in endings],
                ),
            )
        )

    async def events(self, thread_id: str, run_id: str, after: int = 0) -> list[tuple[int, str]]:
        rows = await self._read(
            "SELECT seq, data FROM agent_run_events WHERE thread_id=? AND run_id=? AND seq>?"
            " ORDER BY seq",
            (thread_id, run_id, after),
        )
        return [(seq, data) for seq, data in rows]

    async def expire(self, finished_before: float) -> None:
        await self._transaction(
            (
                (
                    "DELETE FROM agent_run_events WHERE (thread_id, run_id) IN (SELECT thread_id,"
                    " run_id FROM agent_runs WHERE finished_at IS NOT NULL AND finished_at < ?)",
                    (finished_before,),
                ),
            )
        )

    async def forget_thread(self, thread_id: str) -> None:
        await self._transaction(
            (
                ("DELETE FROM agent_run_events WHERE thread_id=?", (thread_id,)),
                ("DELETE FROM agent_runs WHERE thread_id=?", (thread_id,)),
                ("DELETE FROM agent_threads WHERE thread_id=?", (thread_id,)),
                ("DELETE FROM agent_thread_leases WHERE thread_id=?", (thread_id,)),
            )
        )

    async def threads(self, graph: str | None, limit: int) -> list[ThreadSummary]:
        where, params = ("WHERE t.graph=? ", (graph,)) if graph is not None else ("", ())
        rows = await self._read(
            f"{SUMMARY} {where}ORDER BY t.updated_at DESC, t.thread_id LIMIT ?",
            (*params, limit),
        )
        return [summary(row) for row in rows if row[4] is not None]

    async def rename_thread(self, thread_id: str, title: str) -> ThreadSummary | None:
        rows = await self._transaction(
            (
                (
                    "UPDATE agent_threads SET title=? WHERE thread_id=?",
                    (storable(title), thread_id),
                ),
                (f"{SUMMARY} WHERE t.thread_id=?", (thread_id,)),
            ),
            fetch=True,
        )
        return summary(rows[0]) if rows and rows[0][4] is not None else None

    async def claim_thread(self, thread_id: str, run_id: str, owner: str, ttl_s: float) -> bool:
        count = await self._transaction(
            (
                (
                    "INSERT INTO agent_thread_leases (thread_id, run_id, owner, expires_at)"
                    f" VALUES (?, ?, ?, {self.NOW} + ?) ON CONFLICT (thread_id) DO UPDATE SET"
                    " run_id=excluded.run_id, owner=excluded.owner,"
                    " expires_at=excluded.expires_at"
                    f" WHERE agent_thread_leases.expires_at <= {self.NOW}"
                    " OR (agent_thread_leases.run_id=excluded.run_id"
                    " AND agent_thread_leases.owner=excluded.owner)",
                    (thread_id, run_id, owner, float(ttl_s)),
                ),
            )
        )
        return bool(count == 1)

    async def renew(self, owner: str, ttl_s: float) -> list[str]:
        rows = await self._transaction(
            (
                (
                    f"UPDATE agent_thread_leases SET expires_at={self.NOW} + ?"
                    " WHERE owner=? RETURNING thread_id",
                    (float(ttl_s), owner),
                ),
            ),
            fetch=True,
        )
        return sorted(thread_id for (thread_id,) in rows)

    async def release(self, thread_id: str, run_id: str) -> None:
        await self._transaction(
            (
                (
                    "DELETE FROM agent_thread_leases WHERE thread_id=? AND run_id=?",
                    (thread_id, run_id),
                ),
            )
        )
