"""Hardening: failures named for what happened (an unreadable model reply is a model
error), and the door closed to pages of other sites (a body must be JSON, the Host must be
one this server answers to, no redirect to the Host a request named) while a page of an
allowed origin may rejoin a run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.settings import Settings
from tests.doubles.llm import ScriptedLLM, garbage, hang, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import (
    API_KEY,
    SQLITE,
    UI_ORIGIN,
    Api,
    run_body,
    server_env,
    wait_until,
)
from tests.support.processes import REACT_AGENT, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser


def test_a_model_endpoint_answering_garbage_is_a_model_error_not_an_internal_one(
    api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(garbage())
    streamed = api.run("weather", run_body(thread_id, ("u1", "你好")))
    llm.script(garbage())
    whole = api.chat(graph="weather", threadId=f"{thread_id}-chat", message="你好")

    assert (streamed.last["type"], streamed.last["code"]) == ("RUN_ERROR", "model_error")
    assert "OPENAI_BASE_URL" in streamed.last["message"]
    assert (whole.status_code, whole.json()["code"]) == (502, "model_error")

    llm.script(text("好了。"))
    again = api.run("weather", run_body(thread_id, ("u1", "你好"), ("u2", "再试")))
    assert again.last["outcome"] == {"type": "success"}


# --- the door, with no API key (the default) ----------------------------------------
#
# A page on any site can send a visitor's browser to this server. It may send "simple"
# requests without asking (no CORS preflight): GET, and POST with a text, form or
# multipart body. And it may rebind its own name to this server's address, after which
# the browser lets it read the answers, addressed to its own name in `Host`.

EVIL_ORIGIN = "http://evil.example"
# The Content-Types a cross-origin page may POST without a preflight (the CORS spec's).
SIMPLE_TYPES = (
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
)


@pytest.fixture(scope="module")
def open_server(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server as it starts by default: no AGENT_API_KEY (CORS open to `UI_ORIGIN` only).
    On SQLite only: these guards are HTTP's, no database takes part in them."""
    data_dir = tmp_path_factory.mktemp("open")
    env = server_env(_llm_server, _meteo_server, data_dir, backend=SQLITE)
    del env["AGENT_API_KEY"]
    process = ServerProcess(env)
    yield process
    process.stop()


@pytest.fixture
def open_api(open_server: ServerProcess) -> Iterator[Api]:
    client = Api(open_server)
    client.http.headers.pop("Authorization")
    yield client
    client.close()


def status_of(api: Api, thread_id: str, run_id: str) -> str:
    found: str = api.http.get(f"/api/threads/{thread_id}/runs/{run_id}").json()["status"]
    return found


