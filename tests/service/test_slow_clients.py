"""Slow clients: a request's head and its body each have a deadline, a process keeps at
most AGENT_MAX_CONNECTIONS connections busy, and none of it cuts an event stream short.

Every client here is a raw socket, so what it sends and when is exact. The servers run
on SQLite only: these guards are HTTP's, no database takes part in them.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.doubles.llm import ScriptedLLM, held, text
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, SQLITE, Stream, parse_sse, run_body, serving
from tests.support.processes import SERVE, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

HEADER_TIMEOUT_S = 1.5
BODY_TIMEOUT_S = 1.5
DEADLINES = {
    "AGENT_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S),
    "AGENT_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
}
CLIENTS = 20  # slow clients at once, of each kind
EVERY_S = 0.2  # a trickling client sends one more byte this often
MARGIN_S = 5.0  # the most a loaded machine may add to a deadline
MAX_CONNECTIONS = 4


@pytest.fixture(scope="module")
def strict(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server with deadlines short enough to wait out in a test."""
    data_dir = tmp_path_factory.mktemp("strict")
    with serving(_llm_server, _meteo_server, data_dir, SQLITE, **DEADLINES) as process:
        yield process


@pytest.fixture(scope="module")
def small(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A server that keeps few connections, with a head deadline no test waits out."""
    data_dir = tmp_path_factory.mktemp("small")
    env = {"AGENT_MAX_CONNECTIONS": str(MAX_CONNECTIONS), "AGENT_HEADER_TIMEOUT_S": "60"}
    with serving(_llm_server, _meteo_server, data_dir, SQLITE, **env) as process:
        yield process


@dataclass
class Slow:
    """One trickling client: what it sends next, what it received, when it was closed."""

    sock: socket.socket
    rest: bytes
    received: bytearray = field(default_factory=bytearray)
    closed_after_s: float | None = None


def connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def trickle(server: ServerProcess, first: bytes, rest: bytes, *, within_s: float) -> list[Slow]:
    """`CLIENTS` connections that each send `first`, then `rest` a byte every `EVERY_S`;
    returned once the server has closed them all, or after `within_s`."""
    started = time.monotonic()
    clients = []
    for _ in range(CLIENTS):
        sock = connect(server)
        sock.sendall(first)
        sock.setblocking(False)
        clients.append(Slow(sock, rest))
    try:
        while time.monotonic() - started < within_s:
            open_ = [c for c in clients if c.closed_after_s is None]
            if not open_:
                break
            # Waits for the server's answer or close; the timeout paces the trickle.
            readable, _, _ = select.select([c.sock for c in open_], [], [], EVERY_S)
            for client in open_:
                if client.sock in readable:
                    _read(client, started)
            for client in (c for c in open_ if c.closed_after_s is None and c.rest):
                try:
                    client.sock.send(client.rest[:1])
                    client.rest = client.rest[1:]
                except OSError:  # closed under us (a reset): read what came first
                    _read(client, started)
    finally:
        for client in clients:
            client.sock.close()
    return clients


def _read(client: Slow, started: float) -> None:
    try:
        data = client.sock.recv(65536)
    except BlockingIOError:
        return
    except OSError:
        data = b""
    if data:
        client.received += data
    else:
        client.closed_after_s = time.monotonic() - started


def answer_of(raw: bytes) -> tuple[int, dict[str, str], dict[str, str]]:
    """The status, headers and JSON body of one HTTP answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, json.loads(body)


def head_of(server: ServerProcess, path: str, **extra: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    lines += [f"{name}: {value}" for name, value in extra.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_connections_whose_request_head_trickles_in_are_closed_at_the_header_deadline(
    strict: ServerProcess,
) -> None:
    first = b"POST /api/agents/weather HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    # One header line every `EVERY_S`: far more than the deadline lasts.
    rest = b"".join(b"X-Slow-%d: a\r\n" % i for i in range(1000))

    clients = trickle(strict, first, rest, within_s=HEADER_TIMEOUT_S + MARGIN_S)

    closed = [c.closed_after_s for c in clients]
    assert None not in closed, f"{closed.count(None)} of {CLIENTS} still open"
    # Closed by the deadline (not at once, nor when the header lines stop), unanswered.
    assert all(HEADER_TIMEOUT_S - 0.1 <= s <= HEADER_TIMEOUT_S + MARGIN_S for s in closed if s)
    assert all(c.received == b"" for c in clients)
    assert "no complete request head within 1.5s" in strict.logged("no complete request head")
    assert httpx.get(f"{strict.url}/healthz").status_code == 200


def test_connections_whose_body_trickles_in_are_answered_408_at_the_body_deadline(
    strict: ServerProcess,
) -> None:
    first = head_of(
        strict,
        "/api/agents/weather",
        Authorization=f"Bearer {API_KEY}",
        **{"Content-Type": "application/json", "Content-Length": "1000"},
    )
    rest = json.dumps(run_body("t-slow-body", ("u1", "你好"))).encode().ljust(1000)

    clients = trickle(strict, first, rest, within_s=BODY_TIMEOUT_S + MARGIN_S)

    assert [c.closed_after_s for c in clients].count(None) == 0
    for client in clients:
        status, headers, body = answer_of(bytes(client.received))
        assert (status, body["code"]) == (408, "body_timeout")
        assert "AGENT_BODY_TIMEOUT_S" in body["detail"]
        assert headers["connection"] == "close"
        assert client.closed_after_s is not None
        assert BODY_TIMEOUT_S - 0.1 <= client.closed_after_s <= BODY_TIMEOUT_S + MARGIN_S


def test_a_request_head_over_64_kib_is_answered_431_and_the_connection_closed(
    strict: ServerProcess,
) -> None:
    padding = b"".join(b"X-Big-%d: %s\r\n" % (i, b"a" * 1000) for i in range(70))
    with connect(strict) as sock:
        sock.sendall(b"GET /api/graphs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + padding)
        raw = bytearray()
        while chunk := sock.recv(65536):  # the server's answer, then its close
            raw += chunk

    status, headers, body = answer_of(bytes(raw))
    assert (status, body["code"]) == (431, "headers_too_large")
    assert headers["connection"] == "close"


def test_an_event_stream_stays_open_for_as_long_as_its_run_lasts(
    strict: ServerProcess, llm: ScriptedLLM
) -> None:
    llm.script(held(text("好了。")))
    outlive_s = 2 * max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S)
    stream = Stream(status=0)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    started = time.monotonic()
    released_after_s = None
    with httpx.stream(
        "POST",
        f"{strict.url}/api/agents/weather",
        json=run_body("t-long-stream", ("u1", "你好")),
        headers=headers,
        timeout=30,
    ) as response:
        stream.status = response.status_code

        def lines() -> Iterator[str]:
            nonlocal released_after_s
            for line in response.iter_lines():
                # The keep-alive pings come every 0.2 s: the run is released once the
                # stream has outlived both deadlines.
                if released_after_s is None and time.monotonic() - started > outlive_s:
                    released_after_s = time.monotonic() - started
                    llm.release()
                yield line

        for _ in parse_sse(lines(), stream):
            pass

    assert stream.status == 200
    assert released_after_s is not None and released_after_s > outlive_s
    assert stream.last["type"] == "RUN_FINISHED"
    assert "ping" in stream.comments


def test_requests_beyond_the_connection_cap_are_refused_503_until_one_closes(
    small: ServerProcess,
) -> None:
    def hold() -> socket.socket:
        # A request answered (so the connection is surely counted), then the next one's
        # head begun: the connection stays open, waiting for the rest.
        sock = connect(small)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        return sock

    def graphs() -> httpx.Response:
        # A client of its own each time: no pooled connection stays counted.
        return httpx.get(f"{small.url}/api/graphs", headers={"Authorization": f"Bearer {API_KEY}"})

    held_open = [hold() for _ in range(MAX_CONNECTIONS - 1)]
    try:
        # Within the cap (this request's connection is the last one it allows).
        assert wait_until_status(graphs, 200)
        held_open.append(hold())  # answered too: the probes are exempt

        refused = graphs()
        probe = httpx.get(f"{small.url}/healthz")

        held_open.pop().close()
        assert wait_until_status(graphs, 200)
    finally:
        for sock in held_open:
            sock.close()

    assert refused.status_code == 503
    assert refused.json()["code"] == "too_many_connections"
    assert "AGENT_MAX_CONNECTIONS" in refused.json()["detail"]
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"
    assert probe.status_code == 200


def wait_until_status(
    request: Callable[[], httpx.Response], status: int, within_s: float = 10.0
) -> bool:
    """Whether `request()` answers `status` within `within_s` (a closed connection is
    counted off by the server soon after, not at once)."""
    deadline = time.monotonic() + within_s
    while True:
        if request().status_code == status:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # polling interval, not a wait for a result


def test_the_head_deadline_holds_in_the_workers_of_serve_workers(
    _llm_server: ScriptedLLM, _meteo_server: FakeOpenMeteo, tmp_path: Path
) -> None:
    command = (*SERVE, "--workers", "2")
    with serving(
        _llm_server, _meteo_server, tmp_path, SQLITE, command=command, **DEADLINES
    ) as server:
        clients = trickle(
            server,
            b"GET /healthz HTTP/1.1\r\n",
            b"".join(b"X-Slow-%d: a\r\n" % i for i in range(1000)),
            within_s=HEADER_TIMEOUT_S + MARGIN_S,
        )

    assert [c.closed_after_s for c in clients].count(None) == 0
    assert all(c.received == b"" for c in clients)
