"""What one model call is sent: the system prompt, a summary, and the newest whole turns that fit.

A turn is a user message and everything after it up to the next one, so a tool call
always travels with its result and a reasoning echo with its turn. The current turn
(the run in progress) is always sent; when it alone does not fit, its oldest tool
results are shortened. No tool result takes more than `TOOL_RESULT_SHARE` of the
window in any request. Each cut says so, and how much it left out (`RESULT_CUT`);
a result's artifact (chart data for clients) is never touched. The thread keeps its
whole history: only what the model is sent is cut.

Turns that no longer fit are folded into a running summary (`graphs/summary.py`) kept
in the graph's state (`Summary`). The cut moves with hysteresis: when the kept turns
outgrow the budget, the cut moves until they fill `LOW_WATER` of it, so a long thread
makes one summary call every several turns, not one per turn. Once folded (or, without
summaries, dropped) turns are `out_of_view`: they may leave the state for the thread's
transcript (`graphs/transcript.py`), so the state stays the size of the window.

Tokens are estimated from characters (`estimate_text`: CJK characters count apart
from other text), scaled by the provider's own counts of earlier prompts
(`graphs/window.py`, `ContextWindow.ratio`), under a `SAFETY_MARGIN`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

# typing_extensions: pydantic reads the state schema (LangGraph API schemas) only from it on 3.11.
from typing_extensions import TypedDict

from graphs.provider_quirks import REASONING_KEY
from graphs.settings import GraphSettings
from graphs.text_mode import to_text_turns
from graphs.window import Window
from prompts import render_template

# Shares of the window (prompt and reply together).
SAFETY_MARGIN: Final = 0.10  # left free for the estimate's error
TOOL_RESULT_SHARE: Final = 0.25  # the most one tool result takes in any request
REPLY_SHARE: Final = 0.25  # the default reply cap, up to DEFAULT_REPLY_CAP
REPLY_CEILING: Final = 0.5  # OPENAI_MAX_TOKENS beyond this leaves the prompt too little
SUMMARY_SHARE: Final = 1 / 16  # the summary's length, up to SUMMARY_CAP
DEFAULT_REPLY_CAP: Final = 4096
SUMMARY_CAP: Final = 1024
# After a cut, the kept turns fill this share of the history's room.
LOW_WATER: Final = 0.5
# A shortened result of the current run keeps at least this many tokens.
MIN_RESULT_TOKENS: Final = 64

# Estimate: tokens per CJK character, characters per token of other text, per message.
CJK_TOKENS: Final = 1.0
OTHER_CHARS_PER_TOKEN: Final = 3.0
MESSAGE_TOKENS: Final = 4

RESULT_CUT = "\n…[结果过长：为适应模型的上下文窗口，省略了后面 {omitted} 个字符]"

_CJK = re.compile(
    "[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0002fa1f]"
)


class Summary(TypedDict):
    """The running summary of the turns no longer sent: its text and the last message it covers."""

    text: str
    through: str


_EMPTY: Final = Summary(text="", through="")


# --- the estimate ----------------------------------------------------------------------


def estimate_text(text: str) -> float:
    """Tokens `text` takes, estimated from its characters."""
    cjk = len(_CJK.findall(text))
    return cjk * CJK_TOKENS + (len(text) - cjk) / OTHER_CHARS_PER_TOKEN


def text_of(content: str | list[Any]) -> str:
    """A message's content as the text that is sent."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text") or ""))
        else:
            parts.append(json.dumps(block, ensure_ascii=False, default=str))
    return "".join(parts)


def estimate_message(message: BaseMessage) -> float:
    """Tokens one message takes in a request, tool calls and echoed reasoning included."""
    tokens = MESSAGE_TOKENS + estimate_text(text_of(message.content))
    if isinstance(message, AIMessage) and message.tool_calls:
        for call in message.tool_calls:
            args = json.dumps(call["args"], ensure_ascii=False)
            tokens += MESSAGE_TOKENS + estimate_text(call["name"] + args)
        reasoning = message.additional_kwargs.get(REASONING_KEY)
        if isinstance(reasoning, str):  # sent back with its calls (graphs/model.echo_reasoning)
            tokens += estimate_text(reasoning)
    return tokens