def test_a_page_on_another_site_can_neither_start_nor_cancel_a_run_with_a_simple_post(
    open_api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(hang(30, partial="我"))
    body = run_body(thread_id, ("u1", "慢慢想"))
    open_api.run("weather", body, until=lambda e: e["type"] == "TEXT_MESSAGE_CONTENT")
    cancel = f"/api/threads/{thread_id}/runs/{body['runId']}/cancel"
    chat = json.dumps({"graph": "weather", "threadId": f"{thread_id}-chat", "message": "hi"})
    agui = json.dumps(run_body(f"{thread_id}-agui", ("u1", "hi")))

    refused = [
        open_api.http.post(
            path, content=content, headers={"Content-Type": kind, "Origin": EVIL_ORIGIN}
        )
        for kind in SIMPLE_TYPES
        for path, content in ((cancel, ""), ("/api/chat", chat), ("/api/agents/weather", agui))
    ]

    assert [(r.status_code, r.json()["code"]) for r in refused] == [
        (415, "unsupported_media_type")
    ] * len(refused)
    assert all("application/json" in r.json()["detail"] for r in refused)
    assert status_of(open_api, thread_id, body["runId"]) == "running"
    for refused_thread in (f"{thread_id}-chat", f"{thread_id}-agui"):
        listed = open_api.http.get(f"/api/threads/{refused_thread}/runs")
        assert listed.status_code == 404, "a refused request leaves no thread behind"
    assert len(llm.requests) == 1, "no other run asked the model"

    # The web UI's and the terminal's cancel: a POST with no body and no Content-Type.
    cancelled = open_api.http.post(cancel)

    assert cancelled.status_code == 202
    wait_until(
        "the run to stop", lambda: status_of(open_api, thread_id, body["runId"]) != "running"
    )
    assert status_of(open_api, thread_id, body["runId"]) == "cancelled"


def test_json_bodies_may_say_their_charset_or_a_json_suffix_and_a_body_without_a_type_is_refused(
    open_api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("好的。"))
    chat = {"graph": "weather", "threadId": thread_id, "message": "你好"}
    http = open_api.http

    with_charset = http.post(
        "/api/chat",
        content=json.dumps(chat).encode(),
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    renamed = http.patch(
        f"/api/threads/{thread_id}",
        content=b'{"title": "\xe6\x96\xb0\xe5\x90\x8d"}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    untyped = http.post("/api/chat", content=json.dumps(chat).encode())
    rename_as_text = http.patch(
        f"/api/threads/{thread_id}",
        content=b'{"title": "x"}',
        headers={"Content-Type": "text/plain"},
    )
    run_id = with_charset.json()["runId"]
    cancel_with_json = http.post(f"/api/threads/{thread_id}/runs/{run_id}/cancel", json={})

    assert with_charset.status_code == 200, with_charset.text
    assert (renamed.status_code, renamed.json()["title"]) == (200, "新名")
    assert (untyped.status_code, untyped.json()["code"]) == (415, "unsupported_media_type")
    assert "Content-Type: application/json" in untyped.json()["detail"]
    assert (rename_as_text.status_code, rename_as_text.json()["code"]) == (
        415,
        "unsupported_media_type",
    )
    # A JSON Content-Type on the body-less cancel is fine: the run has simply ended.
    assert (cancel_with_json.status_code, cancel_with_json.json()["code"]) == (409, "run_finished")


def test_a_request_addressed_to_another_host_is_refused_so_a_rebinding_page_reads_nothing(
    open_api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("好的。"))
    assert open_api.chat(graph="weather", threadId=thread_id, message="秘密").status_code == 200
    port = open_api.server.port
    http = open_api.http

    def get(path: str, host: str) -> httpx.Response:
        return http.get(path, headers={"Host": host})

    rebound = {
        path: get(path, f"evil.example:{port}")
        for path in ("/api/threads", f"/api/threads/{thread_id}", "/", "/metrics", "/openapi.json")
    }
    local = {
        host: get("/api/threads", host)
        for host in (f"localhost:{port}", "LOCALHOST", "127.0.0.1", f"[::1]:{port}")
    }
    probes = [get(path, "10.1.2.3:8000") for path in ("/healthz", "/readyz")]

    for path, response in rebound.items():
        assert (response.status_code, response.json()["code"]) == (400, "bad_host"), path
        assert "AGENT_ALLOWED_HOSTS" in response.json()["detail"]
        assert "秘密" not in response.text
    for host, response in local.items():
        assert response.status_code == 200, host
        assert thread_id in {t["threadId"] for t in response.json()}, host
    # Orchestrators probe by the pod's address: the probes answer whatever the Host.
    assert [p.status_code for p in probes] == [200, 200]


def test_a_path_with_a_trailing_slash_is_not_found_rather_than_redirected_to_the_host_it_named(
    open_api: Api,
) -> None:
    slashed = open_api.http.get("/api/threads/")
    slashed_post = open_api.http.post("/api/chat/", json={"graph": "weather", "message": "hi"})

    assert (slashed.status_code, slashed.json()["code"]) == (404, "not_found")
    assert "location" not in slashed.headers
    assert (slashed_post.status_code, slashed_post.json()["code"]) == (404, "not_found")
    assert "location" not in slashed_post.headers


def test_agent_allowed_hosts_names_the_hosts_served_and_a_star_serves_any(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path
) -> None:
    def serve(allowed: str) -> ServerProcess:
        return ServerProcess(
            server_env(
                _llm_server,
                _meteo_server,
                tmp_path / allowed,
                backend=SQLITE,
                AGENT_ALLOWED_HOSTS=allowed,
            )
        )

    def get(server: ServerProcess, path: str, host: str) -> httpx.Response:
        headers = {"Host": host, "Authorization": f"Bearer {API_KEY}"}
        return httpx.get(f"{server.url}{path}", headers=headers, timeout=10)

    named = serve("agent.example, Other.Example.:8443")
    try:
        served = [get(named, "/api/graphs", h) for h in ("agent.example:443", "other.example")]
        local = get(named, "/api/graphs", f"127.0.0.1:{named.port}")
    finally:
        named.stop()
    anyone = serve("*")
    try:
        elsewhere = get(anyone, "/api/graphs", "evil.example")
        slashed = get(anyone, "/api/graphs/", "evil.example")
    finally:
        anyone.stop()

    assert [r.status_code for r in served] == [200, 200]
    assert (local.status_code, local.json()["code"]) == (400, "bad_host"), "the list replaces"
    assert elsewhere.status_code == 200
    assert (slashed.status_code, "location" in slashed.headers) == (404, False)


def test_a_server_bound_to_an_address_answers_requests_addressed_to_that_address(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path
) -> None:
    env = server_env(_llm_server, _meteo_server, tmp_path, backend=SQLITE, HOST="127.0.0.1")
    # `--host` wins over HOST, for the Host allow-list's default too.
    bound = ServerProcess(env, command=(REACT_AGENT, "serve", "--host", "127.0.0.2", "--port", "0"))
    try:
        addressed = httpx.get(
            f"{bound.url}/api/graphs", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10
        )
        elsewhere = httpx.get(
            f"{bound.url}/api/graphs",
            headers={"Authorization": f"Bearer {API_KEY}", "Host": "evil.example"},
            timeout=10,
        )
    finally:
        bound.stop()

    assert bound.host == "127.0.0.2"
    assert addressed.status_code == 200
    assert (elsewhere.status_code, elsewhere.json()["code"]) == (400, "bad_host")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", {"localhost", "127.0.0.1", "[::1]"}),
        ("192.168.1.5", {"localhost", "127.0.0.1", "[::1]", "192.168.1.5"}),
        ("::1", {"localhost", "127.0.0.1", "[::1]"}),
        # Every interface: the names it is reached by are unknown; the loopback ones only.
        ("0.0.0.0", {"localhost", "127.0.0.1", "[::1]"}),
        ("::", {"localhost", "127.0.0.1", "[::1]"}),
    ],
)
def test_unset_the_allowed_hosts_are_the_bind_address_and_the_loopback_names(
    host: str, allowed: set[str]
) -> None:
    assert Settings(_env_file=None, host=host).allowed_hosts == allowed
    assert Settings(_env_file=None, host=host, agent_allowed_hosts="").allowed_hosts == allowed


# --- a page of the allowed origin (AGENT_CORS_ORIGINS) ---------------------------------


def test_a_page_of_the_allowed_origin_may_rejoin_a_run_with_last_event_id(
    open_api: Api, llm: ScriptedLLM, thread_id: str
) -> None:
    llm.script(text("你好呀。"))
    body = run_body(thread_id, ("u1", "你好"))
    whole = open_api.run("weather", body)
    stream = f"{open_api.server.url}/api/threads/{thread_id}/runs/{body['runId']}/stream"

    preflight = httpx.options(
        stream,
        headers={
            "Origin": UI_ORIGIN,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, last-event-id",
        },
    )
    rejoined = httpx.get(stream, headers={"Origin": UI_ORIGIN, "Last-Event-ID": "2"}, timeout=10)

    assert preflight.status_code == 200, preflight.text
    allowed = {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    assert {"authorization", "last-event-id"} <= allowed
    assert preflight.headers["access-control-allow-origin"] == UI_ORIGIN
    assert rejoined.status_code == 200
    assert rejoined.headers["access-control-allow-origin"] == UI_ORIGIN
    ids = [int(line[3:]) for line in rejoined.text.splitlines() if line.startswith("id:")]
    assert ids == [i for i in whole.ids if i is not None and i > 2]
