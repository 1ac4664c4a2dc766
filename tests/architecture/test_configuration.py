"""Configuration as a new user meets it: .env.example lists every variable; env files are found."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.settings import Settings
from tests.support.env import PROJECT_VARS

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

ROOT = Path(__file__).resolve().parents[2]
REACT_AGENT = str(Path(sys.executable).with_name("react-agent"))


def variable_names() -> set[str]:
    """Every environment variable the settings read (aliases where a field has one)."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        if isinstance(alias, str):
            names.add(alias.upper())
        elif choices:
            names.add(str(choices[0]).upper())
        else:
            names.add(name.upper())
    return names


def test_env_example_lists_every_variable_the_settings_read() -> None:
    listed = set(re.findall(r"^# ([A-Z_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert listed == variable_names()


def test_agent_env_file_is_read_from_any_working_directory(tmp_path: Path) -> None:
    env_file = tmp_path / "elsewhere.env"
    env_file.write_text("AGENT_EXTRA_GRAPHS=bench=bench.graph\n")
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        k: v for k, v in os.environ.items() if k not in PROJECT_VARS and k != "AGENT_EXTRA_GRAPHS"
    }
    env |= {"AGENT_ENV_FILE": str(env_file), "PYTHONPATH": str(ROOT)}

    listed = subprocess.run(
        [REACT_AGENT, "graphs"], cwd=workdir, env=env, capture_output=True, text=True, timeout=60
    )

    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [
        "weather",
        "tushare",
        "bench",
    ]
