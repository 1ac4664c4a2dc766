"""Fixtures of the graph tests: a SQLite saver on the test's own file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from app.core.storage.backends import open_checkpointer


@pytest.fixture
async def saver(data_dir: Path) -> AsyncIterator[AsyncSqliteSaver]:
    async with open_checkpointer(data_dir / "agent.sqlite") as checkpointer:
        yield checkpointer
