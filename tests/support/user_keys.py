"""Users and their keys in a server's own database, for the clients' tests (the page, the
terminal): made, rotated and revoked by `react-agent users ...` run as a process on the
server's AGENT_DB, as an operator does; each returns the key the command printed alone on
its last line.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.env import PROJECT_VARS


def users(agent_db: str, *args: str) -> str:
    """`react-agent users ARGS` on the database at `agent_db`; its output."""
    env = {k: v for k, v in os.environ.items() if k not in PROJECT_VARS}
    done = subprocess.run(
        [sys.executable, "-m", "app.main", "users", *args],
        env={**env, "AGENT_DB": agent_db},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise AssertionError(f"react-agent users {' '.join(args)}: {done.stderr}")
    return done.stdout


def add_user(agent_db: str, name: str, *, admin: bool = False) -> str:
    """A new user of the database at `agent_db` (an AGENT_DB value); its key."""
    flags = ("--admin",) if admin else ()
    return users(agent_db, "add", name, *flags).strip().splitlines()[-1]


def rotate(agent_db: str, name: str) -> str:
    """Revoke the user's keys and give it a new one; the new key."""
    return users(agent_db, "rotate", name).strip().splitlines()[-1]
