"""Managing the service's own users and keys (`react-agent users ...`): one function per
operation, each one trip to the database."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

from app.core.errors import Conflict, Invalid, NotFound
from app.core.storage.runs import ADMIN_ID, RunStore
from app.core.storage.users import UsageRow, UserRow
from app.core.users.fair_use import day_of
from app.core.users.keys import NewKey, new_key

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
BAD_NAME = (
    "invalid user name {name!r}: use 1-64 lower-case letters, digits or ._- characters, "
    "starting with a letter or digit"
)
RESERVED = f"{ADMIN_ID!r} is AGENT_API_KEY's user: choose another name"
NAME_TAKEN = (
    "there is a user {name!r} already: `react-agent users rotate {name}` gives it a new key"
)
NO_USER = "no user {name!r}: `react-agent users list` shows them"
NOTHING_REVOKED = "no open key of a user or with an id {name!r}: `react-agent users list`"


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise Invalid("invalid_request", BAD_NAME.format(name=name[:80]))
    if name == ADMIN_ID:
        raise Invalid("invalid_request", RESERVED)
    return name


async def add_user(store: RunStore, name: str, *, admin: bool) -> NewKey:
    """A new user and its key (the key is shown once: only its digest is kept)."""
    made = new_key()
    added = await store.add_user(
        check_name(name), admin=admin, key_id=made.key_id, digest=made.digest, now=time.time()
    )
    if not added:
        raise Conflict("user_exists", NAME_TAKEN.format(name=name))
    return made


async def rotate_key(store: RunStore, name: str) -> NewKey:
    """A new key for `name`, its earlier keys revoked."""
    made = new_key()
    if not await store.rotate_key(name, key_id=made.key_id, digest=made.digest, now=time.time()):
        raise NotFound("unknown_user", NO_USER.format(name=name[:80]))
    return made


async def revoke(store: RunStore, name_or_key_id: str) -> int:
    """Revoke a user's keys (by name) or one key (by id); how many were open."""
    count = await store.revoke(name_or_key_id, now=time.time())
    if count == 0:
        raise NotFound("unknown_user", NOTHING_REVOKED.format(name=name_or_key_id[:80]))
    return count


async def users(store: RunStore) -> list[UserRow]:
    return await store.users()


async def usage(store: RunStore, days: int) -> list[UsageRow]:
    """Runs and tokens per user per UTC day, the last `days` days (today included)."""
    since = day_of(datetime.now(UTC) - timedelta(days=days - 1))
    return await store.usage(since)
