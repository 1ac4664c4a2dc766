"""Tools that pause the graph to ask the user, instead of letting the model guess.

A cancelled question raises `Cancelled`; the tools node turns it into a cancelled call.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool

from tools.interrupts import (
    ask,
    confirm_payload,
    input_payload,
    multi_select_payload,
    options_of,
    select_payload,
)

ANSWERED = "用户回答：{answer}"
CHOSEN = "用户选择：{answer}"
CONFIRMED = {True: "用户确认：是", False: "用户确认：否"}


@tool
def ask_input(message: str, placeholder: str = "") -> str:
    """向用户提问并等待一段文字回答。缺少必要信息（如城市名、股票名称）时使用，不要猜测。

    Args:
        message: 要问用户的问题，例如“请问要查询哪个城市的天气？”
        placeholder: 输入框里的示例提示，例如“北京 / Shanghai”
    """
    return ANSWERED.format(answer=ask(input_payload(message, placeholder)))


@tool
def ask_choice(message: str, options: list[str]) -> str:
    """让用户从几个选项中选择一个。选项明确且只能选一个时使用。

    Args:
        message: 要问用户的问题
        options: 可选项（至少两个）
    """
    return CHOSEN.format(answer=ask(select_payload(message, options_of(options))))


@tool
def ask_multi_choice(message: str, options: list[str], min: int = 1) -> str:
    """让用户从选项中选择一项或多项。

    Args:
        message: 要问用户的问题
        options: 可选项
        min: 至少要选几项，默认 1
    """
    payload = multi_select_payload(message, options_of(options), max(0, min))
    return CHOSEN.format(answer="、".join(ask(payload)))


@tool
def ask_confirm(message: str) -> str:
    """请用户确认是或否，例如执行有影响的操作之前。

    Args:
        message: 需要用户确认的内容
    """
    return CONFIRMED[bool(ask(confirm_payload(message)))]


ASK_TOOLS: list[BaseTool] = [ask_input, ask_choice, ask_multi_choice, ask_confirm]
