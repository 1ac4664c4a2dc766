"""The layering contracts in pyproject.toml, checked by import-linter as `make lint` runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))
PACKAGES = ("app", "graphs", "tools", "prompts")


def lint_copy(tree: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the packages in `tree` (a copy), with the project's contracts."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [LINT_IMPORTS, "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_project(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "static")
        )
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_tree_keeps_every_layer_contract(tmp_path: Path) -> None:
    done = lint_copy(copy_project(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_tool_importing_the_service_breaks_the_layers(tmp_path: Path) -> None:
    tree = copy_project(tmp_path)
    weather = tree / "tools" / "weather.py"
    weather.write_text(weather.read_text() + "\nfrom app.settings import get_settings\n")

    done = lint_copy(tree)

    assert done.returncode != 0
    assert "BROKEN" in done.stdout
    assert "tools.weather -> app.settings" in done.stdout


def test_the_http_server_importing_the_terminal_client_breaks_the_contract(
    tmp_path: Path,
) -> None:
    tree = copy_project(tmp_path)
    routes = tree / "app" / "http" / "routes.py"
    routes.write_text(routes.read_text() + "\nfrom app.cli.terminal import Renderer\n")

    done = lint_copy(tree)

    assert done.returncode != 0
    assert "app.http.routes -> app.cli.terminal" in done.stdout
