"""The names the terminal shows for tools: the page's own Chinese names.

The web page (`web/src/i18n.ts`, its `TOOLS.zh` catalogue) and the terminal show a
tool by the same friendly name; a tool neither knows (an MCP server's own) keeps its id.
`tests/cli/test_tool_names.py` keeps the two lists the same.
"""

from __future__ import annotations

from typing import Final

TOOL_NAMES: Final[dict[str, str]] = {
    "get_weather": "查询天气",
    "resolve_stock": "识别股票",
    "save_report": "保存报告",
    "ask_input": "向你提问",
    "ask_choice": "请你选择",
    "ask_multi_choice": "请你多选",
    "ask_confirm": "请你确认",
    "stock_basic": "股票列表",
    "daily": "日线行情",
    "weekly": "周线行情",
    "monthly": "月线行情",
    "daily_basic": "每日指标",
}


def shown_name(tool: str) -> str:
    """What the terminal calls `tool`."""
    return TOOL_NAMES.get(tool, tool)
