"""The running summary of the turns a thread's requests no longer carry.

`fold` asks the model, in one call that never streams into the run's answer
(LangGraph's `nostream` tag), to fold the dropped turns into the previous summary
(`prompts/summarize.md`). The result is kept in the graph's state (`context.Summary`),
so it is made once per cut, and sent labelled as a summary of the earlier
conversation (`prompts/earlier_summary.md`). A failed call is logged and costs the
request only the summary: the turns stay dropped, and the next request tries again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Final

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.constants import TAG_NOSTREAM

from graphs.context import (
    Budget,
    Plan,
    Summary,
    cut_text,
    estimate_text,
    text_of,
)
from graphs.model import ModelError
from prompts import render_template

logger = logging.getLogger(__name__)

PROMPTS: Final = ("summarize", "earlier_summary")
RUN_NAME: Final = "history_summary"
# A tool result in the summarizer's material keeps this share of its usual limit.
RESULT_SHARE: Final = 0.25
NO_SUMMARY_YET: Final = "（无）"

SUMMARY_MADE = "history summary of %d messages: %d characters"
SUMMARY_FAILED = "history summary not made (%s): this request leaves those turns out"

USER_LINE = "用户：{text}"
ASSISTANT_LINE = "助手：{text}"
CALL_LINE = "助手调用工具 {name}，参数 {args}"
RESULT_LINE = "工具 {name} 的结果：{text}"


async def fold(
    model: BaseChatModel,
    previous: Summary | None,
    plan: Plan,
    budget: Budget,
    config: RunnableConfig,
) -> Summary | None:
    """`plan.fold` folded into `previous` by one model call (None: the call failed)."""
    through = plan.fold[-1].id
    assert through is not None  # plan_request folds only what it can anchor
    prompt = _prompt(previous, plan.fold, budget)
    quiet = model.with_config(tags=[TAG_NOSTREAM], run_name=RUN_NAME)
    try:
        reply = await quiet.ainvoke([HumanMessage(prompt)], config, max_tokens=budget.summary)
    except (openai.APIError, ModelError) as exc:
        logger.warning(SUMMARY_FAILED, type(exc).__name__)
        return None
    text = reply.text.strip() if isinstance(reply, AIMessage) else ""
    if not text:
        logger.warning(SUMMARY_FAILED, "empty reply")
        return None
    logger.info(SUMMARY_MADE, len(plan.fold), len(text))
    return Summary(text=text, through=through)


def _prompt(previous: Summary | None, dropped: Sequence[AnyMessage], budget: Budget) -> str:
    """The summarizer's prompt, its material cut (oldest lines first) to fit the window."""
    previous_text = previous["text"] if previous else NO_SUMMARY_YET
    empty = render_template("summarize", previous=previous_text, conversation="")
    room = budget.prompt - estimate_text(empty)  # the summary's cap is below the reply's
    lines: list[str] = []
    for line in _newest_lines(dropped, budget):
        room -= estimate_text(line) + 1
        if room < 0:
            break
        lines.append(line)
    conversation = "\n".join(reversed(lines))
    return render_template("summarize", previous=previous_text, conversation=conversation)


def _newest_lines(dropped: Sequence[AnyMessage], budget: Budget) -> Iterator[str]:
    for message in reversed(dropped):
        yield from reversed(_lines(message, budget))


def _lines(message: AnyMessage, budget: Budget) -> list[str]:
    text = text_of(message.content).strip()
    if isinstance(message, HumanMessage):
        return [USER_LINE.format(text=text)]
    if isinstance(message, ToolMessage):
        cut = cut_text(text, budget.tool_result * RESULT_SHARE)
        return [RESULT_LINE.format(name=message.name or "?", text=cut)]
    if isinstance(message, AIMessage):
        lines = [ASSISTANT_LINE.format(text=text)] if text else []
        for call in message.tool_calls:
            args = json.dumps(call["args"], ensure_ascii=False)
            lines.append(CALL_LINE.format(name=call["name"], args=args))
        return lines
    return [text] if text else []
