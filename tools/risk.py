"""Risk levels of tools: anything not `safe` is confirmed by the user before it runs."""

from __future__ import annotations

from typing import TypeVar, cast, get_args

from langchain_core.tools import BaseTool

from tools.interrupts import Risk

T = TypeVar("T", bound=BaseTool)


def with_risk(tool: T, risk: Risk) -> T:
    """Mark `tool` with a risk level (kept in its LangChain metadata)."""
    if risk not in get_args(Risk):
        raise ValueError(f"unknown risk level {risk!r}")
    tool.metadata = {**(tool.metadata or {}), "risk": risk}
    return tool


def risk_of(tool: BaseTool) -> Risk:
    """The tool's risk level; unmarked tools are `safe`."""
    return cast(Risk, (tool.metadata or {}).get("risk", "safe"))
