"""Environment variables that point the app (in-process or a child) at the test doubles."""

from __future__ import annotations

import os
from pathlib import Path

from tests.doubles.llm import ScriptedLLM
from tests.doubles.open_meteo import FakeOpenMeteo

TEST_API_KEY = "test-key"
TEST_MODEL = "test-model"

# The project's own variables: cleared before pointing at doubles so none leaks in.
PROJECT_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_MODEL",
    "OPENAI_MAX_RETRIES",
    "OPENAI_TIMEOUT",
    "OPEN_METEO_GEOCODING_URL",
    "OPEN_METEO_FORECAST_URL",
    "OPEN_METEO_TIMEOUT",
    "AGENT_DB",
    "AGENT_REPORTS_DIR",
    "AGENT_API_KEY",
    "AGENT_TOKEN",
    "AGENT_ALLOWED_HOSTS",
    "TUSHARE_TOKEN",
    "TUSHARE_MCP_URL",
    "AGENT_TOOL_CALLING",
    "AGENT_CONTEXT_TOKENS",
    "OPENAI_MAX_TOKENS",
    "AGENT_HISTORY_SUMMARY",
    "AGENT_THREAD_TITLES",
    "AGENT_MCP_CONFIG",
    "AGENT_MCP_RETRY_AFTER",
)
# Titles off: the doubles are scripted reply by reply and count requests, and a title
# call after each first exchange would take a turn meant for the next run at a moment of
# its own. The tests of titles turn them on (tests/service/test_thread_titles.py).
TITLES_OFF = {"AGENT_THREAD_TITLES": "false"}


def double_env(llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path) -> dict[str, str]:
    """The settings' env vars for running against `llm` and `meteo`, data under `data_dir`."""
    return {
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "OPENAI_MODEL": TEST_MODEL,
        "OPENAI_MAX_RETRIES": "1",
        "OPENAI_TIMEOUT": "20",
        "OPEN_METEO_GEOCODING_URL": meteo.geocoding_url,
        "OPEN_METEO_FORECAST_URL": meteo.forecast_url,
        "OPEN_METEO_TIMEOUT": "5",
        "AGENT_DB": str(data_dir / "agent.sqlite"),
        "AGENT_REPORTS_DIR": str(data_dir / "reports"),
        **TITLES_OFF,
    }


def env_for_subprocess(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, data_dir: Path, **extra: str
) -> dict[str, str]:
    """A full environment for running the server or CLI as a real process against the doubles.

    Starts from this process's environment without the project's own variables (so a
    developer's `.env` values or real keys never reach the child), disables proxies for
    127.0.0.1 and adds `extra` last.
    """
    env = {k: v for k, v in os.environ.items() if k not in PROJECT_VARS}
    env.update(double_env(llm, meteo, data_dir))
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["PYTHONUNBUFFERED"] = "1"
    env["LANGGRAPH_CLI_NO_ANALYTICS"] = "1"
    env["LANGGRAPH_NO_VERSION_CHECK"] = "1"
    env.update(extra)
    return env
