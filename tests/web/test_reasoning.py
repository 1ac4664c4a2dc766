"""A reply's reasoning in the browser: a folded 思考过程 block above its answer, streamed
live, kept by the thread (a reload shows it) and rebuilt, not repeated, by a rejoined run."""

from __future__ import annotations

import pytest

from playwright.sync_api import Locator, expect

from tests.doubles.llm import ScriptedLLM, reasoning, text, tool_call
from tests.web.conftest import Chat

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

# Streamed two characters every 50 ms: about two seconds of thinking before the answer.
SLOW_THOUGHT = (
    "用户想知道北京今天的天气。北京在华北，这个季节早晚温差大，"
    "回答时要提醒带外套；不需要查别的城市，直接给出结论和建议就好。"
)
ANSWER = "北京今天晴，早晚偏凉，出门记得带外套。"
LOOK_FIRST = "先查北京的天气，再根据结果回答。"
THEN_ANSWER = "查到了：晴，二十五度。可以直接回答。"
SLOW_ANSWER = (
    "北京今天晴，白天气温二十五度左右，风力不大，空气质量良好，适合出门散步。"
    "傍晚以后气温下降明显，早晚温差接近十度，出门记得带一件外套。"
    "明天开始转为多云，后天可能有小雨，周末之前天气总体平稳，出行不受影响。"
)

# One condition, checked as a whole on every frame: the thought is streaming, open, its
# text shows in the body, and no answer has started yet.
STREAMING_OPEN = """() => {
  const block = document.querySelector(".reasoning");
  return block !== null
    && block.dataset.state === "streaming"
    && block.open
    && block.querySelector(".reasoning-body").textContent.length > 0
    && block.querySelector(".reasoning-preview").textContent === ""
    && document.querySelector(".msg-assistant") === null;
}"""
# The same, folded by the reader: the newest words show in the summary instead.
STREAMING_FOLDED = """() => {
  const block = document.querySelector(".reasoning");
  return block !== null
    && block.dataset.state === "streaming"
    && !block.open
    && block.querySelector(".reasoning-preview").textContent.length > 0;
}"""


def thoughts(chat: Chat) -> Locator:
    return chat.page.locator(".reasoning")


def order(chat: Chat) -> list[str]:
    """What the conversation shows, top to bottom, by kind."""
    kinds: list[str] = chat.page.evaluate(
        """() => [...document.querySelectorAll("#messages > *")].map((el) =>
          el.classList.contains("reasoning") ? "reasoning"
          : el.classList.contains("tool") ? "tool"
          : el.classList.contains("msg-user") ? "user"
          : el.classList.contains("msg-assistant") ? "answer"
          : el.className)"""
    )
    return kinds


def expect_folded(block: Locator, thought: str) -> None:
    """`block` is a closed 思考过程 summary holding `thought`, whose text stays hidden."""
    expect(block).to_have_attribute("data-state", "done")
    expect(block).not_to_have_attribute("open", "")
    expect(block.locator(".reasoning-title")).to_have_text("思考过程")
    expect(block.locator(".reasoning-body")).to_have_text(thought)
    expect(block.locator(".reasoning-body")).to_be_hidden()


