"""Every agent model call, sent within the model's context window.

`ContextBudget.call` is the agent node's one model call: it plans the request
(`graphs/context.py`), folds the turns the cut just dropped into the running summary
(`graphs/summary.py`), sends the request with its reply cap, and takes the provider's
count of the prompt in (`graphs/window.py`). When the provider refuses the request as
too long, the window is learned from the refusal and the request planned and sent
once more; a second refusal ends the run with `ContextTooLong`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from graphs.context import (
    MESSAGE_TOKENS,
    Budget,
    Summary,
    Wire,
    budget_for,
    estimate_text,
    out_of_view,
    plan_request,
    with_summary,
)
from graphs.model import ModelError
from graphs.settings import GraphSettings
from graphs.summary import PROMPTS, fold
from graphs.window import ContextWindow, Refusal, context_window, refusal_of
from prompts import load_prompts

logger = logging.getLogger(__name__)

CONTEXT_TOO_LONG = (
    "请求超出了模型的上下文窗口（{tokens} 个 token），按模型服务给出的上限缩短后仍被拒绝。"
    "请缩短消息，或开始新的对话。"
)
REQUEST_REFUSED = "request refused as too long; sending it again within %d tokens"


class ContextTooLong(ModelError):
    """The request was refused as too long even once cut to the window the refusal named."""


@dataclass(frozen=True)
class BoundModel:
    """A model as the agent node calls it: with its tools (`runnable`), without (`plain`,
    for the summary), and how it puts history on the wire."""

    runnable: Runnable[LanguageModelInput, BaseMessage]
    plain: BaseChatModel
    wire: Wire


@dataclass(frozen=True)
class Answer:
    """The model's reply, the summary to keep when this call made a new one, and the
    oldest messages no later request will carry (`context.out_of_view`)."""

    message: AIMessage
    summary: Summary | None
    out_of_view: list[AnyMessage]

    @property
    def state(self) -> dict[str, Any]:
        """The state update beside the reply: the new summary, if any."""
        return {} if self.summary is None else {"summary": self.summary}


@dataclass(frozen=True)
class _Request:
    """One planned request: its messages, the budget it keeps, its estimate, its summary."""

    messages: Sequence[BaseMessage]
    budget: Budget
    estimated: float
    summary: Summary | None


@dataclass(frozen=True)
class _Refused:
    """A request the provider refused as too long."""

    refusal: Refusal
    error: openai.APIStatusError


class ContextBudget:
    """The context budget of one graph's model calls (see the module's docstring)."""

    def __init__(self, settings: GraphSettings) -> None:
        load_prompts(PROMPTS)  # file reads belong to start-up, not to a run
        self._settings = settings

    async def call(
        self,
        model: BoundModel,
        system: str,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        config: RunnableConfig,
    ) -> Answer:
        """Send `messages` and the state's `summary` to `model` within the window."""
        windows = context_window(self._settings)
        kept = summary if self._settings.agent_history_summary else None
        request = await self._prepare(model, system, messages, kept, windows, config)
        sent = await self._send(model, request, windows, config)
        if isinstance(sent, _Refused):
            used = request.budget
            windows.learn(
                sent.refusal, used=used.window, reply=used.reply, estimated=request.estimated
            )
            logger.info(REQUEST_REFUSED, (await windows.window()).tokens)
            request = await self._prepare(model, system, messages, request.summary, windows, config)
            sent = await self._send(model, request, windows, config)
            if isinstance(sent, _Refused):
                window = request.budget.window
                limit = window.input_limit or window.tokens
                raise ContextTooLong(CONTEXT_TOO_LONG.format(tokens=limit)) from sent.error
        left = out_of_view(
            messages,
            request.messages[1:],
            request.summary,
            summarize=self._settings.agent_history_summary,
        )
        return Answer(sent, request.summary if request.summary != kept else None, left)

    async def _prepare(
        self,
        model: BoundModel,
        system: str,
        messages: Sequence[AnyMessage],
        summary: Summary | None,
        windows: ContextWindow,
        config: RunnableConfig,
    ) -> _Request:
        """The request for `messages`, with the turns its cut drops folded into the summary."""
        budget = budget_for(self._settings, await windows.window(), windows.ratio)
        overhead = MESSAGE_TOKENS + estimate_text(system) + estimate_text(model.wire.fixed)
        plan = plan_request(
            messages,
            summary,
            budget=budget,
            wire=model.wire,
            overhead=overhead,
            summarize=self._settings.agent_history_summary,
        )
        carried = plan.summary
        if plan.fold:
            carried = await fold(model.plain, plan.summary, plan, budget, config) or carried
        request = [SystemMessage(with_summary(system, carried)), *plan.history]
        return _Request(request, budget, _estimate(request, model.wire), carried)

    async def _send(
        self, model: BoundModel, request: _Request, windows: ContextWindow, config: RunnableConfig
    ) -> AIMessage | _Refused:
        """The reply to `request`, or the provider's refusal of it as too long."""
        try:
            reply = await model.runnable.ainvoke(
                request.messages, config, max_tokens=request.budget.reply
            )
        except openai.APIStatusError as exc:
            refusal = refusal_of(exc)
            if refusal is None:
                raise
            return _Refused(refusal, exc)
        assert isinstance(reply, AIMessage)
        _calibrate(windows, request.estimated, reply)
        return reply


def _estimate(request: Sequence[BaseMessage], wire: Wire) -> float:
    """Estimated tokens of the whole request as sent."""
    system, *history = request
    return MESSAGE_TOKENS + estimate_text(str(system.content) + wire.fixed) + wire.cost(history)


def _calibrate(windows: ContextWindow, estimated: float, reply: AIMessage) -> None:
    usage = reply.usage_metadata
    if usage and usage.get("input_tokens"):
        windows.calibrate(estimated, int(usage["input_tokens"]))
