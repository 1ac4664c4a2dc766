"""Users as records: who they are, their keys, what they used, and the request counters.

In the checkpoints' database beside the runs (both backends, one schema text: its types
mean the same to SQLite and PostgreSQL):

- agent_users: one row a user of a key (`react-agent users add`), admin or not;
- agent_keys: each key's id (its public part) and the SHA-256 digest of the whole key,
  never the key; a revoked key keeps its row, with when;
- agent_usage: runs and model tokens per user per UTC day, written as each run ends;
- agent_rate_limits: the fixed-window request counters (`limits`' storage contract), one
  row a user and window, so that every replica counts the same requests;
- agent_threads.user_id: the thread's owner (its creator); threads from before users
  belong to the admin (`app.core.storage.runs.ADMIN_ID`, the column's default).

`SqlUserStore` writes the queries once over the backend's two primitives (`_transaction`,
`_read`, as `app.core.storage.sql.SqlRunStore`); each backend's store is both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from app.core.storage.sql import Step, owner_query

USERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_users (
    user_id TEXT PRIMARY KEY,
    admin INTEGER NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_keys (
    key_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS agent_keys_user ON agent_keys (user_id);
CREATE TABLE IF NOT EXISTS agent_usage (
    user_id TEXT NOT NULL,
    day TEXT NOT NULL,
    runs BIGINT NOT NULL DEFAULT 0,
    tokens BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day)
);
CREATE TABLE IF NOT EXISTS agent_rate_limits (
    key TEXT PRIMARY KEY,
    hits BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
"""
USERS_TABLES = ("agent_users", "agent_keys", "agent_usage", "agent_rate_limits")
# Made once agent_threads has its user_id column (added to an older database on start).
THREADS_BY_USER = (
    "CREATE INDEX IF NOT EXISTS agent_threads_user ON agent_threads (user_id, updated_at)"
)


class KeyRow(NamedTuple):
    """A key as stored: its id, owner, digest, whether that owner is an admin, and when
    it was revoked (None: it opens)."""

    key_id: str
    user_id: str
    digest: str
    admin: bool
    revoked_at: float | None


class UserRow(NamedTuple):
    """`react-agent users list`: a user, whether an admin, since when, its open key's id."""

    user_id: str
    admin: bool
    created_at: float
    key_id: str | None


class UsageRow(NamedTuple):
    """`react-agent users usage`: one user's runs and model tokens on one UTC day."""

    user_id: str
    day: str
    runs: int
    tokens: int


