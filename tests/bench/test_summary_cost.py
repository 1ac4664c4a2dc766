"""`python -m bench.summary_cost`: the summary's calls counted by the service's own planner."""

from __future__ import annotations

from bench.summary_cost import TURNS, thread_cost
from graphs.summary import PROMPTS
from prompts import load_prompts

load_prompts(("weather", *PROMPTS))


def test_a_thread_that_fits_its_window_makes_no_summary_call() -> None:
    cost = thread_cost(1_000_000, 100, summarize=True)
    assert cost.calls == 0 and cost.summary_tokens == 0


def test_a_thread_that_outgrows_its_window_folds_now_and_then_not_every_turn() -> None:
    cost = thread_cost(8192, 400, summarize=True)
    assert 0 < cost.calls < TURNS / 2
    assert cost.summary_tokens > 0


def test_with_the_summary_off_nothing_is_folded_and_more_history_is_sent_each_turn() -> None:
    on = thread_cost(8192, 100, summarize=True)
    off = thread_cost(8192, 100, summarize=False)
    assert off.calls == 0 and off.summary_tokens == 0
    assert off.agent_tokens > on.agent_tokens
