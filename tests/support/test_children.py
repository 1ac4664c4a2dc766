"""The `processes` marker is kept true: an unmarked test that starts a child fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.processes import ROOT

PYTEST = (sys.executable, "-m", "pytest", "-p", "tests.support.children", "-p", "no:cacheprovider")
PROBES = """
import subprocess, sys
import pytest


def test_unmarked_and_in_process():
    assert sum(range(4)) == 6


def test_unmarked_but_starting_a_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.fixture
def child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_with_a_fixture_starting_a_child(child):
    pass


@pytest.mark.processes
def test_marked_and_starting_a_child():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""


@pytest.mark.processes  # a pytest process
def test_a_test_that_starts_a_child_without_the_marker_fails_and_names_the_child(
    tmp_path: Path,
) -> None:
    probes = tmp_path / "test_probes.py"
    probes.write_text(PROBES)

    done = subprocess.run(
        [*PYTEST, "-rA", "--strict-markers", "--rootdir", str(tmp_path), str(probes)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    outcomes = {
        line.split(" ")[1].split("::")[-1]: line.split(" ")[0]
        for line in done.stdout.splitlines()
        if line.startswith(("PASSED ", "FAILED ", "ERROR "))
    }
    assert outcomes == {
        "test_unmarked_and_in_process": "PASSED",
        "test_unmarked_but_starting_a_child": "FAILED",
        "test_unmarked_with_a_fixture_starting_a_child": "ERROR",
        "test_marked_and_starting_a_child": "PASSED",
    }, done.stdout
    assert "without the `processes` marker" in done.stdout
    assert f"{sys.executable} -c pass" in done.stdout
