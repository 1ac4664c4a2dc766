"""What each user may use: runs at once, requests a minute, model tokens a day.

Counted in the database, so every replica agrees. The request rate is `limits`' fixed
window (its arithmetic, its `RateLimitItem`s) over `DatabaseCounters`, a `limits` storage
on the service's own database: `limits` ships Redis, Memcached and MongoDB storages, and
the service must not need one more server. Runs at once are counted in the run's
admission (`RunStore.admit`'s `max_runs`); tokens are the model's own `usage`, added to
the user's day when each run ends (`RunStore.record_usage`). Admins are never limited.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.messages import AIMessage
from limits import RateLimitItemPerMinute
from limits.aio.storage import Storage
from limits.aio.strategies import FixedWindowRateLimiter

from app.core.errors import StorageUnavailable, TooMany
from app.core.storage.runs import RunStore
from app.core.users.identity import Caller

RATE_LIMITED = "more than {limit} requests in a minute (AGENT_USER_RPM): retry in {seconds} s"
QUOTA_EXCEEDED = (
    "today's model tokens are used up ({used} of {quota}, AGENT_USER_TOKENS_PER_DAY): "
    "the quota resets at {resets} UTC"
)
TOO_MANY_RUNS = (
    "{limit} of your runs are already queued or running (AGENT_USER_MAX_RUNS): wait for "
    "one to end, or send this one with the `enqueue` strategy"
)


class DatabaseCounters(Storage):
    """`limits`' async storage on the run store's `agent_rate_limits` table."""

    STORAGE_SCHEME: list[str] | None = ["react-agent"]  # noqa: RUF012 (limits reads it here)

    def __init__(self, store: RunStore) -> None:
        super().__init__()
        self._store = store

    @property
    def base_exceptions(self) -> type[Exception]:
        return StorageUnavailable

    async def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        return await self._store.count_hit(key, expiry, amount)

    async def get(self, key: str) -> int:
        return (await self._store.counter(key))[0]

    async def get_expiry(self, key: str) -> float:
        return (await self._store.counter(key))[1] or time.time()

    async def check(self) -> bool:
        return True

    async def reset(self) -> int | None:
        return await self._store.clear_counter(None)

    async def clear(self, key: str) -> None:
        await self._store.clear_counter(key)


class FairUse:
    """The per-user limits (AGENT_USER_RPM, AGENT_USER_MAX_RUNS, AGENT_USER_TOKENS_PER_DAY)."""

    def __init__(
        self,
        store: RunStore,
        *,
        rpm: int | None,
        max_runs: int | None,
        tokens_per_day: int | None,
    ) -> None:
        self._store = store
        self._limiter = FixedWindowRateLimiter(DatabaseCounters(store))
        self._rate = RateLimitItemPerMinute(rpm, namespace="rpm") if rpm else None
        self._max_runs = max_runs
        self._quota = tokens_per_day

    async def request(self, caller: Caller) -> None:
        """Count one request; TooMany (`rate_limited`, with Retry-After) beyond the rate."""
        rate = self._rate
        if rate is None or not caller.limited:
            return
        if await self._limiter.hit(rate, caller.user_id):
            return
        stats = await self._limiter.get_window_stats(rate, caller.user_id)
        seconds = max(1, math.ceil(stats.reset_time - time.time()))
        raise TooMany(
            "rate_limited",
            RATE_LIMITED.format(limit=rate.amount, seconds=seconds),
            headers={"Retry-After": str(seconds)},
        )

    def max_runs(self, caller: Caller) -> int | None:
        """How many runs `caller` may have active at once (None: no limit)."""
        return self._max_runs if caller.limited else None

    async def before_run(self, caller: Caller) -> None:
        """TooMany (`quota_exceeded`, naming when it resets) when today's tokens are used up."""
        quota = self._quota
        if quota is None or not caller.limited:
            return
        now = datetime.now(UTC)
        used = await self._store.tokens_on(caller.user_id, day_of(now))
        if used < quota:
            return
        tomorrow = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        raise TooMany(
            "quota_exceeded",
            QUOTA_EXCEEDED.format(used=used, quota=quota, resets=tomorrow.isoformat()),
            headers={"Retry-After": str(math.ceil((tomorrow - now).total_seconds()))},
        )


def too_many_runs(limit: int) -> TooMany:
    return TooMany("too_many_runs", TOO_MANY_RUNS.format(limit=limit))


def day_of(moment: datetime | None = None) -> str:
    """The UTC day usage is counted under, `YYYY-MM-DD`."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%d")


class TokenCount:
    """The model tokens one run used: the `usage` on each reply its agent node made."""

    def __init__(self, then: Callable[[str, Any], None] | None = None) -> None:
        self.tokens = 0
        self._then = then

    def observe(self, mode: str, data: Any) -> None:
        """An item of the graph's stream (`stream_run`'s `observe`), passed on to `then`."""
        if mode == "updates" and isinstance(data, Mapping):
            for update in data.values():
                messages = update.get("messages") if isinstance(update, Mapping) else None
                for message in messages or ():
                    if isinstance(message, AIMessage) and message.usage_metadata:
                        self.tokens += int(message.usage_metadata.get("total_tokens") or 0)
        if self._then is not None:
            self._then(mode, data)
