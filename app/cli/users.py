"""`react-agent users`: the service's own users and keys, in the database AGENT_DB names.

`add NAME [--admin]` prints the new key once, alone on the last line (a script takes
`| tail -n1`); `rotate NAME` prints a new one the same way and revokes the user's others;
`revoke NAME|KEY_ID`; `list`; `usage [--days N]`. A refusal (a name taken, no such user)
is one line on stderr and exit status 1; the database failing too.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Final, TypeVar

import psycopg

from app.core.errors import ServiceError
from app.core.storage.backends import open_storage
from app.core.storage.runs import RunStore
from app.core.users import accounts
from app.settings import get_settings
from tools.secrets import redactor_for

EXIT_ERROR: Final = 1
FAILED: Final = "react-agent users: {error}\n"
NEW_KEY: Final = (
    "{what} {name}{admin}. Its key, shown this once (keep it: only its digest is stored):\n{key}\n"
)
Result = TypeVar("Result")


def run(args: argparse.Namespace) -> int:
    """`react-agent users ACTION`: do it, print what it did."""
    action: Callable[[RunStore], Awaitable[str]] = {
        "add": lambda store: _add(store, args.name, args.admin),
        "list": _list,
        "revoke": lambda store: _revoke(store, args.target),
        "rotate": lambda store: _rotate(store, args.name),
        "usage": lambda store: _usage(store, args.days),
    }[args.action]
    settings = get_settings()
    redact = redactor_for(settings)  # a server's message may quote the URL's password
    try:
        sys.stdout.write(asyncio.run(_on_store(action)))
    except ServiceError as exc:
        sys.stderr.write(FAILED.format(error=redact(exc.message)))
        return EXIT_ERROR
    except (sqlite3.Error, psycopg.Error, OSError) as exc:
        sys.stderr.write(FAILED.format(error=redact(f"{type(exc).__name__}: {exc}"[:300])))
        return EXIT_ERROR
    return 0


async def _on_store(action: Callable[[RunStore], Awaitable[Result]]) -> Result:
    async with open_storage(get_settings()) as storage:
        return await action(storage.runs)


async def _add(store: RunStore, name: str, admin: bool) -> str:
    made = await accounts.add_user(store, name, admin=admin)
    return NEW_KEY.format(what="Added", name=name, admin=" (admin)" if admin else "", key=made.key)


async def _rotate(store: RunStore, name: str) -> str:
    made = await accounts.rotate_key(store, name)
    return NEW_KEY.format(what="New key for", name=name, admin="", key=made.key)


async def _revoke(store: RunStore, target: str) -> str:
    count = await accounts.revoke(store, target)
    return f"revoked {count} key{'s' if count != 1 else ''} of {target}\n"


async def _list(store: RunStore) -> str:
    rows = await accounts.users(store)
    if not rows:
        return "no users yet: `react-agent users add NAME`\n"
    lines = [f"{'NAME':<24} {'ADMIN':<5} {'SINCE':<10} KEY ID"]
    for row in rows:
        since = datetime.fromtimestamp(row.created_at, UTC).strftime("%Y-%m-%d")
        key = row.key_id or "(revoked)"
        lines.append(f"{row.user_id:<24} {'yes' if row.admin else 'no':<5} {since:<10} {key}")
    return "\n".join(lines) + "\n"


async def _usage(store: RunStore, days: int) -> str:
    rows = await accounts.usage(store, days)
    if not rows:
        return f"no runs in the last {days} day{'s' if days != 1 else ''}\n"
    lines = [f"{'DAY':<10} {'USER':<32} {'RUNS':>6} {'TOKENS':>10}"]
    lines += [f"{r.day:<10} {r.user_id:<32} {r.runs:>6} {r.tokens:>10}" for r in rows]
    return "\n".join(lines) + "\n"
