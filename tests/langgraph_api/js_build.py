"""LangGraph's JavaScript clients for these tests, installed and built by `make
langgraph-js` (a no-op when tests/langgraph_api/js/ is up to date), one build at a time on
this checkout."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

import pytest

from tests.support.processes import ROOT

JS = Path(__file__).with_name("js")
PAGE = JS / "dist"
# Beside the sources, not in dist/ or node_modules/: the build replaces those.
BUILD_LOCK = JS / ".build.lock"
BUILD_S = 600.0
OUTPUT_TAIL = 3000


def built_js_clients() -> Path:
    """tests/langgraph_api/js/ with its packages installed and its page built.

    Parallel test workers call this at once: the lock lets one install while the others
    wait, so no two `npm ci` remove each other's node_modules.
    """
    with BUILD_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "--no-print-directory", "langgraph-js"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_S,
        )
    if done.returncode != 0 or not (PAGE / "index.html").is_file():
        output = (done.stdout + done.stderr)[-OUTPUT_TAIL:]
        pytest.fail(f"`make langgraph-js` failed (exit status {done.returncode}):\n{output}")
    return JS