@dataclass(frozen=True)
class Wire:
    """How a bound model sends history, so that the estimate is of what is really sent.

    `fixed` rides along with every request beside the system prompt (the tools' schemas,
    or text mode's tool instructions); `render` turns history into the messages sent.
    """

    fixed: str = ""
    render: Callable[[Sequence[BaseMessage]], Sequence[BaseMessage]] = field(default=list)

    @classmethod
    def native(cls, tools: Sequence[BaseTool]) -> Wire:
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        return cls(fixed=json.dumps(schemas, ensure_ascii=False) if schemas else "")

    @classmethod
    def text_mode(cls, instructions: str) -> Wire:
        def as_text(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
            return to_text_turns(messages, "")[1:]  # without the (empty) system turn it adds

        return cls(fixed=instructions, render=as_text)

    def cost(self, messages: Sequence[BaseMessage]) -> float:
        """Estimated tokens of `messages` as this wire sends them."""
        return sum(estimate_message(message) for message in self.render(messages))


# --- the budget of one request ---------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """The sizes of one request, in estimated tokens (real tokens divided by `ratio`)."""

    window: Window
    reply: int  # the reply cap the request carries, in real tokens
    prompt: float  # the most the prompt may take
    tool_result: float  # the most one tool result may take
    summary: int  # the cap on a summary's length, in real tokens
    ratio: float  # real tokens per estimated token


def reply_cap(settings: GraphSettings, window: Window) -> int:
    """The reply cap: OPENAI_MAX_TOKENS, else min(4096, a quarter of the window)."""
    wanted = settings.openai_max_tokens or min(DEFAULT_REPLY_CAP, int(window.tokens * REPLY_SHARE))
    return max(1, min(wanted, int(window.tokens * REPLY_CEILING)))


def budget_for(settings: GraphSettings, window: Window, ratio: float) -> Budget:
    """The budget of a request to a model with `window`, its tokens counting `ratio` each."""
    reply = reply_cap(settings, window)
    prompt = window.tokens - reply - window.tokens * SAFETY_MARGIN
    if window.input_limit:
        prompt = min(prompt, window.input_limit * (1 - SAFETY_MARGIN))
    return Budget(
        window=window,
        reply=reply,
        prompt=prompt / ratio,
        tool_result=window.tokens * TOOL_RESULT_SHARE / ratio,
        summary=min(SUMMARY_CAP, int(window.tokens * SUMMARY_SHARE)),
        ratio=ratio,
    )


# --- turns and cut results -------------------------------------------------------------

Turn = list[AnyMessage]


def split_turns(messages: Sequence[AnyMessage]) -> list[Turn]:
    """`messages` as turns: each user message opens one (what comes before, a turn of its own)."""
    turns: list[Turn] = []
    for message in messages:
        if not turns or (isinstance(message, HumanMessage) and turns[-1]):
            turns.append([])
        turns[-1].append(message)
    return turns


def cut_text(text: str, limit: float) -> str:
    """`text` cut to about `limit` estimated tokens, with the marker saying what was left out."""
    if estimate_text(text) <= limit:
        return text
    room = max(0.0, limit - estimate_text(RESULT_CUT))
    # Every character costs at least 1/OTHER_CHARS_PER_TOKEN: the cut lies below `high`.
    low, high = 0, min(len(text), int(room * OTHER_CHARS_PER_TOKEN) + 1)
    while low < high:
        middle = (low + high + 1) // 2
        if estimate_text(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low] + RESULT_CUT.format(omitted=len(text) - low)


def cut_result(message: AnyMessage, limit: float) -> AnyMessage:
    """A tool result cut to `limit` estimated tokens (its artifact untouched); others as is."""
    if not isinstance(message, ToolMessage):
        return message
    text = text_of(message.content)
    cut = cut_text(text, limit)
    return message if cut is text else message.model_copy(update={"content": cut})


def shorten_oldest_results(turn: Turn, excess: float, limit: float) -> Turn:
    """`turn` with its tool results cut to `limit` and its oldest shortened further until
    the turn is `excess` tokens smaller than that; each result is cut once, from the whole."""
    shortened: Turn = []
    for message in turn:
        capped = cut_result(message, limit)
        if excess > 0 and isinstance(message, ToolMessage):
            before = estimate_message(capped)
            room = max(MIN_RESULT_TOKENS, before - MESSAGE_TOKENS - excess)
            capped = cut_result(message, min(limit, room))
            excess -= before - estimate_message(capped)
        shortened.append(capped)
    return shortened


# --- the plan of one request -----------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one request sends after its system prompt, and what to fold into the summary first.

    `summary` is the summary the request carries until `fold` (the turns dropped since
    it was made; empty: none) is folded in.
    """

    history: list[AnyMessage]
    summary: Summary | None
    fold: list[AnyMessage]


def plan_request(
    messages: Sequence[AnyMessage],
    summary: Summary | None,
    *,
    budget: Budget,
    wire: Wire,
    overhead: float,
    summarize: bool,
) -> Plan:
    """The plan for `messages` under `budget`, `overhead` tokens going to the system prompt."""
    turns = split_turns(messages)
    start = _after(turns, summary)
    if start is None:
        summary, start = None, 0
    room = budget.prompt - overhead
    carried = summary_tokens(summary)
    newest = _newest_costs(turns[start:], budget, wire, room - carried)
    if len(newest) == len(turns) - start and sum(cost for _, cost in newest) <= room - carried:
        return Plan(_flat(turn for turn, _ in reversed(newest)), summary, [])
    # The cut moves: what is kept fills LOW_WATER of the room left beside a summary.
    reserve = budget.summary / budget.ratio + summary_tokens(_EMPTY) if summarize else 0.0
    keep = _within(newest, (room - reserve) * LOW_WATER if summarize else room)
    dropped = _flat(turns[start : len(turns) - keep])
    folding = summarize and bool(dropped) and dropped[-1].id is not None
    kept = [turn for turn, _ in reversed(newest[:keep])]
    excess = newest[0][1] - (room - (reserve if folding else carried))
    if keep == 1 and excess > 0:
        kept = [shorten_oldest_results(turns[-1], excess, budget.tool_result)]
    if not folding:
        return Plan(_flat(kept), summary if summarize else None, [])
    return Plan(_flat(kept), summary, dropped)


def with_summary(system: str, summary: Summary | None) -> str:
    """The system prompt carrying `summary`, labelled as the earlier conversation's."""
    if summary is None:
        return system
    return f"{system}\n\n{render_template('earlier_summary', summary=summary['text'])}"


def summary_tokens(summary: Summary | None) -> float:
    """What carrying `summary` in the system prompt costs (its label included)."""
    return 0.0 if summary is None else estimate_text(with_summary("", summary))


def _after(turns: list[Turn], summary: Summary | None) -> int | None:
    """The first turn after the one holding the summary's last message (None: not there)."""
    if summary is None:
        return 0
    for index, turn in enumerate(turns):
        if any(message.id == summary["through"] for message in turn):
            return index + 1 if index + 1 < len(turns) else None
    return 0  # what it covers has left the state (`out_of_view`): all that is left follows it


def out_of_view(
    messages: Sequence[AnyMessage],
    history: Sequence[BaseMessage],
    summary: Summary | None,
    *,
    summarize: bool,
) -> list[AnyMessage]:
    """The oldest of `messages` that no later request will carry, given the request just
    planned (`history` after its system prompt, carrying `summary`): with summaries, the
    ones `summary` covers; without, the ones before `history`."""
    if summarize:
        anchor = summary["through"] if summary is not None else None
        ids = [message.id for message in messages]
        return list(messages[: ids.index(anchor) + 1]) if anchor in ids else []
    first = history[0].id if history else None
    for index, message in enumerate(messages):
        if message.id == first:
            return list(messages[:index])
    return []


def _newest_costs(
    turns: Sequence[Turn], budget: Budget, wire: Wire, room: float
) -> list[tuple[Turn, float]]:
    """The newest turns as sent (results cut) with their costs, newest first, up to the
    first that overflows `room`: what lies beyond it is never sent."""
    newest: list[tuple[Turn, float]] = []
    total = 0.0
    for turn in reversed(turns):
        sent = [cut_result(message, budget.tool_result) for message in turn]
        cost = wire.cost(sent)
        newest.append((sent, cost))
        total += cost
        if total > room:
            break
    return newest


def _within(newest: list[tuple[Turn, float]], limit: float) -> int:
    """How many of the newest turns fit in `limit` (the newest always counts)."""
    total, keep = newest[0][1], 1
    for _, cost in newest[1:]:
        if total + cost > limit:
            break
        total += cost
        keep += 1
    return keep


def _flat(turns: Iterable[Sequence[AnyMessage]]) -> list[AnyMessage]:
    return [message for turn in turns for message in turn]
