"""The `processes` marker kept true: a test that starts a child process without it fails.
(A pytest plugin: `tests/conftest.py` loads it.)

`make test-fast` runs the tests without the marker (unit and in-process tests). So that
the subset really starts no server, CLI, browser or tool, every child a test starts
(Python's `subprocess.Popen` audit event: subprocess, asyncio's subprocesses, pexpect's
spawn and Playwright's driver all raise it) is noted, and an unmarked test that started
one fails, naming it. Servers the harness itself starts for every test alike (a
throwaway PostgreSQL cluster) are started under `harness_children()` and not counted.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

MARKER = "processes"
MARKER_HELP = (
    f"{MARKER}: starts real child processes (a server, the CLI, a browser, a tool); "
    "`make test-fast` leaves these tests out"
)


class _Watch:
    """The children started since `start()`, unless started by the harness."""

    def __init__(self) -> None:
        self.started: list[str] | None = None  # None: not watching
        self.harness = 0

    def start(self) -> None:
        self.started = []

    def stop(self) -> list[str]:
        started, self.started = self.started or [], None
        return started

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "subprocess.Popen" and self.started is not None and not self.harness:
            executable, argv = args[0], args[1]  # then cwd and env
            command = argv if isinstance(argv, str | bytes) else " ".join(map(str, argv or ()))
            self.started.append(str(command or executable)[:200])


_WATCH = _Watch()
sys.addaudithook(_WATCH.audit)  # an audit hook cannot be removed: it checks `started`


@contextmanager
def harness_children() -> Iterator[None]:
    """Children started in this block are the harness's, not the running test's."""
    _WATCH.harness += 1
    try:
        yield
    finally:
        _WATCH.harness -= 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    # The OpenAI client's headers name the processor, which `platform` learns by running
    # `uname -p` once per process: learnt here, so no test is charged with that child.
    platform.processor()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with unmarked_tests_start_no_children(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with unmarked_tests_start_no_children(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with unmarked_tests_start_no_children(item):
        return (yield)


@contextmanager
def unmarked_tests_start_no_children(item: pytest.Item) -> Iterator[None]:
    """Around one phase of `item`: fail it when, unmarked, it started a child process."""
    if item.get_closest_marker(MARKER) is not None:
        yield
        return
    _WATCH.start()
    try:
        yield
    finally:
        started = _WATCH.stop()
    if started:
        pytest.fail(
            f"{item.nodeid} starts child processes without the `{MARKER}` marker "
            f"(so `make test-fast` would run them): {started}",
            pytrace=False,
        )
