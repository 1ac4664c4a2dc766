"""Fair use across replicas: two servers on one database count each user's runs at once,
requests a minute and tokens a day together, and refuse a revoked key within the lease.

Each test has users of its own (the limits are per user), made by `react-agent users add`
on the shared database.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, held, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Backend, run_body, server_env, wait_until
from tests.support.processes import REACT_AGENT, ServerProcess
from tests.support.user_keys import add_user, users

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

MAX_RUNS = 2
RPM = 12
TOKENS_PER_DAY = 5  # one scripted exchange reports more than this
LEASE_S = 1.0


@dataclass
class Replicas:
    a: ServerProcess
    b: ServerProcess
    env: dict[str, str]
    backend: Backend
    data_dir: Path

    def add_user(self) -> tuple[str, str]:
        name = f"u-{uuid.uuid4().hex[:8]}"
        return name, add_user(self.env["AGENT_DB"], name)

    def client(self, server: ServerProcess, key: str) -> httpx.Client:
        return httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30.0
        )


@pytest.fixture(scope="module")
def replicas(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[Replicas]:
    data_dir = tmp_path_factory.mktemp("limits")
    env = server_env(
        _llm_server,
        _meteo_server,
        data_dir,
        backend=backend,
        AGENT_USER_MAX_RUNS=str(MAX_RUNS),
        AGENT_USER_RPM=str(RPM),
        AGENT_USER_TOKENS_PER_DAY=str(TOKENS_PER_DAY),
        AGENT_RUN_LEASE_S=str(LEASE_S),
    )
    a = ServerProcess(env)
    try:
        b = ServerProcess(env)
        try:
            yield Replicas(a, b, env, backend, data_dir)
        finally:
            b.stop()
    finally:
        a.stop()


def start(client: httpx.Client, thread_id: str, **forwarded: str) -> int:
    """POST a run and leave once it has started (or been refused): its status code."""
    body = run_body(thread_id, (f"m-{uuid.uuid4().hex[:6]}", "天气？"), **forwarded)
    with client.stream("POST", "/api/agents/weather", json=body) as response:
        if response.status_code == 200:
            next(response.iter_lines())  # the run is admitted: leave it running
        else:
            response.read()
        return response.status_code


def test_a_users_run_beyond_their_limit_is_refused_on_either_replica_unless_it_queues(
    replicas: Replicas, llm: ScriptedLLM
) -> None:
    _, key = replicas.add_user()
    llm.script(held(text("一"), 30), held(text("二"), 30))
    llm.fallback = lambda body: text("好的。")
    with replicas.client(replicas.a, key) as on_a, replicas.client(replicas.b, key) as on_b:
        t1, t2, t3 = (f"t-{uuid.uuid4().hex[:8]}" for _ in range(3))
        assert start(on_a, t1) == 200
        assert start(on_b, t2) == 200
        llm.wait_for_requests(2)
        for client in (on_a, on_b):
            body = run_body(t3, ("x", "第三个"))
            refused = client.post("/api/agents/weather", json=body)
            assert refused.status_code == 429, refused.text
            assert refused.json()["code"] == "too_many_runs"
        # Queued behind its thread's own run, it adds nothing running: taken.
        assert start(on_b, t1, multitaskStrategy="enqueue") == 200
        llm.release()

    with replicas.client(replicas.a, API_KEY) as admin:  # polls without using the user's rate

        def ended() -> bool:
            runs = [r for t in (t1, t2) for r in admin.get(f"/api/threads/{t}/runs").json()]
            return len(runs) == 3 and all(r["status"] == "success" for r in runs)

        wait_until("the user's runs end", ended)
    with replicas.client(replicas.a, API_KEY) as admin:  # an admin is never limited
        for thread in (f"t-{uuid.uuid4().hex[:8]}" for _ in range(MAX_RUNS + 1)):
            llm.script(held(text("管"), 30))
            assert start(admin, thread) == 200
        llm.release()


def test_the_day_s_token_quota_stops_the_next_run_on_either_replica_and_resets_the_next_day(
    replicas: Replicas, llm: ScriptedLLM
) -> None:
    name, key = replicas.add_user()
    llm.fallback = lambda body: text("今天晴。")
    with replicas.client(replicas.a, key) as on_a, replicas.client(replicas.b, key) as on_b:
        thread_id = f"t-{uuid.uuid4().hex[:8]}"
        first = on_a.post(
            "/api/chat", json={"graph": "weather", "threadId": thread_id, "message": "天气？"}
        )
        assert first.status_code == 200, first.text
        for client in (on_b, on_a):
            refused = client.post(
                "/api/chat", json={"graph": "weather", "threadId": thread_id, "message": "再问"}
            )
            assert refused.status_code == 429, refused.text
            assert refused.json()["code"] == "quota_exceeded"
            assert "00:00:00+00:00 UTC" in refused.json()["detail"]
            assert 0 < int(refused.headers["retry-after"]) <= 86400
        # The next day: what was counted was counted under yesterday.
        replicas.backend.execute(
            replicas.data_dir, f"UPDATE agent_usage SET day='2000-01-01' WHERE user_id='{name}'"
        )
        again = on_b.post(
            "/api/chat", json={"graph": "weather", "threadId": thread_id, "message": "再问"}
        )
        assert again.status_code == 200, again.text


def test_a_users_requests_a_minute_are_counted_across_replicas(replicas: Replicas) -> None:
    _, key = replicas.add_user()
    with replicas.client(replicas.a, key) as on_a, replicas.client(replicas.b, key) as on_b:
        for i in range(RPM):
            answer = (on_a if i % 2 else on_b).get("/api/me")
            assert answer.status_code == 200, (i, answer.text)
        refused = on_a.get("/api/threads")
        assert refused.status_code == 429
        assert refused.json()["code"] == "rate_limited"
        assert 0 < int(refused.headers["retry-after"]) <= 60
        assert on_b.get("/api/me").status_code == 429
    _, other = replicas.add_user()
    with replicas.client(replicas.b, other) as someone_else:
        assert someone_else.get("/api/me").status_code == 200  # per user


def test_a_key_revoked_through_one_replicas_database_is_refused_by_both_within_the_lease(
    replicas: Replicas,
) -> None:
    name, key = replicas.add_user()
    with replicas.client(replicas.a, key) as on_a, replicas.client(replicas.b, key) as on_b:
        assert on_a.get("/api/me").status_code == 200
        assert on_b.get("/api/me").status_code == 200  # both hold it now
        users(replicas.env["AGENT_DB"], "revoke", name)
        for client in (on_a, on_b):
            wait_until(
                "the key is refused",
                lambda client=client: client.get("/api/me").status_code == 401,
                timeout=LEASE_S + 10,
            )


def test_a_trusted_proxys_header_signs_its_user_in_and_an_untrusted_one_is_ignored(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path, backend: Backend
) -> None:
    for trusted, expected in (("127.0.0.0/8", 200), ("10.1.0.0/16", 401)):
        env = server_env(
            _llm_server,
            _meteo_server,
            tmp_path / trusted.replace("/", "_"),
            backend=backend,
            AGENT_TRUSTED_USER_HEADER="X-Forwarded-User",
            AGENT_TRUSTED_PROXIES=trusted,
        )
        (tmp_path / trusted.replace("/", "_")).mkdir(exist_ok=True)
        server = ServerProcess(env)
        try:
            headers = {"X-Forwarded-User": "zoe@example.com"}
            with httpx.Client(base_url=server.url, headers=headers) as zoe:
                answer = zoe.get("/api/me")
                assert answer.status_code == expected, (trusted, answer.text)
                if expected == 200:
                    me = answer.json()
                    assert me == {"userId": "proxy:zoe@example.com", "admin": False, "via": "proxy"}
                    assert zoe.get("/metrics").status_code == 403
        finally:
            server.stop()


def test_serve_refuses_another_interface_with_no_way_to_sign_in(tmp_path: Path) -> None:
    env = {"AGENT_DB": str(tmp_path / "open.sqlite"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [REACT_AGENT, "serve", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "0.0.0.0" in done.stderr and "react-agent users add" in done.stderr
