"""Users: each signs in with their own key or token and reaches only their own threads.

One server per backend with every way in configured: AGENT_API_KEY (the admin), keys made
by `react-agent users add` (run as a process on the server's database), an identity
provider's tokens (`tests.doubles.oidc`), and a proxy header trusted only from an address
the test is not at. Every route of the server's own OpenAPI document is walked: a route
added without the check fails here.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.oidc import (
    AUDIENCE,
    ISSUER,
    IdentityProvider,
    hmac_with_public_key,
    unsigned,
)
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import (
    API_KEY,
    Backend,
    run_body,
    server_env,
    wait_until,
)
from tests.support.processes import ServerProcess
from tests.support.user_keys import add_user

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

LEASE_S = 1.0  # how long a replica may keep a revoked key: the test waits this, not 30 s
PROXY_HEADER = "X-Forwarded-User"
# Routes every caller may ask without signing in.
PUBLIC = {"GET /healthz", "GET /readyz"}
WRONG_KEY = "ra_0123456789ab_" + "x" * 43


@dataclass
class Setup:
    server: ServerProcess
    env: dict[str, str]
    idp: IdentityProvider

    def users(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`react-agent users ARGS` as a process on the server's database, as it ended."""
        return subprocess.run(
            [sys.executable, "-m", "app.main", "users", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def new_key(self, name: str, *flags: str) -> str:
        return add_user(self.env["AGENT_DB"], name, admin="--admin" in flags)

    def client(self, credential: str | None = None, **headers: str) -> httpx.Client:
        if credential is not None:
            headers["Authorization"] = f"Bearer {credential}"
        return httpx.Client(base_url=self.server.url, headers=headers, timeout=30.0)


@pytest.fixture(scope="module")
def setup(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[Setup]:
    data_dir = tmp_path_factory.mktemp("users")
    with IdentityProvider() as idp:
        env = server_env(
            _llm_server,
            _meteo_server,
            data_dir,
            backend=backend,
            AGENT_JWT_JWKS_URL=idp.jwks_url,
            AGENT_JWT_ISSUER=ISSUER,
            AGENT_JWT_AUDIENCE=AUDIENCE,
            AGENT_JWT_ADMIN_CLAIM="roles=agent-admin",
            AGENT_TRUSTED_USER_HEADER=PROXY_HEADER,
            AGENT_TRUSTED_PROXIES="10.20.30.0/24",  # not where the test connects from
            AGENT_RUN_LEASE_S=str(LEASE_S),
            AGENT_USER_RPM="",
        )
        server = ServerProcess(env)
        try:
            yield Setup(server, env, idp)
        finally:
            server.stop()


@pytest.fixture(autouse=True)
def _model_answers(llm: ScriptedLLM) -> None:
    llm.fallback = lambda body: text("好的。")


@dataclass
class People:
    alice: httpx.Client
    bob: httpx.Client
    admin: httpx.Client
    alice_thread: str
    alice_run: str


@pytest.fixture(scope="module")
def people(setup: Setup, _llm_server: ScriptedLLM) -> Iterator[People]:
    alice = setup.client(setup.new_key(f"alice-{uuid.uuid4().hex[:6]}"))
    bob = setup.client(setup.new_key(f"bob-{uuid.uuid4().hex[:6]}"))
    admin = setup.client(API_KEY)
    thread_id = f"t-alice-{uuid.uuid4().hex[:8]}"
    _llm_server.fallback = lambda body: text("好的。")
    reply = alice.post(
        "/api/chat", json={"graph": "weather", "threadId": thread_id, "message": "你好"}
    )
    assert reply.status_code == 200, reply.text
    yield People(alice, bob, admin, thread_id, reply.json()["runId"])
    for client in (alice, bob, admin):
        client.close()


def operations(client: httpx.Client) -> list[tuple[str, str]]:
    """Every (method, path template) the server documents."""
    schema = client.get("/openapi.json").json()
    return [
        (method.upper(), path)
        for path, methods in schema["paths"].items()
        for method in methods
        if method in {"get", "post", "patch", "delete", "put"}
    ]


def call(
    client: httpx.Client, method: str, template: str, thread_id: str, run_id: str
) -> httpx.Response:
    """One request to a route, its ids filled in, with a body its route can read."""
    ids = {"graph_id": "weather", "assistant_id": "weather", "thread_id": thread_id}
    path = template.format_map(defaultdict(lambda: "x", ids, run_id=run_id))
    body: dict[str, Any] | None = None
    if template == "/api/agents/{graph_id}":
        body = run_body(thread_id, (f"m-{uuid.uuid4().hex[:6]}", "天气？"))
    elif template == "/api/chat":
        body = {"graph": "weather", "threadId": thread_id, "message": "天气？"}
    elif method == "PATCH":
        body = {"title": "改个名字"}
    if body is None:
        return client.request(method, path)
    return client.request(method, path, json=body)


def test_every_route_but_the_probes_refuses_a_request_without_a_valid_credential(
    setup: Setup, people: People
) -> None:
    revoked = setup.new_key(f"gone-{uuid.uuid4().hex[:6]}")
    assert setup.users("revoke", revoked.split("_")[1]).returncode == 0
    refused = {
        "no credential": setup.client(),
        "a wrong key": setup.client(WRONG_KEY),
        "a revoked key": setup.client(revoked),
        "neither a key nor a token": setup.client("hello"),
        "a proxy header from an untrusted address": setup.client(**{PROXY_HEADER: "mallory"}),
    }
    walked = operations(people.admin)
    assert len(walked) >= 10
    wait_until("the revoked key is refused", lambda: _status(refused["a revoked key"]) == 401)
    for method, template in walked:
        if f"{method} {template}" in PUBLIC:
            continue
        for how, client in refused.items():
            answer = call(client, method, template, people.alice_thread, people.alice_run)
            assert answer.status_code == 401, (method, template, how, answer.text)
            assert answer.json()["code"] == "unauthorized", (method, template, how)
            assert answer.headers["www-authenticate"] == "Bearer"
    for client in refused.values():
        client.close()


def _status(client: httpx.Client) -> int:
    return client.get("/api/me").status_code


def test_another_users_thread_and_run_are_unknown_on_every_route_that_names_them(
    people: People,
) -> None:
    before = people.alice.get(f"/api/threads/{people.alice_thread}").json()
    named = [
        (method, template)
        for method, template in operations(people.bob)
        if "{thread_id}" in template or template in ("/api/agents/{graph_id}", "/api/chat")
    ]
    assert len(named) >= 7
    for method, template in named:
        answer = call(people.bob, method, template, people.alice_thread, people.alice_run)
        assert answer.status_code == 404, (method, template, answer.text)
        assert answer.json()["code"] == "unknown_thread", (method, template)
    # Nothing of Alice's changed: her thread, its title, its runs.
    after = people.alice.get(f"/api/threads/{people.alice_thread}").json()
    assert after == before
    listed = people.alice.get("/api/threads").json()
    assert [t["title"] for t in listed if t["threadId"] == people.alice_thread] == ["你好"]


def test_the_owner_and_an_admin_reach_the_thread_on_every_route(people: People) -> None:
    for client in (people.alice, people.admin):
        for template in (
            "/api/threads/{thread_id}",
            "/api/threads/{thread_id}/runs",
            "/api/threads/{thread_id}/runs/{run_id}",
            "/api/threads/{thread_id}/runs/{run_id}/stream",
        ):
            answer = call(client, "GET", template, people.alice_thread, people.alice_run)
            assert answer.status_code == 200, (template, answer.text)


def test_a_user_lists_only_their_own_threads_and_an_admin_lists_everyones(
    setup: Setup, people: People
) -> None:
    bobs = f"t-bob-{uuid.uuid4().hex[:8]}"
    reply = people.bob.post(
        "/api/chat", json={"graph": "weather", "threadId": bobs, "message": "我是鲍勃"}
    )
    assert reply.status_code == 200, reply.text
    alice_id = people.alice.get("/api/me").json()["userId"]
    bob_id = people.bob.get("/api/me").json()["userId"]

    mine = {t["threadId"] for t in people.bob.get("/api/threads").json()}
    assert mine == {bobs}
    # A user's `owner` filter never widens the list.
    assert {t["threadId"] for t in people.bob.get(f"/api/threads?owner={alice_id}").json()} == {
        bobs
    }
    everyone = {t["threadId"]: t["owner"] for t in people.admin.get("/api/threads").json()}
    assert everyone[people.alice_thread] == alice_id
    assert everyone[bobs] == bob_id
    only_bob = people.admin.get("/api/threads", params={"owner": bob_id}).json()
    assert [t["threadId"] for t in only_bob] == [bobs]


def test_a_thread_id_chosen_to_collide_with_another_users_is_refused_not_merged(
    people: People, _llm_server: ScriptedLLM
) -> None:
    before = people.alice.get(f"/api/threads/{people.alice_thread}").json()["messages"]
    requests = len(_llm_server.requests)
    for strategy in ("reject", "enqueue", "interrupt", "rollback"):
        body = run_body(people.alice_thread, ("x1", "把她的对话给我"), multitaskStrategy=strategy)
        answer = people.bob.post("/api/agents/weather", json=body)
        assert answer.status_code == 404, (strategy, answer.text)
    assert len(_llm_server.requests) == requests  # no model call was made for Bob
    after = people.alice.get(f"/api/threads/{people.alice_thread}").json()["messages"]
    assert after == before


def test_me_says_who_is_signed_in_and_how(setup: Setup, people: People) -> None:
    assert people.admin.get("/api/me").json() == {"userId": "admin", "admin": True, "via": "key"}
    me = people.alice.get("/api/me").json()
    assert me["userId"].startswith("alice-") and me == {**me, "admin": False, "via": "key"}


def test_a_token_from_the_identity_provider_signs_its_subject_in(setup: Setup) -> None:
    with setup.client(setup.idp.token("carol")) as carol:
        assert carol.get("/api/me").json() == {
            "userId": "jwt:carol",
            "admin": False,
            "via": "token",
        }
    token = setup.idp.token("dana", roles=["agent-admin"])
    with setup.client(token) as dana:
        assert dana.get("/api/me").json() == {"userId": "jwt:dana", "admin": True, "via": "token"}
        assert dana.get("/metrics").status_code == 200


def test_a_rotation_of_the_providers_keys_is_picked_up(setup: Setup) -> None:
    setup.idp.rotate("EC")  # ES256 from now on, under a kid the server has not seen
    token = setup.idp.token("erin")

    def signed_in() -> bool:
        with setup.client(token) as erin:
            return erin.get("/api/me").status_code == 200

    wait_until("the new key is fetched", signed_in)


@pytest.mark.parametrize(
    "how",
    ["expired", "not yet valid", "another issuer", "another audience", "alg none", "hmac"],
)
def test_a_token_that_should_not_pass_is_refused(setup: Setup, how: str) -> None:
    idp = setup.idp
    token = {
        "expired": lambda: idp.token("f", expires_in=-120),
        "not yet valid": lambda: idp.token("f", not_before_in=600),
        "another issuer": lambda: idp.token("f", issuer="https://evil.example"),
        "another audience": lambda: idp.token("f", audience="another-service"),
        "alg none": lambda: unsigned("f"),
        "hmac": lambda: hmac_with_public_key(idp, "f"),
    }[how]()
    with setup.client(token) as client:
        answer = client.get("/api/me")
    assert answer.status_code == 401, answer.text
    assert answer.json()["code"] == "unauthorized"
    assert token not in answer.text


def test_a_revoked_key_is_refused_within_the_lease_and_a_rotated_one_replaces_it(
    setup: Setup,
) -> None:
    name = f"gina-{uuid.uuid4().hex[:6]}"
    first = setup.new_key(name)
    with setup.client(first) as gina:
        assert gina.get("/api/me").status_code == 200
        rotated = setup.users("rotate", name)
        assert rotated.returncode == 0, rotated.stderr
        second = rotated.stdout.strip().splitlines()[-1]
        revoked_at = time.monotonic()
        wait_until("the old key is refused", lambda: gina.get("/api/me").status_code == 401)
        assert time.monotonic() - revoked_at < LEASE_S + 5
    with setup.client(second) as gina:
        assert gina.get("/api/me").json()["userId"] == name


def test_the_metrics_are_an_admins_only(people: People) -> None:
    answer = people.alice.get("/metrics")
    assert answer.status_code == 403
    assert answer.json()["code"] == "admin_only"
    assert people.admin.get("/metrics").status_code == 200


def test_the_servers_log_names_the_user_never_the_key(
    setup: Setup, people: People, _llm_server: ScriptedLLM
) -> None:
    # A failing model call logs a warning inside the user's run.
    _llm_server.script(tool_call("no_such_tool", {}))
    alice_id = people.alice.get("/api/me").json()["userId"]
    people.alice.post(
        "/api/chat",
        json={"graph": "weather", "threadId": people.alice_thread, "message": "再来"},
    )
    line = setup.server.logged(f"user={alice_id}")
    assert alice_id in line
    key = people.alice.headers["authorization"].removeprefix("Bearer ")
    assert key not in setup.server.log_text
    assert API_KEY not in setup.server.log_text


def test_the_users_command_lists_users_and_their_days_usage(setup: Setup, people: People) -> None:
    listed = setup.users("list")
    assert listed.returncode == 0, listed.stderr
    alice_id = people.alice.get("/api/me").json()["userId"]
    assert any(line.split()[:2] == [alice_id, "no"] for line in listed.stdout.splitlines())
    usage = setup.users("usage", "--days", "1")
    assert usage.returncode == 0, usage.stderr
    rows = [line.split() for line in usage.stdout.splitlines()[1:]]
    alice = [row for row in rows if row[1] == alice_id]
    assert alice and int(alice[0][2]) >= 1 and int(alice[0][3]) > 0, usage.stdout
    assert "ra_" not in listed.stdout + usage.stdout


def test_a_name_taken_or_unknown_is_one_line_and_exit_status_1(setup: Setup) -> None:
    name = f"hal-{uuid.uuid4().hex[:6]}"
    setup.new_key(name)
    for args in (("add", name), ("rotate", "nobody-here"), ("revoke", "nobody-here")):
        done = setup.users(*args)
        assert done.returncode == 1, args
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("react-agent users: ")


def test_a_database_from_before_users_gives_its_threads_to_the_admin(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path, backend: Backend
) -> None:
    env = server_env(_llm_server, _meteo_server, tmp_path, backend=backend)
    _llm_server.fallback = lambda body: text("好的。")
    old = ServerProcess(env)
    with httpx.Client(base_url=old.url, headers={"Authorization": f"Bearer {API_KEY}"}) as admin:
        body = {"graph": "weather", "threadId": "t-before-users", "message": "旧的"}
        assert admin.post("/api/chat", json=body).status_code == 200
    old.stop()
    # The database as the version before users left it: no owners, no users' tables.
    backend.execute(tmp_path, "DROP INDEX agent_threads_user")
    backend.execute(tmp_path, "ALTER TABLE agent_threads DROP COLUMN user_id")
    for table in ("agent_users", "agent_keys", "agent_usage", "agent_rate_limits"):
        backend.execute(tmp_path, f"DROP TABLE {table}")
    if backend.name == "postgres":
        backend.execute(tmp_path, "UPDATE agent_schema SET version = 4")
    new = ServerProcess(env)
    try:
        ivy_key = add_user(env["AGENT_DB"], "ivy")
        with (
            httpx.Client(base_url=new.url, headers={"Authorization": f"Bearer {API_KEY}"}) as a,
            httpx.Client(base_url=new.url, headers={"Authorization": f"Bearer {ivy_key}"}) as ivy,
        ):
            threads = a.get("/api/threads").json()
            assert [(t["threadId"], t["owner"]) for t in threads] == [("t-before-users", "admin")]
            assert ivy.get("/api/threads").json() == []
            assert ivy.get("/api/threads/t-before-users").status_code == 404
    finally:
        new.stop()


def test_langgraphs_sdk_signs_in_with_its_api_key_and_sees_only_the_users_threads(
    setup: Setup, people: People
) -> None:
    from langgraph_sdk import get_sync_client

    alice_key = people.alice.headers["authorization"].removeprefix("Bearer ")
    bob_key = people.bob.headers["authorization"].removeprefix("Bearer ")
    alice = get_sync_client(url=setup.server.url, api_key=alice_key)  # sent as x-api-key
    bob = get_sync_client(url=setup.server.url, api_key=bob_key)

    found = [t["thread_id"] for t in alice.threads.search(limit=100)]
    assert people.alice_thread in found
    assert people.alice_thread not in [t["thread_id"] for t in bob.threads.search(limit=100)]
    with pytest.raises(httpx.HTTPStatusError) as refused:
        bob.threads.get(people.alice_thread)
    assert refused.value.response.status_code == 404
    made = bob.threads.create()  # a thread made before any run is its creator's
    with pytest.raises(httpx.HTTPStatusError) as hidden:
        alice.threads.get(made["thread_id"])
    assert hidden.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError) as anonymous:
        get_sync_client(url=setup.server.url, api_key=None).threads.search()
    assert anonymous.value.response.status_code == 401
