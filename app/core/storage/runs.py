"""Runs as records: what a run store keeps and the contract every backend follows.

A run is `(threadId, runId)` with its graph, status and times; its event log holds
every AG-UI event it sent, as the JSON a client received, under its sequence number
(1, 2, 3, ...); the thread list keeps one row per thread with runs (graph, title, who
set the title, where the thread was started, latest activity). They live in the
checkpoints' database, in the tables agent_runs, agent_run_events and agent_threads,
plus agent_thread_leases (which run of which process holds a thread, until when) and
agent_replicas (until when each process is known alive: its queued runs are its until
then). agent_messages holds each thread's messages older than its graph's working state
(`graphs/transcript.py`), in the checkpointer's own serialization, in the order they
were kept.

`RunStore` is the contract; `app.core.storage.sql` writes its queries once, and
`app.core.storage.sqlite.runs` / `app.core.storage.postgres.runs` run them on each backend.
`app.core.storage.backends` picks the backend from AGENT_DB. Times are epoch seconds (floats).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Protocol

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

from app.core.errors import ErrorCode, run_error_code

if TYPE_CHECKING:
    from app.core.storage.users import KeyRow, UsageRow, UserRow

RunStatus = Literal["queued", "running", "interrupted", "success", "error", "cancelled"]
# Where a thread was started: by the terminal (`react-agent chat`, in-process or with
# --server), or through the HTTP API by anything else (the web page, a script).
ThreadOrigin = Literal["api", "terminal"]
# Who set a thread's title: its first user message (the fallback, until the model titles
# the thread after its first exchange), the model, or the user (a rename: never replaced).
TitleBy = Literal["message", "model", "user"]
# Who owns what was made before users existed, and the user AGENT_API_KEY signs in as.
ADMIN_ID = "admin"
ACTIVE: frozenset[RunStatus] = frozenset({"queued", "running"})
DEFAULT_TITLE = "新对话"
TITLE_CHARS = 40
ELLIPSIS = "…"


class KeptMessage(NamedTuple):
    """One message of a thread's transcript: its id, and its checkpointer serialization."""

    message_id: str
    type: str
    data: bytes


class RunError(BaseModel):
    """Why a run ended `error` (or `cancelled`): its RUN_ERROR code and message.

    A stored code this version does not know (a newer replica's) reads as `run_failed`.
    """

    code: Annotated[ErrorCode, BeforeValidator(run_error_code)]
    message: str


class RunRecord(BaseModel):
    """`GET /api/threads/{threadId}/runs/{runId}`: one run and how it stands."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    run_id: str
    thread_id: str
    graph: str
    status: RunStatus
    created_at: float = Field(description="ISO 8601, UTC")
    finished_at: float | None = Field(default=None, description="ISO 8601, UTC")
    error: RunError | None = None

    @field_serializer("created_at", "finished_at")
    def _iso(self, value: float | None) -> str | None:
        return None if value is None else datetime.fromtimestamp(value, UTC).isoformat()

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class ThreadSummary(BaseModel):
    """One entry of `GET /api/threads`: a thread, its title and how its latest run stands."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    thread_id: str
    graph_id: str
    title: str
    updated_at: float = Field(description="ISO 8601, UTC: the thread's latest run start or end")
    status: RunStatus = Field(description="the status of the thread's latest run")
    origin: ThreadOrigin = Field(
        description="where the thread was started: `terminal` (react-agent chat, in-process "
        "or with --server) or `api` (anything else: the web page, a script)"
    )
    owner: str = Field(ADMIN_ID, description="the user who started the thread")

    @field_serializer("updated_at")
    def _iso(self, value: float) -> str:
        return datetime.fromtimestamp(value, UTC).isoformat()


def storable(text: str) -> str:
    """`text` as every backend stores it: NUL, which PostgreSQL's text refuses, as U+FFFD."""
    return text.replace("\x00", "\ufffd")


