"""What the running summary costs: model calls and input tokens per 100 turns (issue 26).

    python -m bench.summary_cost

A thread of 100 turns (a user message and a reply of the same length) is planned turn
after turn with the service's own planner (`graphs/context.py` `plan_request`) and
summary prompt (`graphs/summary.py`), for each window and turn length in `CASES`.
Whenever the plan folds turns, one summary call is counted, its prompt estimated as the
service builds it, and the summary assumed to come back at its full cap (the dearest
case). No model is called: what is counted is what the service would send, in the
planner's own estimate (calibrated tokens are the provider's; the ratio is 1 here).
The same thread planned with the summary off gives the baseline the extra tokens are
measured against.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage

from graphs.context import (
    MESSAGE_TOKENS,
    Summary,
    Wire,
    budget_for,
    estimate_message,
    estimate_text,
    plan_request,
    summary_tokens,
)
from graphs.settings import GraphSettings
from graphs.summary import PROMPTS, _prompt
from graphs.window import Window
from prompts import load_prompts, render_template

TURNS = 100
CASES = [(8192, 100), (8192, 400), (32768, 400), (32768, 1500)]  # (window, chars a message)
FILLER = "北京今天多云，最高气温二十三度，东南风三级，夜间有小雨。"


@dataclass(frozen=True)
class Cost:
    """What one thread of `TURNS` turns sent: summary calls and estimated input tokens."""

    calls: int
    agent_tokens: float
    summary_tokens: float


def _text(chars: int, n: int) -> str:
    return (f"{n}. " + FILLER * (chars // len(FILLER) + 1))[:chars]


def thread_cost(window: int, chars: int, *, summarize: bool) -> Cost:
    """Plan `TURNS` turns of `chars`-character messages in `window` tokens."""
    settings = GraphSettings(agent_context_tokens=window, agent_history_summary=summarize)
    budget = budget_for(settings, Window(window, "AGENT_CONTEXT_TOKENS"), 1.0)
    system = render_template("weather")
    overhead = MESSAGE_TOKENS + estimate_text(system)
    messages: list[AnyMessage] = []
    summary: Summary | None = None
    calls, agent, folded = 0, 0.0, 0.0
    for n in range(TURNS):
        messages.append(HumanMessage(_text(chars, n), id=f"u{n}"))
        plan = plan_request(
            messages, summary, budget=budget, wire=Wire(), overhead=overhead, summarize=summarize
        )
        if plan.fold:
            calls += 1
            folded += estimate_text(_prompt(plan.summary, plan.fold, budget)) + MESSAGE_TOKENS
            cap_text = FILLER * (budget.summary // len(FILLER) + 1)
            summary = Summary(text=cap_text[: budget.summary], through=plan.fold[-1].id or "")
        else:
            summary = plan.summary
        agent += overhead + summary_tokens(summary) + sum(map(estimate_message, plan.history))
        messages.append(AIMessage(_text(chars, n), id=f"a{n}"))
    return Cost(calls, agent, folded)


def main() -> None:
    load_prompts(("weather", *PROMPTS))
    print(f"Per {TURNS} turns (a user message and a reply of the same length each):\n")
    print(
        "| window | chars a message | summary calls | summary input tokens | "
        "agent input tokens (summary on) | (summary off) | all input, on / off |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for window, chars in CASES:
        on = thread_cost(window, chars, summarize=True)
        off = thread_cost(window, chars, summarize=False)
        ratio = (on.agent_tokens + on.summary_tokens) / off.agent_tokens
        print(
            f"| {window:,} | {chars:,} | {on.calls} | {on.summary_tokens:,.0f} | "
            f"{on.agent_tokens:,.0f} | {off.agent_tokens:,.0f} | {ratio:.3f}x |"
        )


if __name__ == "__main__":
    main()
