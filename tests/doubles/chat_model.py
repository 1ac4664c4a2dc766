"""ScriptedChatModel: each model call pops the next scripted reply and streams its chunks as given.

    model = ScriptedChatModel(replies=[split_call("lookup", {"city": "北京"}), text_reply("晴。")])

A reply is a list of `AIMessageChunk`s, so a test decides exactly how text and
`tool_call_chunks` (`index`, `id`, `name`, `args` pieces) arrive. Streamed calls
(`_astream`) yield the chunks one by one; whole calls (`_generate`) merge them into one
`AIMessage`. Every call's messages are kept in `model.calls`; `bind_tools` returns the
model itself. Once `replies` run out, `fallback` (when set) makes each reply from the
call's messages. The helpers below build the chunk shapes providers are seen to send.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    message_chunk_to_message,
)
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

OUT_OF_SCRIPT = "ScriptedChatModel: script ran out at model call #{n} (add a reply)"

Reply = list[AIMessageChunk]


class ScriptedChatModel(BaseChatModel):
    """Replays `replies` in order, one per model call, and records what it was asked."""

    replies: list[Reply]
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    fallback: Callable[[list[BaseMessage]], Reply] | None = None

    @property
    def _llm_type(self) -> str:
        return "scripted-chunks"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _next(self, messages: list[BaseMessage]) -> Reply:
        self.calls.append(list(messages))
        if not self.replies and self.fallback is not None:
            return self.fallback(list(messages))
        if not self.replies:
            raise AssertionError(OUT_OF_SCRIPT.format(n=len(self.calls)))
        # Copies: LangChain sets ids and metadata on the chunks it is given.
        return [chunk.model_copy(deep=True) for chunk in self.replies.pop(0)]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        chunks = self._next(messages)
        merged = chunks[0]
        for chunk in chunks[1:]:
            merged = merged + chunk
        return ChatResult(generations=[ChatGeneration(message=message_chunk_to_message(merged))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        for chunk in self._next(messages):
            yield ChatGenerationChunk(message=chunk)


@dataclass(frozen=True)
class Call:
    """One tool call to script: its name, arguments and id."""

    name: str
    args: dict[str, Any]
    id: str


def _dumps(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


def split_text(text: str, pieces: int) -> list[str]:
    """`text` cut into `pieces` consecutive, non-empty parts (fewer if it is shorter)."""
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    parts: list[str] = []
    start = 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


def text_reply(text: str, chunks: int = 3) -> Reply:
    """A plain text answer streamed in `chunks` pieces."""
    return [AIMessageChunk(content=part) for part in split_text(text, chunks)]


def split_call(
    name: str, args: dict[str, Any], *, call_id: str, pieces: int = 4, index: int = 0
) -> Reply:
    """A tool call as OpenAI streams it: id and name first, then the JSON in `pieces` parts."""
    head = AIMessageChunk(
        content="", tool_call_chunks=[tool_call_chunk(name=name, args="", id=call_id, index=index)]
    )
    return [
        head,
        *(
            AIMessageChunk(content="", tool_call_chunks=[tool_call_chunk(args=part, index=index)])
            for part in split_text(_dumps(args), pieces)
        ),
    ]


def whole_call(name: str, args: dict[str, Any], *, call_id: str, index: int = 0) -> Reply:
    """A tool call arriving in one chunk: id, name and complete arguments together."""
    part = tool_call_chunk(name=name, args=_dumps(args), id=call_id, index=index)
    return [AIMessageChunk(content="", tool_call_chunks=[part])]


def interleaved_calls(first: Call, second: Call, *, pieces: int = 3) -> Reply:
    """Two parallel calls (index 0 and 1) whose chunks alternate 0, 1, 0, 1, ...

    Each call's first chunk carries its id and name, the later ones only argument pieces.
    """
    streams = [
        split_call(c.name, c.args, call_id=c.id, pieces=pieces, index=i)
        for i, c in enumerate((first, second))
    ]
    reply: Reply = []
    for position in range(max(len(s) for s in streams)):
        reply.extend(s[position] for s in streams if position < len(s))
    return reply


def misplaced_call(name: str, args: dict[str, Any], *, call_id: str, text: str = "") -> Reply:
    """DeepSeek's misplaced call: a text-typed content block holding the call, no tool_calls.

    `graphs.model.repair_misplaced_tool_calls` moves it back to `tool_calls`.
    """
    blocks: list[str | dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text, "index": 0})
    blocks.append({"type": "text", "name": name, "args": args, "id": call_id, "index": len(blocks)})
    return [AIMessageChunk(content=blocks)]
