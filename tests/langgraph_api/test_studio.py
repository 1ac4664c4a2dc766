"""LangGraph Studio's own calls, as its browser page sends them, with AGENT_STUDIO=true:
the CORS preflight from its origin (private network included), and JSON bodies sent as
text/plain, taken from its origin only and only on LangGraph's API (both backends)."""

from __future__ import annotations

import json

import pytest

from tests.doubles.llm import ScriptedLLM, text
from tests.service.conftest import Api, Stream

pytestmark = pytest.mark.processes  # real servers

SERVER_ENV = {"AGENT_STUDIO": "true"}
STUDIO = "https://smith.langchain.com"


def test_studio_s_preflight_is_answered_for_its_origin_and_the_private_network(
    api: Api,
) -> None:
    preflight = api.http.options(
        "/threads/search",
        headers={
            "Origin": STUDIO,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-api-key",
            "Access-Control-Request-Private-Network": "true",
        },
    )
    other = api.http.options(
        "/threads/search",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
    )

    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == STUDIO
    assert preflight.headers["access-control-allow-private-network"] == "true"
    assert "x-api-key" in preflight.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-origin" not in other.headers


def test_studio_s_text_plain_bodies_run_the_agent_and_expose_what_it_reads(
    api: Api, llm: ScriptedLLM
) -> None:
    studio = {"Origin": STUDIO, "Content-Type": "text/plain;charset=UTF-8"}
    llm.script(text("晴。"))

    search = api.http.post(
        "/assistants/search", content=json.dumps({"graph_id": "weather"}), headers=studio
    )
    thread = api.http.post("/threads", content="{}", headers=studio).json()
    body = {
        "assistant_id": "weather",
        "input": {"messages": [{"role": "user", "content": "天气"}]},
        "stream_mode": ["values"],
    }
    stream = Stream(status=0)
    with api.http.stream(
        "POST",
        f"/threads/{thread['thread_id']}/runs/stream",
        content=json.dumps(body),
        headers=studio,
    ) as response:
        stream.status = response.status_code
        exposed = response.headers["access-control-expose-headers"].lower()
        location = response.headers["content-location"]
        events = [line for line in response.iter_lines() if line.startswith("event:")]

    assert search.status_code == 200 and search.json()[0]["graph_id"] == "weather"
    assert search.headers["access-control-allow-origin"] == STUDIO
    assert "x-pagination-total" in search.headers["access-control-expose-headers"].lower()
    assert stream.status == 200
    assert {"content-location", "location", "x-pagination-total"} <= {
        name.strip() for name in exposed.split(",")
    }
    assert location.startswith(f"/threads/{thread['thread_id']}/runs/")
    assert events[0] == "event: metadata" and events[-1] == "event: end"


def test_text_plain_is_refused_from_other_origins_and_on_the_agui_api(api: Api) -> None:
    body = json.dumps({"graph_id": "weather"})
    elsewhere = api.http.post(
        "/assistants/search",
        content=body,
        headers={"Origin": "https://evil.example", "Content-Type": "text/plain"},
    )
    no_origin = api.http.post(
        "/assistants/search", content=body, headers={"Content-Type": "text/plain"}
    )
    agui = api.http.post(
        "/api/chat",
        content=json.dumps({"graph": "weather", "message": "hi"}),
        headers={"Origin": STUDIO, "Content-Type": "text/plain"},
    )

    assert [r.status_code for r in (elsewhere, no_origin, agui)] == [415, 415, 415]
    assert {r.json()["code"] for r in (elsewhere, no_origin, agui)} == {"unsupported_media_type"}
