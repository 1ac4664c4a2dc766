"""LangGraph's checkpointer conformance suite against our two savers, as the service opens them.

`langgraph-checkpoint-conformance` holds the checkpoint storage contract as cases: blob
round-trips, metadata, namespaces, incremental channel versions, pending writes, listing
and its filters, deletion, and the optional capabilities a saver implements (it detects
them: `aprune`, `acopy_thread`, `adelete_for_runs` overridden). `validate` opens a fresh
saver per capability from a factory; ours open it through
`app.core.storage.backends.open_checkpointer`, the service's own path: SQLite on a new
file, PostgreSQL on a new database (`tests/postgres.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from app.core.storage.backends import open_checkpointer
from app.settings import parse_database
from tests.support.postgres import fresh_database

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}
# What each saver implements beyond the base (LangGraph's AsyncPostgresSaver has aprune).
CAPABILITIES = {"sqlite": BASE, "postgres": BASE | {"prune"}}

Factory = Callable[[], AsyncIterator[BaseCheckpointSaver]]


@dataclass
class Cases:
    """Each case the suite ran: its capability, name and, when it failed, its traceback."""

    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    def record(self, capability: str, name: str, ok: bool, error: str | None) -> None:
        case = f"{capability}/{name}"
        if ok:
            self.passed.append(case)
        else:
            self.failed[case] = error or "(no traceback)"


def sqlite_savers(directory: Path) -> Factory:
    async def saver() -> AsyncIterator[BaseCheckpointSaver]:
        async with open_checkpointer(directory / f"{uuid.uuid4().hex}.sqlite") as opened:
            yield opened

    return saver


def postgres_savers(admin_url: str) -> Factory:
    async def saver() -> AsyncIterator[BaseCheckpointSaver]:
        with fresh_database(admin_url) as url:
            async with open_checkpointer(parse_database(url)) as opened:
                yield opened

    return saver


@pytest.fixture(params=sorted(CAPABILITIES))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def savers(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Factory:
    if backend == "sqlite":
        return sqlite_savers(tmp_path)
    return postgres_savers(request.getfixturevalue("postgres_admin_url"))


async def test_our_saver_passes_every_case_of_the_checkpointer_conformance_suite(
    backend: str, savers: Factory
) -> None:
    cases = Cases()
    registered = checkpointer_test(name=f"react-agent {backend}")(savers)

    report = await validate(registered, progress=ProgressCallbacks(on_test_result=cases.record))

    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == CAPABILITIES[backend], f"the suite found {sorted(detected)}"
    ran = {case.partition("/")[0] for case in [*cases.passed, *cases.failed]}
    assert ran == detected, f"cases ran for {sorted(ran)} only"
    total = len(cases.passed) + len(cases.failed)
    failures = "\n\n".join(f"{case}:\n{trace}" for case, trace in cases.failed.items())
    if cases.failed:
        pytest.fail(f"{len(cases.failed)} of {total} cases failed:\n\n{failures}", pytrace=False)
    assert report.passed_all()
