"""`python -m bench.delete_cost`: the deletes it times really delete, on every copy."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from bench.delete_cost import VARIANTS, measure


def test_each_copy_loses_the_deleted_threads_and_keeps_the_others_and_every_variant_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(measure(threads=3, deletes=2, workdir=tmp_path))

    out = capsys.readouterr().out
    for name in VARIANTS:
        assert f"| {name} | " in out
        with closing(sqlite3.connect(tmp_path / f"{name}.sqlite")) as conn:
            left = conn.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
            events = conn.execute("SELECT DISTINCT thread_id FROM agent_run_events").fetchall()
            (free,) = conn.execute("PRAGMA freelist_count").fetchone()
        assert left == events == [("thread-0002",)]
        assert free == 0  # the compaction ran
