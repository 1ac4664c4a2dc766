"""The model factory's clear failures and the repair of misplaced tool calls."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from app.settings import Settings
from graphs.model import ModelNotConfigured, make_model, repair_misplaced_tool_calls

# Recorded shape: DeepSeek streamed through LangChain, the call landed in `content`.
MISPLACED = AIMessage(
    content=[
        {"type": "text", "text": "我先解析股票。"},
        {
            "type": "text",
            "name": "resolve_stock",
            "args": {"name": "平安"},
            "id": "call_0_8f2d",
            "index": 0,
        },
    ],
    tool_calls=[],
)


def test_a_call_misplaced_into_content_is_moved_back_to_tool_calls() -> None:
    repaired = repair_misplaced_tool_calls(MISPLACED)
    assert [(c["name"], c["args"], c["id"]) for c in repaired.tool_calls] == [
        ("resolve_stock", {"name": "平安"}, "call_0_8f2d")
    ]
    assert repaired.content == [{"type": "text", "text": "我先解析股票。"}]


def test_string_arguments_in_a_misplaced_call_are_parsed() -> None:
    message = AIMessage(
        content=[{"type": "text", "name": "daily", "arguments": '{"ts_code": "000001.SZ"}'}]
    )
    [fixed] = repair_misplaced_tool_calls(message).tool_calls
    assert fixed["args"] == {"ts_code": "000001.SZ"} and fixed["id"]


@pytest.mark.parametrize(
    "message",
    [
        AIMessage(content="普通回答"),
        AIMessage(content=[{"type": "text", "text": "只有文字"}]),
        AIMessage(content="", tool_calls=[{"name": "x", "args": {}, "id": "1"}]),
    ],
)
def test_a_well_formed_response_passes_through_unchanged(message: AIMessage) -> None:
    assert repair_misplaced_tool_calls(message) is message


def test_a_missing_model_name_is_named_in_the_error() -> None:
    settings = Settings(openai_api_key="k", openai_model=None)  # type: ignore[arg-type]
    with pytest.raises(ModelNotConfigured, match="OPENAI_MODEL"):
        make_model(settings)
