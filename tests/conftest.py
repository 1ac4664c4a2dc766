"""Shared fixtures: the LLM and Open-Meteo doubles, and settings pointed at them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.settings import get_settings
from graphs.window import forget_context_windows
from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.support.env import PROJECT_VARS, double_env

# PostgreSQL for any test that asks (postgres_admin_url, postgres_url, postgres_module_url);
# the `processes` marker, checked; llama.cpp's llama-server (llama_server).
pytest_plugins = ["tests.support.children", "tests.support.postgres", "tests.support.llama"]


@pytest.fixture(scope="session")
def _llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def _meteo_server() -> Iterator[FakeOpenMeteo]:
    with FakeOpenMeteo() as server:
        yield server


@pytest.fixture
def llm(_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    """The scripted OpenAI-compatible server, empty at the start of each test."""
    _llm_server.reset()
    yield _llm_server
    _llm_server.reset()


@pytest.fixture
def meteo(_meteo_server: FakeOpenMeteo) -> Iterator[FakeOpenMeteo]:
    """The fake Open-Meteo server, without faults or recorded requests at each test's start."""
    _meteo_server.reset()
    yield _meteo_server
    _meteo_server.reset()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Where the app keeps its SQLite file and reports in this test."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture(autouse=True)
def _settings_on_doubles(
    monkeypatch: pytest.MonkeyPatch,
    llm: ScriptedLLM,
    meteo: FakeOpenMeteo,
    data_dir: Path,
) -> Iterator[None]:
    # Real keys or a developer's .env must never reach a test: clear, then point at doubles.
    for name in PROJECT_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in double_env(llm, meteo, data_dir).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    get_settings.cache_clear()
    forget_context_windows()  # a window learned from one test's double is not the next's
    yield
    get_settings.cache_clear()
