"""What the title call is given and what it keeps of the model's reply (app.core.runs.titles).

The title's path end to end is tested over HTTP (tests/service/test_thread_titles.py);
these are the cases a test double cannot time: a user faster than the title call, and
the wrappings real models put around a title.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from app.core.runs.titles import TitleFailed, clean_title, first_exchange


def test_the_first_exchange_ends_before_the_next_user_message_even_one_sent_meanwhile() -> None:
    messages = [
        HumanMessage("查天气"),
        AIMessage("", tool_calls=[{"name": "ask_input", "args": {}, "id": "c1"}]),
        ToolMessage("北京", tool_call_id="c1"),
        AIMessage("北京明天晴。"),
        HumanMessage("后天呢？"),
        AIMessage("后天多云。"),
    ]

    assert first_exchange(messages) == ("查天气", "北京明天晴。")


def test_a_thread_without_an_answer_has_no_first_exchange() -> None:
    with pytest.raises(TitleFailed):
        first_exchange([HumanMessage("查天气")])


@pytest.mark.parametrize(
    ("reply", "title"),
    [
        ("“北京明天天气”\n这是我起的标题。", "北京明天天气"),
        ("标题：上海出行建议。", "上海出行建议"),
        ("**Title: Weather in Paris**", "Weather in Paris"),
        ("\n\n  「平安银行走势」  ", "平安银行走势"),
        ("一" * 50, "一" * 40 + "…"),
        ("\u202e反转\u202c", "反转"),
        ('  \n "" ', ""),
    ],
)
def test_a_reply_loses_its_labels_quotes_markup_and_bidirectional_controls(
    reply: str, title: str
) -> None:
    assert clean_title(reply) == title