# Characters that reorder the text around them: in a list of titles, one thread's title
# could make another's read backwards or pass for something else.
_BIDI_CONTROLS = dict.fromkeys(
    map(ord, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
)


def plain_title(text: str) -> str:
    """`text` as a title is stored: `storable`, without bidirectional controls."""
    return storable(text.translate(_BIDI_CONTROLS))


def default_title(messages: Iterable[Any]) -> str:
    """A thread's title before any rename: its first user message, whitespace collapsed and
    cut to TITLE_CHARS characters (then `…`), a `plain_title`; DEFAULT_TITLE when it has no
    user text.

    `messages` are AG-UI messages as JSON (a run request's `messages`).
    """
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text") or "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        text = short_title(str(content or ""))
        if text:
            return text
    return DEFAULT_TITLE


def short_title(text: str) -> str:
    """`text` as a list's title: a `plain_title`, whitespace collapsed, cut to TITLE_CHARS
    characters (then `…`); "" when nothing is left."""
    text = " ".join(plain_title(text).split())
    return text[:TITLE_CHARS] + ELLIPSIS if len(text) > TITLE_CHARS else text


def request_messages(request: str) -> list[Any]:
    """The `messages` of a run request stored as JSON (none when it has none)."""
    try:
        messages = json.loads(request).get("messages")
    except (ValueError, AttributeError):  # not JSON, or not an object
        return []
    return messages if isinstance(messages, list) else []


@dataclass(frozen=True, slots=True)
class RunEnd:
    """How a run ended, for its record; with `owner`, recorded only while `owner` holds
    the run (a process that lost it to a takeover writes no end)."""

    thread_id: str
    run_id: str
    status: RunStatus
    finished_at: float
    error: RunError | None
    owner: str | None = None


MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
# A new run's state is read before its admission, and a run of the thread that ends
# (in another process) in between leaves it stale. Ends this long before the new run's
# creation count too: the two times come from the clocks of different machines.
ENDED_WHILE_CHECKED_S = 5.0


@dataclass(frozen=True, slots=True)
class Admission:
    """What `RunStore.admit` decided for a new run.

    `outcome`: `created` (with `status` `running`, the thread leased to it, or `queued`
    behind `ahead`), `exists` (the thread has used the run id), `busy` (`reject` and
    `ahead` are active), `full` (`max_queued` runs already wait behind them), `foreign`
    (another user's thread) or `limited` (the user has `max_runs` runs active already).
    `ahead`: the thread's active run ids then, oldest first;
    `rollback_from`: the running one a `rollback` undoes. `stale`: a `running` run
    whose thread saw another run end since (or up to `ENDED_WHILE_CHECKED_S` before)
    it was created, so the state it was checked against may predate that run's end.
    """

    outcome: Literal["created", "exists", "busy", "full", "foreign", "limited"]
    status: RunStatus | None
    ahead: tuple[str, ...]
    rollback_from: str | None = None
    stale: bool = False


# Told that a run of thread `thread_id` ended under `owner`, or (None, None) that some
# ends may have gone unheard (see `RunStore.hear_ends`).
HeardEnd = Callable[[str | None, str | None], None]
# Told that a run of thread `thread_id` was admitted, or (None) that some admissions may
# have gone unheard (see `RunStore.hear_ends`).
HeardAdmission = Callable[[str | None], None]


class StoredRun(BaseModel):
    """A record plus what the service needs to resume it: owner, request, start checkpoint,
    the run it rolls back (`rollback` multitask strategy) and whether it was asked to stop."""

    record: RunRecord
    owner: str
    request: dict[str, Any]
    checkpoint_before: str | None
    rollback_from: str | None = None
    cancel_requested: bool = False


def threads_from_runs(
    rows: Iterable[Sequence[Any]],
) -> list[tuple[str, str, str, float, float, str]]:
    """The thread list's rows rebuilt from run rows (a database from before the list).

    `rows` are `(thread_id, graph, request, created_at, finished_at or created_at)` in
    insertion order; each thread gets the latest run's graph, the first run's title, the
    first start, the latest start or end, and `api` as where it was started (INSERT_THREAD's
    columns; who set the title: its first message, the columns' default).
    """
    threads: dict[str, tuple[str, str, str, float, float, str]] = {}
    for thread_id, graph, request, created, active in rows:  # each thread's oldest first
        first = threads.get(thread_id)
        if first is None:
            title = default_title(request_messages(request))
            threads[thread_id] = (thread_id, graph, title, created, active, "api")
        else:
            latest = max(first[4], active)
            threads[thread_id] = (thread_id, graph, first[2], first[3], latest, "api")
    return list(threads.values())


def renamed(rows: Iterable[Sequence[Any]]) -> list[tuple[str]]:
    """The threads whose title their user gave, from `(thread_id, title, first run's
    request)` rows of a database from before `title_by`: a title that is not the one the
    first message makes (a thread without runs keeps its own)."""
    return [
        (thread_id,)
        for thread_id, title, request in rows
        if request is not None and title != default_title(request_messages(request))
    ]


class RunStore(Protocol):
    """The run table, the event logs, the thread list and the thread leases of a database.

    Whatever the backend: each call is one trip to the database (one hop to the SQLite
    connection's thread, one pooled PostgreSQL connection), each write call is one
    transaction, and a write whose caller is cancelled is completed all the same. The
    event log is on the hot path: a trip per statement would cost more than the
    statements.
    """

    @property
    def recheck_s(self) -> float:
        """How often a run waiting for its thread re-checks when no end was heard: what
        `hear_ends` cannot tell (SQLite: another process's end) waits this long at most."""

    async def probe(self, timeout_s: float) -> None:
        """Raise unless the database answers, and could take a write, within `timeout_s`.

        Not behind the store's own work: SQLite probes on a connection of its own,
        PostgreSQL on a pooled one.
        """

    async def create(self, stored: StoredRun) -> bool:
        """Insert a new run; False when the thread already has this run id.

        The thread's row is written in the same transaction: created by its first run
        (titled from that run's first user message), touched by every later one.
        """

    async def started(
        self, thread_id: str, run_id: str, *, owner: str, checkpoint_before: str | None
    ) -> None:
        """The run is `running` under `owner`, from the checkpoint it found."""

    async def get(self, thread_id: str, run_id: str) -> StoredRun | None:
        """One run, or None."""

    async def of_thread(self, thread_id: str) -> list[RunRecord]:
        """The thread's runs, newest first."""

    async def active(self) -> list[StoredRun]:
        """Every run left `queued` or `running`, oldest first."""

    async def write(
        self, events: Iterable[tuple[str, str, int, str]], ends: Iterable[RunEnd] = ()
    ) -> None:
        """Add `(thread_id, run_id, seq, data)` events to the log (an event already there
        is kept) and record run ends, in one transaction."""

    async def events(self, thread_id: str, run_id: str, after: int = 0) -> list[tuple[int, str]]:
        """The run's logged events after sequence number `after`, in order."""

    async def expire(self, finished_before: float) -> None:
        """Drop the event logs of runs that finished before `finished_before`."""

    async def forget_thread(self, thread_id: str) -> None:
        """Drop the thread's runs, their logs, its list entry, its lease, its kept
        messages and its creation record."""

    async def create_thread(
        self,
        thread_id: str,
        metadata: str,
        created_at: float,
        *,
        replace: bool = False,
        user_id: str = ADMIN_ID,
    ) -> bool:
        """Record a thread created before its first run (LangGraph's `POST /threads`),
        owned by `user_id`, with its metadata as JSON; False when it was recorded already
        (with `replace`, its metadata is then replaced)."""

    async def created_thread(self, thread_id: str) -> tuple[str, float] | None:
        """(metadata JSON, created_at) of a thread `create_thread` recorded, or None."""

    async def created_threads(
        self, user_id: str | None, limit: int
    ) -> list[tuple[str, str, float, bool]]:
        """(thread_id, metadata JSON, created_at, whether it has runs) of the threads
        `create_thread` recorded (of `user_id`, or everyone's), newest first, at most `limit`."""

    async def delete_run(self, thread_id: str, run_id: str) -> bool:
        """Drop an ended run and its log; False when there is none, or it is active."""

    async def copy_thread(self, source: str, target: str, *, user_id: str, now: float) -> None:
        """Give `target` (a thread id never used) `source`'s rows, owned by `user_id`: its
        list entry, its ended runs and their logs, its kept messages, its creation record
        (the metadata; one with none when `source` had none), all in one transaction."""

    async def keep_messages(self, thread_id: str, messages: Sequence[KeptMessage]) -> None:
        """Append `messages` to the thread's kept messages, skipping ids it holds already."""

    async def kept_messages(self, thread_id: str) -> list[KeptMessage]:
        """The thread's kept messages, in the order they were kept."""

    async def kept_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """Which of `ids` the thread's kept messages hold."""

    async def scrub(self) -> None:
        """After deletions (a thread's, a prune's): make what they deleted leave the
        database's files where that is cheap. SQLite: its WAL copied into the file and
        emptied (the deleted rows were zeroed there); PostgreSQL: nothing (see `compact`)."""

    async def compact(self) -> None:
        """Give the space of deleted rows back and rewrite the pages that held them
        (`react-agent prune`). SQLite: VACUUM, then the WAL emptied; PostgreSQL: VACUUM
        of the checkpoint and run tables (their dead rows made reusable, not zeroed)."""

    async def threads(
        self, graph: str | None, limit: int, user_id: str | None = None
    ) -> list[ThreadSummary]:
        """The threads (of `graph`, or all; of `user_id`, or everyone's), newest activity
        first, at most `limit`."""

    async def thread_owner(self, thread_id: str) -> str | None:
        """Who owns the thread (its first run's user); None when it has no runs."""

    async def rename_thread(self, thread_id: str, title: str) -> ThreadSummary | None:
        """Give the thread `title` (kept across later runs, never replaced by the model's);
        None when it is unknown."""

    async def title_due(self, thread_id: str, run_id: str) -> bool:
        """Whether the model should title the thread now that `run_id` ended `success`:
        it is the thread's first run to do so, and the title is still its first message's."""

    async def set_model_title(self, thread_id: str, title: str) -> bool:
        """Give the thread the model's `title` unless its title is no longer the first
        message's (the user renamed it meanwhile, say); whether it was given."""

    # --- users (`app.core.storage.users.SqlUserStore`) ----------------------------------

    async def add_user(
        self, user_id: str, *, admin: bool, key_id: str, digest: str, now: float
    ) -> bool:
        """A new user with its first key; False (nothing written) when the name is taken."""

    async def rotate_key(self, user_id: str, *, key_id: str, digest: str, now: float) -> bool:
        """Revoke the user's open keys and give it this one; False when there is no such user."""

    async def revoke(self, name_or_key_id: str, *, now: float) -> int:
        """Revoke a user's open keys (by its name) or one key (by its id); how many."""

    async def key(self, key_id: str) -> KeyRow | None:
        """The key with this id, revoked or not; None when there is none."""

    async def is_admin(self, user_id: str) -> bool:
        """Whether `user_id` is a user of a key marked admin."""

    async def open_keys(self) -> int:
        """How many keys are not revoked."""

    async def users(self) -> list[UserRow]:
        """Every user of a key, by name."""

    async def usage(self, since_day: str) -> list[UsageRow]:
        """Runs and tokens per user per UTC day (`YYYY-MM-DD`), from `since_day` on."""

    async def tokens_on(self, user_id: str, day: str) -> int:
        """The model tokens `user_id`'s runs used on `day`."""

    async def record_usage(self, thread_id: str, day: str, tokens: int) -> None:
        """One run of `thread_id` ended on `day` having used `tokens`: its owner's count."""

    async def count_hit(self, key: str, expiry_s: float, amount: int) -> int:
        """Add `amount` to the request counter `key` (a new window when it expired)."""

    async def counter(self, key: str) -> tuple[int, float]:
        """The counter `key` and when its window ends; (0, 0) when none runs."""

    async def clear_counter(self, key: str | None) -> int:
        """Forget the counter `key` (None: every counter)."""

    # --- admission and hand-over across processes ------------------------------------

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
        """Record a new run unless the thread refuses it, atomically across processes;
        a thread it starts is recorded as started from `origin`, owned by `user_id`.

        Unless `any_owner` (an admin), another user's thread is `foreign`; with `max_runs`,
        a run that would start at once while its user has that many runs active is
        `limited` (one queued behind its thread's active run is not: it adds nothing
        running). Counted in the thread's transaction: two threads' admissions at the
        same instant may both pass.

        The thread's active runs decide: none -> `running` and the thread leased to it
        for `ttl_s`; some -> `busy` for `reject`, else `queued` behind them (`interrupt`
        and `rollback` ask them to stop; `rollback` notes the running one it undoes).
        `stored.record.status` is ignored; `created_at` tells whether it is `stale`.
        """

    async def claim_turn(self, thread_id: str, run_id: str, owner: str, ttl_s: float) -> bool:
        """Make the queued run `running` under `owner`, the thread leased to it: True when
        it is the thread's oldest active run and none is running, else False."""

    async def claim_head(
        self, thread_id: str, run_ids: Sequence[str], owner: str, ttl_s: float
    ) -> str | None:
        """`claim_turn` for whichever of `run_ids` is the thread's oldest active run: its
        id when it was queued and none was running (now it runs under `owner`), else None."""

    def hear_ends(
        self, heard: HeardEnd, *, admitted: HeardAdmission | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Until the block ends, call `heard(thread_id, owner)` soon after a run's end is
        recorded, in any process, and `heard(None, None)` when ends may have gone unheard
        (a lost connection, back); likewise `admitted(thread_id)` after a run's admission,
        `admitted(None)`. Best effort, so a waiter still re-checks every `recheck_s`.
        PostgreSQL: LISTEN/NOTIFY; SQLite: nothing is heard."""

    async def adopt(self, stored: StoredRun, owner: str, ttl_s: float, *, force: bool) -> bool:
        """Take over an active run whose process is gone: a running one whose lease has
        expired (its lease then `owner`'s), a queued one whose owner stopped renewing.
        `force` (its owner is known dead): whatever the lease says. False when the run
        has ended or is held."""

    async def orphans(self) -> list[StoredRun]:
        """The active runs no live process holds (see `adopt`), oldest first."""

    async def request_cancel(self, thread_id: str, run_id: str) -> bool:
        """Ask the process that holds the run to stop it; False when it is not active."""

    async def cancel_requests(self, owner: str) -> list[tuple[str, str]]:
        """(thread_id, run_id) of `owner`'s active runs that were asked to stop."""

    # --- thread leases: which process executes a thread's run

    async def renew(self, owner: str, ttl_s: float) -> list[str]:
        """Extend every lease `owner` holds to `ttl_s` from now, and `owner`'s own
        heartbeat (its queued runs are its while it renews); return the leased thread
        ids (a lease that another owner took over after it expired is not among them)."""

    async def release(self, thread_id: str, run_id: str) -> None:
        """End the thread's lease if `run_id` holds it."""
