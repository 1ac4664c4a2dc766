"""LangGraph's JavaScript clients for these tests, installed and built by `make
langgraph-js` (a no-op when tests/langgraph_api/js/ is up to date), one build at a time on
this checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.webui import BuildFailed, make_locked

JS = Path(__file__).with_name("js")
PAGE = JS / "dist"
# Beside the sources, not in dist/ or node_modules/: the build replaces those.
BUILD_LOCK = JS / ".build.lock"


def built_js_clients() -> Path:
    """tests/langgraph_api/js/ with its packages installed and its page built."""
    try:
        make_locked("langgraph-js", BUILD_LOCK, PAGE / "index.html")
    except BuildFailed as failed:
        pytest.fail(str(failed))
    return JS
