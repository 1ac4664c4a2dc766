"""Text-mode ReAct (`AGENT_TOOL_CALLING=text`): for models without native function calling.

The request carries no `tools`: the system prompt describes them (name, description,
JSON schema of the arguments) and the format (`prompts/text_react.md`), and every
request stops at `Observation:`. The reply is parsed as it streams:

    Thought: ...                 -> reasoning (`additional_kwargs["reasoning_content"]`)
    Action: get_weather          -> nothing streamed; at the end one ordinary tool call
    Action Input: {"location": "北京"}
    Final Answer: ...            -> the answer (`content`), without its label

so the tools node, its guards, the risk gate and the interrupts see an ordinary
AIMessage with `tool_calls`. A provider that ignores `stop` cannot smuggle in an
observation: the parser cuts at the first `Observation:` the model wrote, and nothing
after it is streamed, stored or sent again. A reply that does not parse (neither an
action with a JSON object nor a final answer) is stored with its observation in
`response_metadata[FORMAT_ERROR_KEY]`; `needs_retry` sends the loop back to the model,
so it counts as a step. History goes back to the model as text turns: each call as
`Thought/Action/Action Input`, its result as a user turn `Observation: ...`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import ToolCall, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.constants import TAG_NOSTREAM

from graphs.provider_quirks import REASONING_KEY, new_call_id
from prompts import render_template

OBSERVATION: Final = "Observation:"
STOP: Final = [OBSERVATION]
# Where the model's own text ends: the stop sequence, also with a full-width colon.
_CUTS: Final = (OBSERVATION, "Observation：")

# The wrapped model's own call, made through its public interface so that its callbacks,
# rate limiter and traces see the request it really sends (in the caller's run, as
# LangChain passes it on). Its raw text ("Thought: ...") stays out of LangGraph's
# `messages` stream, which gets the parsed chunks, and observers that count model calls
# know it is part of this model's call, not another one.
WRAPPED_CALL: Final = "text_mode:wrapped"
WRAPPED: Final[RunnableConfig] = {"tags": [TAG_NOSTREAM, WRAPPED_CALL]}

# In a reply that did not parse: the observation the model reads next, and its raw text.
FORMAT_ERROR_KEY: Final = "format_error"
RAW_REPLY_KEY: Final = "raw_reply"

FORMAT_ERROR = (
    "格式错误：{reason}。请严格按格式回复：要使用工具时依次写 Thought、Action（工具名）、"
    "Action Input（JSON 对象）三行后停止；可以回答时写 Thought 和 Final Answer。"
)
NO_ACTION = "回复中既没有 Action 也没有 Final Answer"
NO_NAME = "Action 后没有工具名"
NO_INPUT = "Action 后缺少 Action Input"
BAD_INPUT = "Action Input 不是一个 JSON 对象（{detail}）"
EMPTY_ANSWER = "Final Answer 后没有内容"
NO_RESULT = "（没有结果）"

_LABEL = re.compile(
    r"[ \t]*[*#>]*[ \t]*(thought|action[ \t]*input|action|final[ \t]*answer)"
    r"[ \t]*\**[ \t]*[:：][ \t]*\**[ \t]*",
    re.IGNORECASE,
)
_LABEL_WORDS: Final = ("thought", "action input", "action", "final answer")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def needs_retry(message: AIMessage) -> bool:
    """A text-mode reply that did not parse: the model reads why and tries again."""
    return FORMAT_ERROR_KEY in (message.response_metadata or {})


def text_mode_model(model: BaseChatModel, tools: Sequence[BaseTool]) -> TextModeModel:
    """`model` speaking the text format, with `tools` described in its system prompt."""
    return TextModeModel(model=model, instructions=tool_instructions(tools))


def tool_instructions(tools: Sequence[BaseTool]) -> str:
    """The system prompt's section on the tools and the Thought/Action format."""
    blocks = []
    for tool in tools:
        spec = convert_to_openai_tool(tool)["function"]
        schema = json.dumps(spec.get("parameters") or {}, ensure_ascii=False)
        description = str(spec.get("description") or "").strip()
        blocks.append(f"### {spec['name']}\n{description}\n参数（JSON Schema）：{schema}")
    return render_template("text_react", tools="\n\n".join(blocks))


