"""The run store's queries (`app.core.storage.runs.RunStore`), written once for both backends.

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
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from app.core.storage.runs import (
    ACTIVE,
    ADMIN_ID,
    ENDED_WHILE_CHECKED_S,
    Admission,
    HeardAdmission,
    HeardEnd,
    KeptMessage,
    MultitaskStrategy,
    RunEnd,
    RunError,
    RunRecord,
    RunStatus,
    StoredRun,
    ThreadOrigin,
    ThreadSummary,
    default_title,
    storable,
)

COLUMNS = (
    "thread_id, run_id, graph, status, created_at, finished_at, error_code, error_message,"
    " owner, request, checkpoint_before, rollback_from, cancel_requested"
)
ACTIVE_SQL = "status IN ('queued', 'running')"
# The latest run's status rides along from agent_runs (its primary key starts with
# thread_id), so no status is kept twice.
SUMMARY = (
    "SELECT t.thread_id, t.graph, t.title, t.updated_at, (SELECT r.status FROM agent_runs r"
    " WHERE r.thread_id = t.thread_id ORDER BY r.created_at DESC, r.rowid DESC LIMIT 1),"
    " t.origin, t.user_id FROM agent_threads t"
)
# A run's rows, oldest first per thread, for rebuilding the thread list (`threads_from_runs`).
RUNS_FOR_THREADS = (
    "SELECT thread_id, graph, request, created_at, COALESCE(finished_at, created_at)"
    " FROM agent_runs ORDER BY thread_id, created_at, rowid"
)
INSERT_THREAD = (
    "INSERT INTO agent_threads (thread_id, graph, title, created_at, updated_at, origin)"
    " VALUES (?,?,?,?,?,?)"
)
# A new thread with its owner (a run's admission).
INSERT_OWNED_THREAD = (
    "INSERT INTO agent_threads"
    " (thread_id, graph, title, created_at, updated_at, origin, user_id) VALUES (?,?,?,?,?,?,?)"
)
# agent_threads' columns added after it was first released (`title_by` says who set the
# title: `app.core.storage.runs.TitleBy`), with what an older database's rows get.
THREAD_COLUMNS = {
    "title_by": "TEXT NOT NULL DEFAULT 'message'",
    "origin": "TEXT NOT NULL DEFAULT 'api'",
    "user_id": f"TEXT NOT NULL DEFAULT '{ADMIN_ID}'",
}
# Each thread's title and its first run's request: which titles a user gave (`renamed`).
TITLES_AND_FIRST_REQUESTS = (
    "SELECT t.thread_id, t.title, (SELECT r.request FROM agent_runs r"
    " WHERE r.thread_id = t.thread_id ORDER BY r.created_at, r.rowid LIMIT 1)"
    " FROM agent_threads t"
)
MARK_RENAMED = "UPDATE agent_threads SET title_by='user' WHERE thread_id=?"

KEEP_MESSAGE = (
    "INSERT INTO agent_messages (thread_id, message_id, type, data) VALUES (?,?,?,?)"
    " ON CONFLICT (thread_id, message_id) DO NOTHING"
)

Step = tuple[str, Any]  # (sql, params): params a tuple, or a list of tuples for many rows
# Given the rows of each read, the writes to make in the same transaction.
Decision = Callable[[list[list[Sequence[Any]]]], Sequence[Step]]


def stored_run(row: Sequence[Any]) -> StoredRun:
    """A row of COLUMNS as the stored run."""
    (
        thread_id,
        run_id,
        graph,
        status,
        created,
        finished,
        code,
        message,
        owner,
        request,
        before,
        rollback_from,
        cancel_requested,
    ) = row
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
        record=record,
        owner=owner,
        request=json.loads(request),
        checkpoint_before=before,
        rollback_from=rollback_from,
        cancel_requested=bool(cancel_requested),
    )


def _insert_run(
    stored: StoredRun, status: RunStatus, *, rollback_from: str | None = None, conflict: str = ""
) -> Step:
    record = stored.record
    return (
        f"INSERT INTO agent_runs ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?){conflict}",
        (
            record.thread_id,
            record.run_id,
            record.graph,
            status,
            record.created_at,
            None,
            None,
            None,
            stored.owner,
            json.dumps(stored.request, ensure_ascii=False),
            stored.checkpoint_before,
            rollback_from,
            0,
        ),
    )


def owner_query(thread_id: str) -> Step:
    """Who owns the thread: its first run's user, or whoever created it before any run
    (LangGraph's `POST /threads`)."""
    return (
        "SELECT user_id FROM agent_threads WHERE thread_id=? UNION ALL"
        " SELECT user_id FROM agent_created_threads WHERE thread_id=? LIMIT 1",
        (thread_id, thread_id),
    )


def _active_runs_of(user_id: str) -> Step:
    """How many runs of `user_id`'s threads are queued or running."""
    return (
        "SELECT count(*) FROM agent_runs r JOIN agent_threads t ON t.thread_id = r.thread_id"
        f" WHERE t.user_id=? AND r.{ACTIVE_SQL}",
        (user_id,),
    )


def summary(row: Sequence[Any]) -> ThreadSummary:
    """A row of SUMMARY as the thread's list entry."""
    thread_id, graph, title, updated_at, status, origin, owner = row
    return ThreadSummary(
        thread_id=thread_id,
        graph_id=graph,
        title=title,
        updated_at=updated_at,
        status=status,
        origin=origin,
        owner=owner,
    )


class SqlRunStore(ABC):
    """`RunStore` in SQL; a backend adds the connection, the schema and the probe."""

    GREATEST: ClassVar[str]
    NOW: ClassVar[str]
    recheck_s: ClassVar[float]
    # A statement (taking the thread's id) that tells other processes of an admission,
    # sent in the admitting transaction; None where they cannot be told.
    ADMITTED: ClassVar[str | None] = None

    @abstractmethod
    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any:
        """Run `steps` in one transaction; the last one's row count, or its rows (`fetch`).

        A step with an empty list of rows is skipped. A cancelled caller does not stop
        the transaction.
        """

    @abstractmethod
    async def _decide(self, thread_id: str, reads: Sequence[Step], decide: Decision) -> None:
        """In one transaction that holds `thread_id` against every other process doing
        the same: run `reads`, then the writes `decide` returns for their rows."""

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
                        "api",
                        record.run_id,
                    ),
                ),
                _insert_run(stored, record.status, conflict=" ON CONFLICT DO NOTHING"),
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
        self, events: Iterable[tuple[str, str, int, str]], ends: Iterable[RunEnd] = ()
    ) -> None:
        ends = list(ends)
        await self._transaction(
            (
                (
                    "INSERT INTO agent_run_events (thread_id, run_id, seq, data)"
                    " VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
                    list(events),
                ),
                (
                    "UPDATE agent_runs SET status=?, finished_at=?, error_code=?, error_message=?"
                    " WHERE thread_id=? AND run_id=? AND owner=COALESCE(?, owner)",
                    [
                        (
                            end.status,
                            end.finished_at,
                            end.error.code if end.error else None,
                            storable(end.error.message) if end.error else None,
                            end.thread_id,
                            end.run_id,
                            end.owner,
                        )
                        for end in ends
                    ],
                ),
                (
                    "DELETE FROM agent_thread_leases WHERE thread_id=? AND run_id=?"
                    " AND owner=COALESCE(?, owner)",
                    [(end.thread_id, end.run_id, end.owner) for end in ends],
                ),
                (
                    f"UPDATE agent_threads SET updated_at={self.GREATEST}(updated_at, ?)"
                    " WHERE thread_id=?",
                    [(end.finished_at, end.thread_id) for end in ends],
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
                ("DELETE FROM agent_messages WHERE thread_id=?", (thread_id,)),
                ("DELETE FROM agent_created_threads WHERE thread_id=?", (thread_id,)),
            )
        )

    async def create_thread(
        self,
        thread_id: str,
        metadata: str,
        created_at: float,
        *,
        replace: bool = False,
        user_id: str = ADMIN_ID,
    ) -> bool:
        conflict = "UPDATE SET metadata=excluded.metadata" if replace else "NOTHING"
        count = await self._transaction(
            (
                (
                    "INSERT INTO agent_created_threads (thread_id, metadata, created_at, user_id)"
                    f" VALUES (?,?,?,?) ON CONFLICT (thread_id) DO {conflict}",
                    (thread_id, storable(metadata), created_at, user_id),
                ),
            )
        )
        return bool(count)

    async def created_thread(self, thread_id: str) -> tuple[str, float] | None:
        rows = await self._read(
            "SELECT metadata, created_at FROM agent_created_threads WHERE thread_id=?",
            (thread_id,),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    async def created_threads(
        self, user_id: str | None, limit: int
    ) -> list[tuple[str, str, float, bool]]:
        where = "WHERE c.user_id=? " if user_id is not None else ""
        rows = await self._read(
            "SELECT c.thread_id, c.metadata, c.created_at, EXISTS (SELECT 1 FROM agent_runs r"
            " WHERE r.thread_id = c.thread_id) FROM agent_created_threads c"
            f" {where}ORDER BY c.created_at DESC, c.thread_id LIMIT ?",
            (*(() if user_id is None else (user_id,)), limit),
        )
        return [(str(t), str(m), float(c), bool(r)) for t, m, c, r in rows]

    async def delete_run(self, thread_id: str, run_id: str) -> bool:
        count = await self._transaction(
            (
                (
                    "DELETE FROM agent_run_events WHERE thread_id=? AND run_id=? AND NOT EXISTS"
                    " (SELECT 1 FROM agent_runs WHERE thread_id=? AND run_id=?"
                    f" AND {ACTIVE_SQL})",
                    (thread_id, run_id, thread_id, run_id),
                ),
                (
                    f"DELETE FROM agent_runs WHERE thread_id=? AND run_id=? AND NOT {ACTIVE_SQL}",
                    (thread_id, run_id),
                ),
            )
        )
        return bool(count)

    async def copy_thread(self, source: str, target: str, *, user_id: str, now: float) -> None:
        await self._transaction(
            (
                (
                    "INSERT INTO agent_created_threads (thread_id, metadata, created_at, user_id)"
                    " SELECT ?, COALESCE((SELECT metadata FROM agent_created_threads"
                    " WHERE thread_id=?), '{}'), ?, ?",
                    (target, source, now, user_id),
                ),
                (
                    "INSERT INTO agent_threads (thread_id, graph, title, created_at,"
                    " updated_at, origin, title_by, user_id) SELECT ?, graph, title, ?, ?,"
                    " origin, title_by, ? FROM agent_threads WHERE thread_id=?",
                    (target, now, now, user_id, source),
                ),
                # The source's ended runs; not the process that ran them, nor a cancel mark.
                (
                    f"INSERT INTO agent_runs ({COLUMNS}) SELECT ?, run_id, graph, status,"
                    " created_at, finished_at, error_code, error_message, owner, request,"
                    " checkpoint_before, rollback_from, 0 FROM agent_runs"
                    f" WHERE thread_id=? AND NOT {ACTIVE_SQL} ORDER BY rowid",
                    (target, source),
                ),
                (
                    "INSERT INTO agent_run_events (thread_id, run_id, seq, data)"
                    " SELECT ?, e.run_id, e.seq, e.data FROM agent_run_events e"
                    " JOIN agent_runs r ON r.thread_id=? AND r.run_id=e.run_id"
                    " WHERE e.thread_id=?",
                    (target, target, source),
                ),
                (
                    "INSERT INTO agent_messages (thread_id, message_id, type, data)"
                    " SELECT ?, message_id, type, data FROM agent_messages WHERE thread_id=?"
                    " ORDER BY rowid",
                    (target, source),
                ),
            )
        )

    async def keep_messages(self, thread_id: str, messages: Sequence[KeptMessage]) -> None:
        rows = [(thread_id, *message) for message in messages]
        await self._transaction(((KEEP_MESSAGE, rows),))

    async def kept_messages(self, thread_id: str) -> list[KeptMessage]:
        rows = await self._read(
            "SELECT message_id, type, data FROM agent_messages WHERE thread_id=? ORDER BY rowid",
            (thread_id,),
        )
        return [KeptMessage(message_id, type_, bytes(data)) for message_id, type_, data in rows]

    async def kept_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        marks = ",".join("?" * len(ids))
        rows = await self._read(
            f"SELECT message_id FROM agent_messages WHERE thread_id=? AND message_id IN ({marks})",
            (thread_id, *ids),
        )
        return {row[0] for row in rows}

    async def threads(
        self, graph: str | None, limit: int, user_id: str | None = None
    ) -> list[ThreadSummary]:
        conditions = {"t.graph=?": graph, "t.user_id=?": user_id}
        kept = {sql: value for sql, value in conditions.items() if value is not None}
        where = f"WHERE {' AND '.join(kept)} " if kept else ""
        rows = await self._read(
            f"{SUMMARY} {where}ORDER BY t.updated_at DESC, t.thread_id LIMIT ?",
            (*kept.values(), limit),
        )
        return [summary(row) for row in rows if row[4] is not None]

    async def rename_thread(self, thread_id: str, title: str) -> ThreadSummary | None:
        rows = await self._transaction(
            (
                (
                    "UPDATE agent_threads SET title=?, title_by='user' WHERE thread_id=?",
                    (storable(title), thread_id),
                ),
                (f"{SUMMARY} WHERE t.thread_id=?", (thread_id,)),
            ),
            fetch=True,
        )
        return summary(rows[0]) if rows and rows[0][4] is not None else None

    async def title_due(self, thread_id: str, run_id: str) -> bool:
        rows = await self._read(
            "SELECT 1 FROM agent_threads t WHERE t.thread_id=? AND t.title_by='message'"
            " AND NOT EXISTS (SELECT 1 FROM agent_runs r WHERE r.thread_id=t.thread_id"
            " AND r.status='success' AND r.run_id<>?)",
            (thread_id, run_id),
        )
        return bool(rows)

    async def set_model_title(self, thread_id: str, title: str) -> bool:
        # Decided here, not by the caller: a rename that landed while the model was
        # writing made title_by `user`, and then this changes nothing.
        count = await self._transaction(
            (
                (
                    "UPDATE agent_threads SET title=?, title_by='model'"
                    " WHERE thread_id=? AND title_by='message'",
                    (storable(title), thread_id),
                ),
            )
        )
        return bool(count == 1)

    async def renew(self, owner: str, ttl_s: float) -> list[str]:
        rows = await self._transaction(
            (
                (
                    "INSERT INTO agent_replicas (owner, expires_at)"
                    f" VALUES (?, {self.NOW} + ?) ON CONFLICT (owner) DO UPDATE"
                    " SET expires_at=excluded.expires_at",
                    (owner, float(ttl_s)),
                ),
                (
                    f"UPDATE agent_thread_leases SET expires_at={self.NOW} + ?"
                    " WHERE owner=? RETURNING thread_id",
                    (float(ttl_s), owner),
                ),
            ),
            fetch=True,
        )
        return sorted(thread_id for (thread_id,) in rows)

    def _lease(self, thread_id: str, run_id: str, owner: str, ttl_s: float) -> Step:
        """The thread leased to `run_id` of `owner`, whoever held it (the caller decided)."""
        return (
            "INSERT INTO agent_thread_leases (thread_id, run_id, owner, expires_at)"
            f" VALUES (?, ?, ?, {self.NOW} + ?) ON CONFLICT (thread_id) DO UPDATE SET"
            " run_id=excluded.run_id, owner=excluded.owner, expires_at=excluded.expires_at",
            (thread_id, run_id, owner, float(ttl_s)),
        )

    async def admit(
        self,
        stored: StoredRun,
        *,
        strategy: MultitaskStrategy,
        ttl_s: float,
        max_queued: int,
        origin: ThreadOrigin = "api",
        user_id: str = ADMIN_ID,
        any_owner: bool = True,
        max_runs: int | None = None,
    ) -> Admission:
        record = stored.record
        thread_id, run_id = record.thread_id, record.run_id
        decided: list[Admission] = []

        def decide(rows: list[list[Sequence[Any]]]) -> Sequence[Step]:
            recent, used, owner, *counted = rows
            active = [row for row in recent if row[1] in ACTIVE]
            ahead = tuple(str(row[0]) for row in active)
            if owner and owner[0][0] != user_id and not any_owner:
                decided.append(Admission("foreign", None, ahead))
                return ()
            # A run that waits behind its thread's active one adds nothing running.
            if not ahead and counted and max_runs is not None and counted[0][0][0] >= max_runs:
                decided.append(Admission("limited", None, ahead))
                return ()
            if used:
                decided.append(Admission("exists", None, ahead))
                return ()
            if ahead and strategy == "reject":
                decided.append(Admission("busy", None, ahead))
                return ()
            if sum(row[1] == "queued" for row in active) >= max_queued:
                decided.append(Admission("full", None, ahead))
                return ()
            status: RunStatus = "queued" if ahead else "running"
            running = next((str(row[0]) for row in active if row[1] == "running"), None)
            undone = running if strategy == "rollback" else None
            # Nothing active: what the read found ended lately. (A queued run reads its
            # state at its turn anyway.)
            stale = not ahead and bool(recent)
            decided.append(Admission("created", status, ahead, undone, stale))
            title = default_title(stored.request.get("messages") or ())
            steps: list[Step] = [
                (
                    f"{INSERT_OWNED_THREAD} ON CONFLICT (thread_id) DO UPDATE SET"
                    " graph=excluded.graph,"
                    f" updated_at={self.GREATEST}(agent_threads.updated_at, excluded.updated_at)",
                    (
                        thread_id,
                        record.graph,
                        title,
                        record.created_at,
                        record.created_at,
                        origin,
                        user_id,
                    ),
                ),
                # A queued run finds its start checkpoint when its turn comes.
                _insert_run(
                    stored.model_copy(update={"checkpoint_before": None}) if ahead else stored,
                    status,
                    rollback_from=undone,
                ),
            ]
            if self.ADMITTED is not None:
                steps.append((self.ADMITTED, (thread_id,)))
            if not ahead:  # no active run: whatever lease is left is stale
                steps.append(self._lease(thread_id, run_id, stored.owner, ttl_s))
            elif strategy in ("interrupt", "rollback"):
                steps.append(
                    (
                        "UPDATE agent_runs SET cancel_requested=1"
                        f" WHERE thread_id=? AND {ACTIVE_SQL} AND run_id<>?",
                        (thread_id, run_id),
                    )
                )
            return steps

        await self._decide(
            thread_id,
            (
                (
                    "SELECT run_id, status FROM agent_runs WHERE thread_id=?"
                    f" AND ({ACTIVE_SQL} OR finished_at>=?) ORDER BY rowid",
                    (thread_id, record.created_at - ENDED_WHILE_CHECKED_S),
                ),
                ("SELECT 1 FROM agent_runs WHERE thread_id=? AND run_id=?", (thread_id, run_id)),
                owner_query(thread_id),
                *(() if max_runs is None else (_active_runs_of(user_id),)),
            ),
            decide,
        )
        return decided[-1]

    async def claim_turn(self, thread_id: str, run_id: str, owner: str, ttl_s: float) -> bool:
        return await self.claim_head(thread_id, (run_id,), owner, ttl_s) == run_id

    async def claim_head(
        self, thread_id: str, run_ids: Sequence[str], owner: str, ttl_s: float
    ) -> str | None:
        granted: list[str | None] = []

        def decide(rows: list[list[Sequence[Any]]]) -> Sequence[Step]:
            (active,) = rows
            head = active[0] if active else None
            if head is None or head[0] not in run_ids or head[1] != "queued":
                granted.append(None)
                return ()
            run_id = str(head[0])
            granted.append(run_id)
            return (
                (
                    "UPDATE agent_runs SET status='running', owner=?"
                    " WHERE thread_id=? AND run_id=?",
                    (owner, thread_id, run_id),
                ),
                self._lease(thread_id, run_id, owner, ttl_s),
            )

        await self._decide(
            thread_id,
            (
                (
                    f"SELECT run_id, status FROM agent_runs WHERE thread_id=? AND {ACTIVE_SQL}"
                    " ORDER BY status DESC, rowid",  # a running run first: then it is not our turn
                    (thread_id,),
                ),
            ),
            decide,
        )
        return granted[0]

    @asynccontextmanager
    async def hear_ends(
        self, heard: HeardEnd, *, admitted: HeardAdmission | None = None
    ) -> AsyncIterator[None]:
        yield  # a backend with a way to hear other processes' ends overrides this

    async def adopt(self, stored: StoredRun, owner: str, ttl_s: float, *, force: bool) -> bool:
        thread_id, run_id = stored.record.thread_id, stored.record.run_id
        adopted: list[bool] = []

        def decide(rows: list[list[Sequence[Any]]]) -> Sequence[Step]:
            run, lease, replica = rows
            if not run or run[0][0] not in ("queued", "running") or run[0][1] != stored.owner:
                adopted.append(False)  # ended, or already taken by another process
                return ()
            status = run[0][0]
            held = bool(lease and lease[0][0]) if status == "running" else bool(replica)
            if held and not force:
                adopted.append(False)
                return ()
            adopted.append(True)
            steps: list[Step] = [
                (
                    "UPDATE agent_runs SET owner=? WHERE thread_id=? AND run_id=?",
                    (owner, thread_id, run_id),
                )
            ]
            if status == "running":
                steps.append(self._lease(thread_id, run_id, owner, ttl_s))
            return steps

        await self._decide(
            thread_id,
            (
                (
                    "SELECT status, owner FROM agent_runs WHERE thread_id=? AND run_id=?",
                    (thread_id, run_id),
                ),
                (
                    f"SELECT expires_at > {self.NOW} FROM agent_thread_leases"
                    " WHERE thread_id=? AND run_id=? AND owner=?",
                    (thread_id, run_id, stored.owner),
                ),
                (
                    f"SELECT 1 FROM agent_replicas WHERE owner=? AND expires_at > {self.NOW}",
                    (stored.owner,),
                ),
            ),
            decide,
        )
        return adopted[0]

    async def orphans(self) -> list[StoredRun]:
        rows = await self._read(
            f"SELECT {COLUMNS} FROM agent_runs r WHERE (r.status='running' AND NOT EXISTS"
            " (SELECT 1 FROM agent_thread_leases l WHERE l.thread_id=r.thread_id"
            f" AND l.run_id=r.run_id AND l.owner=r.owner AND l.expires_at > {self.NOW}))"
            " OR (r.status='queued' AND NOT EXISTS (SELECT 1 FROM agent_replicas p"
            f" WHERE p.owner=r.owner AND p.expires_at > {self.NOW}))"
            " ORDER BY r.created_at, r.rowid",
            (),
        )
        return [stored_run(row) for row in rows]

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        count = await self._transaction(
            (
                (
                    "UPDATE agent_runs SET cancel_requested=1"
                    f" WHERE thread_id=? AND run_id=? AND {ACTIVE_SQL}",
                    (thread_id, run_id),
                ),
            )
        )
        return bool(count == 1)

    async def cancel_requests(self, owner: str) -> list[tuple[str, str]]:
        rows = await self._read(
            "SELECT thread_id, run_id FROM agent_runs"
            f" WHERE owner=? AND cancel_requested=1 AND {ACTIVE_SQL}",
            (owner,),
        )
        return [(str(thread_id), str(run_id)) for thread_id, run_id in rows]

    async def release(self, thread_id: str, run_id: str) -> None:
        await self._transaction(
            (
                (
                    "DELETE FROM agent_thread_leases WHERE thread_id=? AND run_id=?",
                    (thread_id, run_id),
                ),
            )
        )
