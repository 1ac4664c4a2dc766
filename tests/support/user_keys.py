"""Users and their keys in a server's own database, for the clients' tests (the page, the
terminal): made the way `react-agent users add` makes them (`keys.new_key`, then the
store's `add_user`), revoked and rotated through the store as `users revoke` and `users
rotate` do.

The store rather than the command: these tests were written before the `users` commands
were on main; `react-agent users add NAME` (the key alone on its last line) can replace
`add_user` here one for one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from app.core.storage.backends import open_storage
from app.core.storage.runs import RunStore
from app.core.users import keys
from app.settings import Settings

T = TypeVar("T")


def _on_store(agent_db: str, step: Callable[[RunStore], Awaitable[T]]) -> T:
    async def run() -> T:
        async with open_storage(Settings(agent_db=agent_db)) as storage:
            return await step(storage.runs)

    # A thread of its own: Playwright's sync API keeps a loop marked running on this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def add_user(agent_db: str, name: str, *, admin: bool = False) -> str:
    """A new user of the database at `agent_db` (an AGENT_DB value); its key."""
    made = keys.new_key()

    async def add(store: RunStore) -> bool:
        return await store.add_user(
            name, admin=admin, key_id=made.key_id, digest=made.digest, now=time.time()
        )

    if not _on_store(agent_db, add):
        raise AssertionError(f"user {name!r} exists already")
    return made.key


def rotate(agent_db: str, name: str) -> str:
    """Revoke the user's keys and give it a new one; the new key."""
    made = keys.new_key()

    async def give(store: RunStore) -> bool:
        return await store.rotate_key(name, key_id=made.key_id, digest=made.digest, now=time.time())

    if not _on_store(agent_db, give):
        raise AssertionError(f"no user {name!r}")
    return made.key