def test_a_replys_reasoning_streams_open_above_the_answer_folds_when_done_and_unfolds_on_a_click(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(reasoning(SLOW_THOUGHT, text(ANSWER, chunk_size=2, delay_s=0.05)))
    chat.open("weather")
    chat.send("北京今天天气怎么样？")

    # Live: the thought streams into an open block before any answer text.
    chat.page.wait_for_function(STREAMING_OPEN)
    chat.shot("reasoning-streaming")
    expect(thoughts(chat).locator(".reasoning-state")).to_have_text("思考中")

    expect(chat.answers).to_have_text([ANSWER])
    chat.wait_idle()
    expect(thoughts(chat)).to_have_count(1)
    expect_folded(thoughts(chat), SLOW_THOUGHT)
    expect(thoughts(chat).locator(".reasoning-state")).to_be_hidden()
    assert order(chat) == ["user", "reasoning", "answer"]
    expect(chat.answers).not_to_contain_text("华北")  # the thought is no part of the answer
    chat.shot("reasoning-folded")

    thoughts(chat).locator(".reasoning-head").click()
    expect(thoughts(chat)).to_have_attribute("open", "")
    expect(thoughts(chat).locator(".reasoning-body")).to_be_visible()
    expect(thoughts(chat).locator(".reasoning-body")).to_have_text(SLOW_THOUGHT)
    chat.shot("reasoning-unfolded")

    thoughts(chat).locator(".reasoning-head").click()
    expect(thoughts(chat).locator(".reasoning-body")).to_be_hidden()
    expect(chat.errors).to_have_count(0)


def test_a_thought_the_reader_folds_while_it_streams_shows_its_newest_words_and_stays_folded(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(reasoning(SLOW_THOUGHT, text(ANSWER, chunk_size=2, delay_s=0.05)))
    chat.open("weather")
    chat.send("北京今天天气怎么样？")

    chat.page.wait_for_function(STREAMING_OPEN)
    thoughts(chat).locator(".reasoning-head").click()
    chat.page.wait_for_function(STREAMING_FOLDED)
    chat.shot("reasoning-folded-by-reader")

    expect(chat.answers).to_have_text([ANSWER])
    chat.wait_idle()
    expect_folded(thoughts(chat), SLOW_THOUGHT)
    expect(thoughts(chat).locator(".reasoning-preview")).to_have_text("")
    expect(chat.errors).to_have_count(0)


def test_after_a_reload_the_thread_shows_each_replys_reasoning_folded_before_what_it_led_to(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        reasoning(LOOK_FIRST, tool_call("get_weather", {"location": "北京"})),
        reasoning(THEN_ANSWER, text(ANSWER)),
    )
    chat.open("weather")
    chat.send("北京天气怎么样？")
    expect(chat.answers).to_have_text([ANSWER])
    chat.wait_idle()
    expect(thoughts(chat)).to_have_count(2)
    live = order(chat)

    chat.page.reload()

    expect(chat.answers).to_have_text([ANSWER])
    expect(thoughts(chat)).to_have_count(2)
    expect_folded(thoughts(chat).first, LOOK_FIRST)
    expect_folded(thoughts(chat).last, THEN_ANSWER)
    expect(chat.tool("get_weather")).to_have_attribute("data-state", "done")
    assert order(chat) == live == ["user", "reasoning", "tool", "reasoning", "answer"]
    chat.shot("reasoning-after-reload")
    expect(chat.errors).to_have_count(0)


def test_a_run_rejoined_after_a_reload_rebuilds_its_reasoning_without_repeating_it(
    chat: Chat, llm: ScriptedLLM
) -> None:
    llm.script(
        reasoning(LOOK_FIRST, tool_call("get_weather", {"location": "北京"})),
        reasoning(THEN_ANSWER, text(SLOW_ANSWER, chunk_size=2, delay_s=0.05)),
    )
    chat.open("weather")
    chat.send("北京天气怎么样？")
    expect(chat.tool("get_weather")).to_have_attribute("data-state", "done")
    expect(chat.answers.last).to_contain_text(SLOW_ANSWER[:4])

    # The first reply's reasoning is in the thread now; the run replays it as well.
    chat.page.reload()

    expect(chat.page.locator(".msg-assistant.streaming")).to_have_count(1)
    expect(chat.answers).to_have_text([SLOW_ANSWER])
    chat.wait_idle()
    expect(thoughts(chat)).to_have_count(2)
    expect_folded(thoughts(chat).first, LOOK_FIRST)
    expect_folded(thoughts(chat).last, THEN_ANSWER)
    assert order(chat) == ["user", "reasoning", "tool", "reasoning", "answer"]
    expect(chat.errors).to_have_count(0)

    # The finished thread reads back the same.
    chat.page.reload()
    expect(chat.answers).to_have_text([SLOW_ANSWER])
    expect(thoughts(chat)).to_have_count(2)
    expect_folded(thoughts(chat).first, LOOK_FIRST)
    expect_folded(thoughts(chat).last, THEN_ANSWER)
    assert order(chat) == ["user", "reasoning", "tool", "reasoning", "answer"]
