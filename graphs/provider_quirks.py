"""What real OpenAI-compatible endpoints stream, made regular before the graph sees it.

- Reasoning arrives as `reasoning_content` (DeepSeek, Qwen, vLLM), as `reasoning` (some
  servers), or as a `<think>...</think>` block at the start of the content (models served
  without a reasoning parser). `reasoning_of` reads the first two; `ThinkSplitter` moves
  the third out of the content, across chunk boundaries.
- Tool-call deltas: Qwen/DashScope repeat the `id` and `name` in every delta, or give
  parallel calls one `index`; Ollama sends each call whole; some servers leave out the
  `id` or the `index`. `ToolCallDeltas` re-numbers them into OpenAI's shape (one index
  per call, id and name once, argument pieces after), which LangChain merges correctly.
- A reply cut off inside a tool call (`finish_reason: "length"`, or a stream that ends
  without any finish reason while the arguments are not complete JSON) must not run as
  half a call: `ToolCallDeltas.incomplete` names it so the model layer can refuse it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from langchain_core.messages.tool import ToolCallChunk, tool_call_chunk

REASONING_KEY: Final = "reasoning_content"
# Delta/message fields providers put reasoning in, in order of preference.
REASONING_FIELDS: Final = ("reasoning_content", "reasoning")

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"


def reasoning_of(payload: Mapping[str, Any]) -> str:
    """The reasoning text a delta or message carries ("" when none)."""
    for name in REASONING_FIELDS:
        value = payload.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def new_call_id() -> str:
    """A tool call id for a call the provider sent without one."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _held_prefix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that could be the start of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0


class ThinkSplitter:
    """Splits a `<think>...</think>` block at the start of streamed content into reasoning.

    `feed(text)` returns `(reasoning, content)` for what can be decided so far; a piece
    that might be the start of a tag is held until the next feed or `flush()`.
    """

    def __init__(self) -> None:
        self._state = "start"  # start -> think -> after (or start -> plain)
        self._held = ""

    def feed(self, text: str) -> tuple[str, str]:
        if self._state == "plain":
            return "", text
        self._held += text
        if self._state == "start":
            lead = self._held.lstrip()
            if not lead or (THINK_OPEN.startswith(lead) and lead != THINK_OPEN):
                return "", ""  # undecided: it may still become "<think>"
            if not lead.startswith(THINK_OPEN):
                self._state = "plain"
                held, self._held = self._held, ""
                return "", held
            self._state = "think"
            self._held = lead[len(THINK_OPEN) :]
        if self._state == "think":
            end = self._held.find(THINK_CLOSE)
            if end == -1:
                keep = _held_prefix(self._held, THINK_CLOSE)
                ready = self._held[: len(self._held) - keep]
                self._held = self._held[len(ready) :]
                return ready, ""
            reasoning = self._held[:end]
            self._held = self._held[end + len(THINK_CLOSE) :]
            self._state = "after"
            return reasoning, self._after()
        return "", self._after()  # "after": the answer, its leading blank lines dropped

    def _after(self) -> str:
        text = self._held.lstrip()
        self._held = "" if text else self._held
        if text:
            self._state = "plain"
        return text

    def flush(self) -> tuple[str, str]:
        """What is still held when the stream ends."""
        held, self._held = self._held, ""
        if self._state == "think":
            return held, ""
        if self._state == "after":
            return "", held.lstrip()
        return "", held


def split_think(content: str) -> tuple[str, str]:
    """`(reasoning, content)` of a whole reply whose content may open with `<think>`."""
    splitter = ThinkSplitter()
    reasoning, text = splitter.feed(content)
    more_reasoning, more_text = splitter.flush()
    return reasoning + more_reasoning, text + more_text


@dataclass(slots=True)
class _Call:
    position: int
    id: str
    name: str = ""
    args: str = ""
    announced: bool = False  # its id has been passed on


class ToolCallDeltas:
    """Per-stream state that re-numbers tool-call deltas into OpenAI's standard shape."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self._by_id: dict[str, _Call] = {}
        self._by_index: dict[int | None, _Call] = {}
        self._last: _Call | None = None

    def normalize(self, parts: list[ToolCallChunk]) -> list[ToolCallChunk]:
        """The standard deltas for one chunk's tool-call parts."""
        return [self._place(part) for part in parts]

    def _place(self, part: ToolCallChunk) -> ToolCallChunk:
        call_id, index = part.get("id") or None, part.get("index")
        call = self._by_id.get(call_id) if call_id else None
        if call is None and not call_id:
            # A continuation: by its index; without one, the call streamed last.
            call = self._by_index.get(index) if index is not None else self._last
        if call is None:  # a new call (a new id, or an index not seen yet)
            call = _Call(position=len(self.calls), id=call_id or new_call_id())
            self.calls.append(call)
            self._by_id[call.id] = call
        self._by_index[index] = call
        self._last = call
        name = part.get("name") or ""
        if name == call.name:
            name = ""  # a repeated name (DashScope), not a continuation of it
        call.name += name
        args = part.get("args") or ""
        call.args += args
        announce = not call.announced
        call.announced = True
        return tool_call_chunk(
            name=name or None,
            args=args,
            id=call.id if announce else None,
            index=call.position,
        )

    def incomplete(self, finish_reason: str | None) -> _Call | None:
        """The call a cut-off reply left unfinished, if any (see the module's docstring)."""
        if not self.calls:
            return None
        if finish_reason == "length":
            return next((c for c in self.calls if not _complete(c.args)), self.calls[-1])
        if finish_reason is None:
            return next((c for c in self.calls if not _complete(c.args)), None)
        return None


def _complete(arguments: str) -> bool:
    if not arguments.strip():
        return True  # a call without arguments
    try:
        return isinstance(json.loads(arguments), dict)
    except json.JSONDecodeError:
        return False
