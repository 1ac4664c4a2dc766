"""The built web UI for the tests that serve it: `make web` (a no-op when the build is
newer than `web/`'s sources), one build at a time on this checkout."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from tests.support.processes import ROOT

DIST_INDEX = ROOT / "app" / "http" / "static" / "index.html"
# Beside the sources, not in app/http/static/ or node_modules/: the build empties those.
BUILD_LOCK = ROOT / "web" / ".build.lock"
BUILD_S = 600.0
OUTPUT_TAIL = 3000


class BuildFailed(RuntimeError):
    """A `make` target failed: its output says why."""


def make_locked(target: str, lock_path: Path, product: Path) -> Path:
    """`product`, made by `make <target>` (a no-op when it is up to date).

    Parallel test workers call this at once: the lock (`lock_path`, beside the sources,
    not in what the build empties) lets one build while the others wait, so no two
    `npm ci` remove each other's node_modules, and the waiters find it built.
    """
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["make", "--no-print-directory", target],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_S,
        )
    if done.returncode != 0 or not product.exists():
        output = (done.stdout + done.stderr)[-OUTPUT_TAIL:]
        raise BuildFailed(f"`make {target}` failed (exit status {done.returncode}):\n{output}")
    return product


def build_web_ui() -> Path:
    """The index.html of a web UI built from the current `web/` sources."""
    return make_locked("web", BUILD_LOCK, DIST_INDEX)
