"""The baseline: the service as a git ref had it, served beside ours in the same run.

Issue 11 (durable runs: every run and its SSE event log persisted in SQLite) allows the
AG-UI figures to move by at most 1.10x. Figures from an older RESULTS.md come from
another run on a shared, noisy machine, so the benchmark serves the old code as well
and measures both side by side: `base/agui` and `base/chat` are `ours/agui` and
`ours/chat` against that second server.

How: `git archive <ref>` is unpacked into the run's temp dir (no worktree to register or
leave behind), its packages are byte-compiled as `make install` does, and the server is
started with this venv's Python and `PYTHONPATH=<export>`. A `PYTHONPATH` entry comes
before the editable install (whose finder is appended to `sys.meta_path`), so the
export's `app`, `graphs`, `tools`, `prompts` and `bench` (the bench graph) are the ones
imported; the dependencies are this venv's, the same as ours. The child prints where
it imported each package from before it serves, and the benchmark refuses a base
server that took any of them from elsewhere.
"""

from __future__ import annotations

import compileall
import io
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from bench.procs import ROOT

# HEAD before the run-log change (issue 11): "docs/api.md: what a stopped run leaves in
# the thread". `--base REF` picks another commit, `--no-base` skips the baseline.
BASELINE_REF = "9b0aab841349a2abb025b52e6af86c04636c3864"
PACKAGES = ("app", "graphs", "tools", "prompts", "bench")
MARKER = "bench-baseline-imports:"
# The child: import the packages and the entry point, print where every module of theirs
# came from, then run `react-agent` as usual.
BOOT = (
    "import importlib, json, sys\n"
    f"tops = {PACKAGES!r}\n"
    "for name in tops: importlib.import_module(name)\n"
    "from app.main import main\n"
    "found = {n: getattr(m, '__file__', None) or list(m.__path__)[0]\n"
    "         for n, m in list(sys.modules.items()) if n.partition('.')[0] in tops}\n"
    f"print({MARKER!r}, json.dumps(found), flush=True)\n"
    "sys.exit(main())\n"
)

UNKNOWN_REF = (
    "the baseline ref {ref!r} is not a commit of {repo} ({detail}); fetch it (a shallow "
    "clone lacks old commits), or pass --base REF, or --no-base to skip the baseline"
)
NO_MARKER = "the base server did not report its imports; log tail:\n{log}"
WRONG_IMPORTS = "the base server imported {wrong} outside the baseline export {src}"


class BaselineError(RuntimeError):
    """The baseline cannot be served as asked."""


@dataclass(frozen=True)
class Baseline:
    """A ref resolved and exported: what `base/*` serve."""

    ref: str
    commit: str
    subject: str
    src: Path


def _git(*args: str, repo: Path = ROOT) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)


def resolve(ref: str, repo: Path = ROOT) -> tuple[str, str]:
    """The full commit hash `ref` names and its subject line; BaselineError if none."""
    done = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", repo=repo)
    commit = done.stdout.decode().strip()
    if done.returncode != 0 or not commit:
        detail = done.stderr.decode(errors="replace").strip() or "unknown revision"
        raise BaselineError(UNKNOWN_REF.format(ref=ref, repo=repo, detail=detail))
    subject = _git("log", "-1", "--format=%s", commit, repo=repo).stdout.decode().strip()
    return commit, subject


def export(ref: str, dest: Path, repo: Path = ROOT) -> Baseline:
    """Unpack `git archive <ref>` into `dest` and byte-compile its packages."""
    commit, subject = resolve(ref, repo)
    done = _git("archive", "--format=tar", commit, repo=repo)
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip()
        raise BaselineError(UNKNOWN_REF.format(ref=ref, repo=repo, detail=detail))
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(dest, filter="data")
    # Start-up reads bytecode even where PYTHONDONTWRITEBYTECODE stops Python writing it.
    for package in PACKAGES:
        if (dest / package).is_dir():
            compileall.compile_dir(dest / package, quiet=1)
    return Baseline(ref, commit, subject, dest)


def serve_argv(port: int) -> list[str]:
    """`react-agent serve` of whichever `app` PYTHONPATH finds first, on `port`."""
    return [sys.executable, "-c", BOOT, "serve", "--port", str(port)]


def python_path(src: Path) -> str:
    """The export first, then whatever PYTHONPATH this process was given (not the checkout)."""
    return os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p)


def reported_imports(log_text: str) -> dict[str, str]:
    """Module -> file (package -> directory if it has none), as the base server printed them."""
    for line in log_text.splitlines():
        if line.startswith(MARKER):
            found = json.loads(line[len(MARKER) :])
            return {str(name): str(path) for name, path in found.items()}
    raise BaselineError(NO_MARKER.format(log=log_text[-3000:]))


def check_imports(found: dict[str, str], src: Path) -> None:
    """BaselineError unless every package, and each of their modules loaded, came from `src`."""
    root = src.resolve()
    wrong = {name: "not imported" for name in PACKAGES if name not in found}
    wrong |= {
        name: path for name, path in found.items() if not Path(path).resolve().is_relative_to(root)
    }
    if wrong:
        raise BaselineError(WRONG_IMPORTS.format(wrong=wrong, src=src))
