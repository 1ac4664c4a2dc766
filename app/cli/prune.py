"""`react-agent prune`: checkpoint retention for the database AGENT_DB names.

Prints what it removed (or, with --dry-run, would remove), then compacts the database
(VACUUM; not on a dry run); exit status 0, 1 when the database fails (one line on
stderr), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from typing import Final

import psycopg

from app.core.errors import StorageUnavailable
from app.core.storage.backends import open_storage
from app.core.storage.retention import DAY_S, PruneResult, prune
from app.settings import Settings, SqliteDb, get_settings
from tools.secrets import redactor_for

EXIT_ERROR: Final = 1
NO_DATABASE: Final = "no database at {path}"
FAILED: Final = "react-agent prune: {error}\n"
REPORT: Final = (
    "threads seen: {seen}\n"
    "threads skipped (a run in progress): {skipped}\n"
    "checkpoints {verb}: {checkpoints}\n"
    "threads {verb} (idle): {threads}\n"
)


async def _prune(settings: Settings, keep: int, idle_s: float | None, dry: bool) -> PruneResult:
    async with open_storage(settings) as storage:
        result = await prune(storage.saver, storage.runs, keep=keep, idle_s=idle_s, dry_run=dry)
        if not dry:  # the freed pages given back, the ones that held deleted rows rewritten
            await storage.runs.compact()
        return result


def run(args: argparse.Namespace) -> int:
    """`react-agent prune`: prune the database, print the counts."""
    settings = get_settings()
    keep = settings.agent_prune_keep if args.keep is None else args.keep
    idle_days = settings.agent_prune_idle_days if args.idle_days is None else args.idle_days
    db = settings.agent_db
    if isinstance(db, SqliteDb) and not db.path.exists():  # never create one only to prune it
        sys.stderr.write(FAILED.format(error=NO_DATABASE.format(path=db.path)))
        return EXIT_ERROR
    idle_s = None if idle_days is None else idle_days * DAY_S
    redact = redactor_for(settings)  # a server's message may quote the URL's password
    try:
        result = asyncio.run(_prune(settings, keep, idle_s, args.dry_run))
    except StorageUnavailable as exc:  # names the database, never its password
        sys.stderr.write(FAILED.format(error=redact(exc.message)))
        return EXIT_ERROR
    except (sqlite3.Error, psycopg.Error, OSError) as exc:  # the database failed: say why
        sys.stderr.write(FAILED.format(error=redact(f"{type(exc).__name__}: {exc}"[:300])))
        return EXIT_ERROR
    if args.dry_run:
        sys.stdout.write("dry run: nothing removed\n")
    sys.stdout.write(
        REPORT.format(
            seen=result.threads_seen,
            skipped=result.threads_skipped,
            verb="to remove" if args.dry_run else "removed",
            checkpoints=result.checkpoints_removed,
            threads=result.threads_removed,
        )
    )
    return 0
