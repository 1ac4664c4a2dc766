"""The terminal and the page call each tool by the same name."""

from __future__ import annotations

import re
from pathlib import Path

from app.cli.names import TOOL_NAMES

I18N = Path(__file__).resolve().parents[2] / "web" / "src" / "i18n.ts"


def page_tool_names() -> dict[str, str]:
    """The page's Chinese tool names: the `zh` block of `TOOLS` in web/src/i18n.ts."""
    source = I18N.read_text(encoding="utf-8")
    block = re.search(r"const TOOLS\b.*?\bzh:\s*\{(.*?)\}", source, re.DOTALL)
    assert block is not None, f"no TOOLS.zh catalogue in {I18N}"
    return dict(re.findall(r"(\w+):\s*\"([^\"]*)\"", block.group(1)))


def test_the_terminal_shows_each_tool_by_the_page_s_chinese_name() -> None:
    assert page_tool_names() == TOOL_NAMES