class TextModeModel(BaseChatModel):
    """Wraps a chat model: renders the request as text turns, parses the reply back."""

    model: BaseChatModel
    instructions: str

    @property
    def _llm_type(self) -> str:
        return "text-react"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        # The wrapped model's name and parameters, for callbacks, traces and metrics.
        return {**self.model.asdict(), "tool_calling": "text"}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return self.model._get_ls_params(stop=stop, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        parser = ReActParser()
        request = to_text_turns(messages, self.instructions)
        async for raw in self.model.astream(request, WRAPPED, stop=list(STOP), **kwargs):
            chunk = parser.chunk(ChatGenerationChunk(message=raw))
            if run_manager:
                await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
        tail = parser.last_chunk()
        if run_manager:
            await run_manager.on_llm_new_token(tail.text, chunk=tail)
        yield tail

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        parser = ReActParser()
        request = to_text_turns(messages, self.instructions)
        for raw in self.model.stream(request, WRAPPED, stop=list(STOP), **kwargs):
            chunk = parser.chunk(ChatGenerationChunk(message=raw))
            if run_manager:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk
        tail = parser.last_chunk()
        if run_manager:
            run_manager.on_llm_new_token(tail.text, chunk=tail)
        yield tail

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = to_text_turns(messages, self.instructions)
        return _parsed(await self.model.ainvoke(request, WRAPPED, stop=list(STOP), **kwargs))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request = to_text_turns(messages, self.instructions)
        return _parsed(self.model.invoke(request, WRAPPED, stop=list(STOP), **kwargs))


def _parsed(reply: BaseMessage) -> ChatResult:
    """A whole reply, parsed as if it had streamed in one chunk."""
    parser = ReActParser()
    head = parser.chunk(ChatGenerationChunk(message=_as_chunk(reply)))
    merged = head.message + parser.last_chunk().message
    assert isinstance(merged, AIMessageChunk)
    message = AIMessage(
        content=merged.content,
        additional_kwargs=merged.additional_kwargs,
        response_metadata=merged.response_metadata,
        tool_calls=[
            ToolCall(name=call["name"], args=call["args"], id=call["id"], type="tool_call")
            for call in merged.tool_calls
        ],
        usage_metadata=merged.usage_metadata,
        id=reply.id,
    )
    return ChatResult(generations=[ChatGeneration(message=message)])


def _as_chunk(message: BaseMessage) -> AIMessageChunk:
    return AIMessageChunk(
        content=message.content,
        additional_kwargs=dict(message.additional_kwargs),
        response_metadata=dict(message.response_metadata),
        usage_metadata=getattr(message, "usage_metadata", None),
    )


# --- the request: history as text turns ----------------------------------------------


def to_text_turns(messages: Sequence[BaseMessage], instructions: str) -> list[BaseMessage]:
    """The conversation as a model without function calling reads it."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    answered = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    turns: list[BaseMessage] = []
    system = False
    for message in messages:
        if isinstance(message, SystemMessage) and not system:
            turns.append(SystemMessage(f"{message.text}\n\n{instructions}"))
            system = True
        elif isinstance(message, AIMessage):
            turns.extend(_ai_turns(message, results))
        elif isinstance(message, ToolMessage):
            if message.tool_call_id not in answered:  # a result without its call
                turns.append(HumanMessage(f"{OBSERVATION} {message.text}"))
        else:
            turns.append(message)
    if not system:
        turns.insert(0, SystemMessage(instructions))
    return turns


def _ai_turns(message: AIMessage, results: dict[str, ToolMessage]) -> list[BaseMessage]:
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    thought = [f"Thought: {reasoning}"] if isinstance(reasoning, str) and reasoning else []
    metadata = message.response_metadata or {}
    if FORMAT_ERROR_KEY in metadata:
        raw = str(metadata.get(RAW_REPLY_KEY) or "\n".join(thought))
        return [AIMessage(raw), HumanMessage(f"{OBSERVATION} {metadata[FORMAT_ERROR_KEY]}")]
    if not message.tool_calls:
        return [AIMessage("\n".join([*thought, f"Final Answer: {message.text}"]))]
    if not thought and message.text:
        thought = [f"Thought: {message.text}"]  # a native turn's text before its calls
    turns: list[BaseMessage] = []
    for call in message.tool_calls:
        args = json.dumps(call["args"], ensure_ascii=False)
        turns.append(
            AIMessage("\n".join([*thought, f"Action: {call['name']}", f"Action Input: {args}"]))
        )
        result = results.get(call["id"] or "")
        turns.append(HumanMessage(f"{OBSERVATION} {result.text if result else NO_RESULT}"))
        thought = []
    return turns


# --- the reply: a streaming parser ---------------------------------------------------


@dataclass(frozen=True)
class Parsed:
    """How a reply ended: a call, an answer, or a format error (with the raw text)."""

    call: ToolCall | None
    error: str | None
    raw: str


class ReActParser:
    """Parses one streamed reply; `chunk()` per provider chunk, then `last_chunk()`.

    Text is released as soon as it cannot be the start of a label or of `Observation:`:
    what might still be one is held until the next chunk decides it.
    """

    def __init__(self) -> None:
        self._seen = ""  # every character accepted (the reply up to its cut)
        self._buf = ""  # accepted, not yet classified
        self._end: int | None = None  # where the reply was cut, once it was
        self._line_start = True
        self._section = "thought"  # text before any label counts as thought
        self._started = False  # the section's text has begun (leading blanks dropped)
        self._blank = ""  # trailing whitespace held back within a section
        self._action: str | None = None
        self._input: str | None = None
        self._final = False
        self._reasoned = False
        self._answer = ""
        self._out_reasoning: list[str] = []
        self._out_content: list[str] = []

    @property
    def closed(self) -> bool:
        return self._end is not None

    def chunk(self, raw: ChatGenerationChunk) -> ChatGenerationChunk:
        """The provider chunk as the graph streams it: thought as reasoning, answer as text."""
        message = raw.message
        content = message.content
        self.feed(content if isinstance(content, str) else _text_of(content))
        native = message.additional_kwargs.get(REASONING_KEY)
        return ChatGenerationChunk(
            message=self._take(
                native if isinstance(native, str) else "",
                response_metadata=message.response_metadata,
                usage_metadata=getattr(message, "usage_metadata", None),
                id=message.id,
            ),
            generation_info=raw.generation_info,
        )

    def feed(self, text: str) -> None:
        if self.closed or not text:
            return
        self._seen += text
        self._buf += text
        cuts = [i for i in (self._buf.find(marker) for marker in _CUTS) if i >= 0]
        if cuts:
            self._close(len(self._seen) - len(self._buf) + min(cuts))
            self._buf = self._buf[: min(cuts)]
            self._drain(end=True)
            return
        hold = max(_held_prefix(self._buf, marker) for marker in _CUTS)
        held = self._buf[len(self._buf) - hold :]
        self._buf = self._buf[: len(self._buf) - hold]
        self._drain(end=False)
        if not self.closed:  # (a label after a complete action closes the reply)
            self._buf += held

    def finish(self) -> Parsed:
        """The reply's outcome, once the stream has ended."""
        if not self.closed:
            self._drain(end=True)
            self._close(len(self._seen))
        raw = self._seen[: self._end]
        if self._final:
            error = None if self._answer.strip() else EMPTY_ANSWER
            return Parsed(call=None, error=error, raw=raw)
        if self._action is None:
            return Parsed(call=None, error=NO_ACTION, raw=raw)
        name = _tool_name(self._action)
        if not name:
            return Parsed(call=None, error=NO_NAME, raw=raw)
        if self._input is None:
            return Parsed(call=None, error=NO_INPUT, raw=raw)
        args = _arguments(self._input)
        if isinstance(args, str):
            return Parsed(call=None, error=BAD_INPUT.format(detail=args), raw=raw)
        call = ToolCall(name=name, args=args, id=new_call_id(), type="tool_call")
        return Parsed(call=call, error=None, raw=raw)

    def last_chunk(self) -> ChatGenerationChunk:
        """The closing chunk: held text, then the tool call or the format error."""
        parsed = self.finish()
        metadata: dict[str, Any] = {}
        if parsed.error is not None:
            metadata = {
                FORMAT_ERROR_KEY: FORMAT_ERROR.format(reason=parsed.error),
                RAW_REPLY_KEY: parsed.raw,
            }
        calls = []
        if parsed.call is not None:
            call = parsed.call
            args = json.dumps(call["args"], ensure_ascii=False)
            calls = [tool_call_chunk(name=call["name"], args=args, id=call["id"], index=0)]
        return ChatGenerationChunk(
            message=self._take("", response_metadata=metadata, tool_call_chunks=calls)
        )

    # --- internals ---------------------------------------------------------------------

    def _take(self, native_reasoning: str, **fields: Any) -> AIMessageChunk:
        reasoning = native_reasoning + "".join(self._out_reasoning)
        content = "".join(self._out_content)
        self._out_reasoning, self._out_content = [], []
        extra = {REASONING_KEY: reasoning} if reasoning else {}
        return AIMessageChunk(content=content, additional_kwargs=extra, **fields)

    def _close(self, end: int) -> None:
        self._end = end if self._end is None else min(self._end, end)

    def _drain(self, *, end: bool) -> None:
        while self._buf:
            if self._line_start and not self._final:
                label = _LABEL.match(self._buf)
                if label and (label.end() < len(self._buf) or end):
                    self._label(label.group(1), label.end())
                    continue
                line, newline, _ = self._buf.partition("\n")
                if label or (not newline and not end and _may_be_label(line)):
                    return  # wait: the label (or its end) is not all here yet
                self._line_start = False
            line, newline, rest = self._buf.partition("\n")
            self._buf = rest
            self._line_start = bool(newline)
            self._text(line + newline)

    def _label(self, word: str, length: int) -> None:
        if self._input is not None:
            # An action is complete: whatever follows it is not the model's to write.
            self._close(len(self._seen) - len(self._buf))
            self._buf = ""
            return
        self._buf = self._buf[length:]
        self._line_start = False
        kind = re.sub(r"[ \t]+", " ", word.lower())
        self._started, self._blank = False, ""
        if kind == "action":
            self._section, self._action = "action", ""
        elif kind == "action input":
            self._section, self._input = "input", ""
        elif kind == "final answer":
            self._section, self._final, self._action = "final", True, None
        else:
            self._section = "thought"

    def _text(self, piece: str) -> None:
        if self._section == "action":
            self._action = (self._action or "") + piece
            return
        if self._section == "input":
            self._input = (self._input or "") + piece
            return
        if not self._started:
            piece = piece.lstrip()
            if not piece:
                return
            self._started = True
            if self._section == "thought" and self._reasoned:
                piece = "\n" + piece  # a second thought
        text = self._blank + piece
        kept = text.rstrip()
        self._blank = text[len(kept) :]
        if not kept:
            return
        if self._section == "final":
            self._answer += kept
            self._out_content.append(kept)
        else:
            self._reasoned = True
            self._out_reasoning.append(kept)


def _held_prefix(text: str, marker: str) -> int:
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


def _may_be_label(line: str) -> bool:
    """Whether an unfinished line could still turn into a label."""
    head = re.sub(r"\s+", " ", line.replace("*", "")).strip(" \t#>").lower()
    return any(word.startswith(head) for word in _LABEL_WORDS)


def _tool_name(text: str) -> str:
    name = text.strip().strip("`'\"[]()（）*").strip()
    return name.split()[0] if name else ""


def _arguments(text: str) -> dict[str, Any] | str:
    """The call's arguments, or why they are not a JSON object."""
    body = _FENCE.sub("", text.strip()).strip()
    if not body:
        return {}
    try:
        value, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        return exc.msg
    return value if isinstance(value, dict) else type(value).__name__


def _text_of(content: list[Any]) -> str:
    return "".join(
        block if isinstance(block, str) else str(block.get("text") or "")
        for block in content
        if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
    )
