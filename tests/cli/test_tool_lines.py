"""The terminal's one-line tool summaries read as words: dates as dates, a JSON result as
`key=value` pairs like the arguments, live and in a resumed thread's history; the stock
question ends with a full-width colon."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.cli.conftest import CHAT_PROMPT, Terminal
from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.tushare_mcp import TushareMCP

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

TUSHARE_TOKEN = "tushare-test-token"
JULY = {"ts_code": "000001.SZ", "start_date": "20250701", "end_date": "20250730"}
RESOLVED = "✓ 识别股票(name=平安) → ts_code=000001.SZ, name=平安银行"
DAILY = "✓ 日线行情(ts_code=000001.SZ, start_date=2025-07-01, end_date=2025-07-30) → "


def tool_lines(screen: str) -> list[str]:
    """The finished-call lines of `screen` (escape sequences removed), stripped."""
    return [line.strip() for line in screen.splitlines() if line.strip().startswith("✓ ")]


def test_tool_lines_show_dates_as_dates_and_a_json_result_as_pairs_live_and_resumed(
    cli: Callable[..., Terminal], cli_env: dict[str, str], llm: ScriptedLLM
) -> None:
    llm.script(
        tool_call("resolve_stock", {"name": "平安"}),
        tool_call("daily", JULY),
        text("平安银行 7 月震荡。"),
    )
    with TushareMCP(token=TUSHARE_TOKEN) as mcp:
        env = {**cli_env, "TUSHARE_TOKEN": TUSHARE_TOKEN, "TUSHARE_MCP_URL": mcp.url}
        term = cli("chat", "tushare", env=env)
        thread_id = term.thread_id()
        term.expect(CHAT_PROMPT)
        term.line("分析一下平安")
        term.expect("? 找到多只股票，请选择：")
        term.expect("中国平安")  # the whole list is drawn, the marker on the first
        term.send("\r")
        live = tool_lines(term.expect("平安银行 7 月震荡。"))
        term.expect(CHAT_PROMPT)
        term.line("/exit")
        assert term.exit_code() == 0

        resumed = cli("chat", "tushare", "--thread", thread_id, env=env)
        history = tool_lines(resumed.expect("以上是历史记录"))
        resumed.expect(CHAT_PROMPT)
        resumed.line("/exit")
        assert resumed.exit_code() == 0

    for lines in (live, history):
        assert lines[0] == RESOLVED, lines
        assert lines[1].startswith(DAILY), lines
