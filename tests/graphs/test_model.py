"""The model factory's clear failures and the repair of misplaced tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from graphs.model import ModelNotConfigured, make_model, repair_misplaced_tool_calls
from graphs.react import build_react_graph
from graphs.settings import GraphSettings

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
    settings = GraphSettings(openai_api_key="k", openai_model=None)  # type: ignore[arg-type]
    with pytest.raises(ModelNotConfigured, match="OPENAI_MODEL"):
        make_model(settings)


class RecordedReplies(BaseChatModel):
    """Replays recorded provider responses as LangChain parsed them (unit-test fake)."""

    replies: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "recorded"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


async def test_a_misplaced_tool_call_still_runs_the_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    @tool
    def resolve_stock(name: str) -> str:
        """Resolve a stock name."""
        ran.append(name)
        return '{"ts_code": "000001.SZ", "name": "平安银行"}'

    model = RecordedReplies(replies=[MISPLACED, AIMessage(content="平安银行，代码 000001.SZ。")])
    monkeypatch.setattr("graphs.react.shared_model", lambda settings: model)
    graph = build_react_graph(
        prompts=("ask",), tools=[resolve_stock], settings=GraphSettings()
    ).compile()
    result = await graph.ainvoke({"messages": [HumanMessage("分析平安")]})
    assert ran == ["平安"]
    [tool_message] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert tool_message.tool_call_id == "call_0_8f2d" and "000001.SZ" in tool_message.text
    assert result["messages"][-1].content == "平安银行，代码 000001.SZ。"
