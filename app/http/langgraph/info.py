"""`GET /info` and `GET /ok`: what this server is, and that it answers."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from app.http.langgraph.common import router

api = router()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


@api.get("/info")
async def info() -> dict[str, Any]:
    """The server's version and the features it has (LangGraph's `flags`)."""
    return {
        "version": _version("react-agent"),
        "langgraph_py_version": _version("langgraph"),
        "flags": {"assistants": True, "crons": False, "langsmith": False},
        "host": {"kind": "react-agent"},
    }


@api.get("/ok")
async def ok() -> dict[str, bool]:
    """Whether the process answers."""
    return {"ok": True}