class SqlUserStore(ABC):
    """The users' queries; a backend provides the primitives (see `SqlRunStore`)."""

    NOW: ClassVar[str]

    @abstractmethod
    async def _transaction(self, steps: Sequence[Step], *, fetch: bool = False) -> Any: ...

    @abstractmethod
    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[Sequence[Any]]: ...

    async def add_user(
        self, user_id: str, *, admin: bool, key_id: str, digest: str, now: float
    ) -> bool:
        """A new user with its first key; False (nothing written) when the name is taken."""
        rows = await self._transaction(
            (
                (
                    "INSERT INTO agent_users (user_id, admin, created_at) VALUES (?,?,?)"
                    " ON CONFLICT (user_id) DO NOTHING RETURNING user_id",
                    (user_id, int(admin), now),
                ),
            ),
            fetch=True,
        )
        if not rows:
            return False
        await self._transaction((_insert_key(key_id, user_id, digest, now),))
        return True

    async def rotate_key(self, user_id: str, *, key_id: str, digest: str, now: float) -> bool:
        """Revoke the user's open keys and give it this one; False when there is no such user."""
        if not await self._read("SELECT 1 FROM agent_users WHERE user_id=?", (user_id,)):
            return False
        await self._transaction(
            (
                (
                    "UPDATE agent_keys SET revoked_at=? WHERE user_id=? AND revoked_at IS NULL",
                    (now, user_id),
                ),
                _insert_key(key_id, user_id, digest, now),
            )
        )
        return True

    async def revoke(self, name_or_key_id: str, *, now: float) -> int:
        """Revoke a user's open keys (by its name) or one key (by its id); how many."""
        count = await self._transaction(
            (
                (
                    "UPDATE agent_keys SET revoked_at=? WHERE revoked_at IS NULL"
                    " AND (user_id=? OR key_id=?)",
                    (now, name_or_key_id, name_or_key_id),
                ),
            )
        )
        return int(count)

    async def key(self, key_id: str) -> KeyRow | None:
        rows = await self._read(
            "SELECT k.key_id, k.user_id, k.digest, u.admin, k.revoked_at FROM agent_keys k"
            " JOIN agent_users u ON u.user_id = k.user_id WHERE k.key_id=?",
            (key_id,),
        )
        if not rows:
            return None
        key_id, user_id, digest, admin, revoked_at = rows[0]
        return KeyRow(key_id, user_id, digest, bool(admin), revoked_at)

    async def is_admin(self, user_id: str) -> bool:
        rows = await self._read("SELECT admin FROM agent_users WHERE user_id=?", (user_id,))
        return bool(rows and rows[0][0])

    async def open_keys(self) -> int:
        rows = await self._read("SELECT count(*) FROM agent_keys WHERE revoked_at IS NULL", ())
        return int(rows[0][0])

    async def users(self) -> list[UserRow]:
        rows = await self._read(
            "SELECT u.user_id, u.admin, u.created_at, (SELECT k.key_id FROM agent_keys k"
            " WHERE k.user_id = u.user_id AND k.revoked_at IS NULL ORDER BY k.created_at DESC"
            " LIMIT 1) FROM agent_users u ORDER BY u.user_id",
            (),
        )
        return [UserRow(user_id, bool(admin), at, key) for user_id, admin, at, key in rows]

    async def usage(self, since_day: str) -> list[UsageRow]:
        rows = await self._read(
            "SELECT user_id, day, runs, tokens FROM agent_usage WHERE day >= ?"
            " ORDER BY day DESC, user_id",
            (since_day,),
        )
        return [UsageRow(str(u), str(d), int(r), int(t)) for u, d, r, t in rows]

    async def tokens_on(self, user_id: str, day: str) -> int:
        rows = await self._read(
            "SELECT tokens FROM agent_usage WHERE user_id=? AND day=?", (user_id, day)
        )
        return int(rows[0][0]) if rows else 0

    async def record_usage(self, thread_id: str, day: str, tokens: int) -> None:
        """One run of `thread_id` ended on `day` having used `tokens`: its owner's count."""
        await self._transaction(
            (
                (
                    "INSERT INTO agent_usage (user_id, day, runs, tokens)"
                    " SELECT user_id, ?, 1, ? FROM agent_threads WHERE thread_id=?"
                    " ON CONFLICT (user_id, day) DO UPDATE SET"
                    " runs = agent_usage.runs + 1, tokens = agent_usage.tokens + excluded.tokens",
                    (day, int(tokens), thread_id),
                ),
            )
        )

    async def thread_owner(self, thread_id: str) -> str | None:
        rows = await self._read(*owner_query(thread_id))
        return str(rows[0][0]) if rows else None

    # --- `limits`' storage (app.core.users.fair_use.DatabaseCounters) -------------------

    async def count_hit(self, key: str, expiry_s: float, amount: int) -> int:
        """Add `amount` to the counter `key` (a new window when it expired); the count."""
        rows = await self._transaction(
            (
                (
                    "INSERT INTO agent_rate_limits (key, hits, expires_at)"
                    f" VALUES (?, ?, {self.NOW} + ?) ON CONFLICT (key) DO UPDATE SET"
                    f" hits = CASE WHEN agent_rate_limits.expires_at <= {self.NOW}"
                    " THEN excluded.hits ELSE agent_rate_limits.hits + excluded.hits END,"
                    f" expires_at = CASE WHEN agent_rate_limits.expires_at <= {self.NOW}"
                    " THEN excluded.expires_at ELSE agent_rate_limits.expires_at END"
                    " RETURNING hits",
                    (key, amount, float(expiry_s)),
                ),
            ),
            fetch=True,
        )
        return int(rows[0][0])

    async def counter(self, key: str) -> tuple[int, float]:
        """The counter `key` and when its window ends (epoch seconds); (0, 0) when none runs."""
        rows = await self._read(
            "SELECT hits, expires_at FROM agent_rate_limits"
            f" WHERE key=? AND expires_at > {self.NOW}",
            (key,),
        )
        return (int(rows[0][0]), float(rows[0][1])) if rows else (0, 0.0)

    async def clear_counter(self, key: str | None) -> int:
        """Forget the counter `key` (None: every counter, and the expired ones)."""
        if key is None:
            return int(await self._transaction((("DELETE FROM agent_rate_limits", ()),)))
        return int(
            await self._transaction((("DELETE FROM agent_rate_limits WHERE key=?", (key,)),))
        )


def _insert_key(key_id: str, user_id: str, digest: str, now: float) -> Step:
    return (
        "INSERT INTO agent_keys (key_id, user_id, digest, created_at) VALUES (?,?,?,?)",
        (key_id, user_id, digest, now),
    )
