"""`GET /api/threads/{id}?limit=N&before=<messageId>`: a long thread read a page at a time."""

from __future__ import annotations

from typing import Any

import pytest

from tests.doubles.llm import ScriptedLLM, reasoning, text, tool_call
from tests.service.conftest import Api

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

Page = dict[str, Any]


def chat(api: Api, llm: ScriptedLLM, thread_id: str, *turns: str) -> None:
    """One `/api/chat` run per text, each answered with a text reply."""
    for n, words in enumerate(turns):
        llm.script(text(f"回答{n}"))
        reply = api.chat(graph="weather", threadId=thread_id, message=words)
        assert reply.status_code == 200, reply.text


def page(api: Api, thread_id: str, **params: Any) -> Page:
    response = api.http.get(f"/api/threads/{thread_id}", params=params)
    assert response.status_code == 200, response.text
    body: Page = response.json()
    return body


def texts(body: Page) -> list[str]:
    return [m.get("content") or m["role"] for m in body["messages"]]


def test_pages_read_back_the_whole_thread_newest_first_and_say_where_older_ones_continue(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    chat(api, llm, thread_id, "问题0", "问题1", "问题2", "问题3", "问题4", "问题5")
    whole = page(api, thread_id)  # no limit: the default (100) holds all 12
    assert whole["older"] is None
    assert len(whole["messages"]) == 12

    newest = page(api, thread_id, limit=4)
    assert texts(newest) == ["问题4", "回答4", "问题5", "回答5"]
    assert newest["older"] == {"before": newest["messages"][0]["id"], "count": 8}
    middle = page(api, thread_id, limit=4, before=newest["older"]["before"])
    assert texts(middle) == ["问题2", "回答2", "问题3", "回答3"]
    assert middle["older"]["count"] == 4
    first = page(api, thread_id, limit=4, before=middle["older"]["before"])
    assert texts(first) == ["问题0", "回答0", "问题1", "回答1"]
    assert first["older"] is None  # the start of the thread
    assert first["messages"] + middle["messages"] + newest["messages"] == whole["messages"]
    assert first["threadId"] == thread_id and first["graphId"] == "weather"

    # Before the first message there is nothing.
    empty = page(api, thread_id, before=first["messages"][0]["id"])
    assert empty["messages"] == [] and empty["older"] is None


def test_a_page_starts_earlier_rather_than_cut_a_call_from_its_result_or_a_reply_from_its_reasoning(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(
        tool_call("get_weather", {"location": "北京"}),
        reasoning("晴天，适合出门。", text("北京今天晴。")),
    )
    assert api.chat(graph="weather", threadId=thread_id, message="北京天气").status_code == 200
    whole = page(api, thread_id)["messages"]
    assert [m["role"] for m in whole] == ["user", "assistant", "tool", "reasoning", "assistant"]

    reply = page(api, thread_id, limit=1)
    assert [m["role"] for m in reply["messages"]] == ["reasoning", "assistant"]
    assert reply["older"] == {"before": whole[3]["id"], "count": 3}
    call = page(api, thread_id, limit=1, before=reply["older"]["before"])
    assert [m["role"] for m in call["messages"]] == ["assistant", "tool"]
    assert call["messages"][0]["toolCalls"][0]["id"] == call["messages"][1]["toolCallId"]
    assert call["older"] == {"before": whole[1]["id"], "count": 1}


def test_every_page_carries_the_pending_questions(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    chat(api, llm, thread_id, "你好", "再见")
    llm.script(tool_call("ask_input", {"message": "哪个城市？", "placeholder": "北京"}))
    asked = api.chat(graph="weather", threadId=thread_id, message="查天气")
    [pending] = asked.json()["interrupts"]

    newest = page(api, thread_id, limit=1)
    assert newest["interrupts"] == [pending]
    oldest = page(api, thread_id, limit=1, before=newest["older"]["before"])
    assert oldest["interrupts"] == [pending]


def test_a_bad_limit_or_an_unknown_cursor_is_refused_and_changes_nothing(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    chat(api, llm, thread_id, "你好")
    before = page(api, thread_id)
    path = f"/api/threads/{thread_id}"

    for limit in ("0", "1001", "-3", "ten", ""):
        refused = api.http.get(path, params={"limit": limit})
        assert refused.status_code == 422, (limit, refused.text)
        assert refused.json()["code"] == "invalid_request"
        assert "limit" in refused.json()["detail"]

    unknown = api.http.get(path, params={"before": "no-such-message"})
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "unknown_message"
    assert "no-such-message" in unknown.json()["detail"]
    # A message id of another thread names no message of this one.
    chat(api, llm, f"{thread_id}-other", "别的会话")
    other = page(api, f"{thread_id}-other")["messages"][0]["id"]
    assert api.http.get(path, params={"before": other}).json()["code"] == "unknown_message"

    missing = api.http.get(f"{path}-missing", params={"before": "x", "limit": 5})
    assert missing.status_code == 404 and missing.json()["code"] == "unknown_thread"
    assert page(api, thread_id) == before
