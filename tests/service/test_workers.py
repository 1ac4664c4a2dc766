"""`react-agent serve --workers 2`: two worker processes on one socket and one database.

Which process serves a connection is read from /proc: the worker that holds the server
side of its TCP socket (`/proc/net/tcp` gives the socket's inode, `/proc/<pid>/fd` its
holder), so the connection tests cannot pass with one worker.
"""

from __future__ import annotations

import http.client
import os
import signal
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from tests.doubles.llm import ScriptedLLM, text, tool_call
from tests.doubles.open_meteo import FakeOpenMeteo
from tests.service.conftest import API_KEY, Api, Backend, run_body, server_env, serving, wait_until
from tests.support.processes import SERVE, ServerProcess

pytestmark = pytest.mark.processes  # real servers, CLI processes or a browser

WORKERS = 2
SERVE_WORKERS = (*SERVE, "--workers", str(WORKERS))
GRACE_S = 1
DEADLINE_S = 60.0  # only a worker that never accepts waits it out


@pytest.fixture(scope="module")
def server(
    _llm_server: ScriptedLLM,
    _meteo_server: FakeOpenMeteo,
    tmp_path_factory: pytest.TempPathFactory,
    backend: Backend,
) -> Iterator[ServerProcess]:
    """The module's server: a parent and two workers (`api` talks to it)."""
    data_dir = tmp_path_factory.mktemp("workers")
    with serving(_llm_server, _meteo_server, data_dir, backend, command=SERVE_WORKERS) as process:
        yield process


def worker_pids(parent: int) -> list[int]:
    """The parent's worker processes: its spawned children, not multiprocessing's tracker."""
    pids: list[int] = []
    for children in Path(f"/proc/{parent}/task").glob("*/children"):
        for pid in children.read_text().split():
            with suppress(OSError):  # a child that has just exited
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    pids.append(int(pid))
    return sorted(pids)


def workers_of(server: ServerProcess) -> list[int]:
    """The server's worker pids, once it has all of them."""
    return list(
        wait_until(
            f"{WORKERS} workers",
            lambda: len(pids := worker_pids(server.process.pid)) == WORKERS and pids,
        )
    )


def server_socket_inode(server_port: int, client_port: int) -> str:
    """The inode of the server side of the loopback connection from `client_port`."""
    local, remote = f":{server_port:04X}", f":{client_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(local) and fields[2].endswith(remote):
            return fields[9]
    raise AssertionError(f"no server socket for the connection from port {client_port}")


def holder(inode: str, pids: list[int]) -> int | None:
    """Which of `pids` has the socket `inode` open, if any."""
    link = f"socket:[{inode}]"
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with suppress(OSError):  # an fd closed while we look
                if os.readlink(fd) == link:
                    return pid
    return None


class Connection:
    """One keep-alive HTTP connection, and the worker process that accepted it."""

    def __init__(self, server: ServerProcess, workers: list[int]) -> None:
        self.http = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        status, body = self.get("/healthz")
        assert (status, body) == (200, b'{"status":"ok"}')
        assert self.http.sock is not None
        inode = server_socket_inode(server.port, self.http.sock.getsockname()[1])
        self.worker = holder(inode, workers)
        assert self.worker is not None, f"a connection accepted by none of the workers {workers}"

    def get(self, path: str) -> tuple[int, bytes]:
        self.http.request("GET", path, headers={"Authorization": f"Bearer {API_KEY}"})
        response = self.http.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.http.close()


def connections_to_every_worker(server: ServerProcess, workers: list[int]) -> dict[int, Connection]:
    """Fresh connections until each worker has accepted one: worker pid -> its connection.

    Whichever worker accepts first gets a connection, so this may take a few tries.
    """
    pinned: dict[int, Connection] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(pinned) < len(workers):
            connection = Connection(server, workers)
            assert connection.worker is not None
            if connection.worker in pinned:
                connection.close()
            else:
                pinned[connection.worker] = connection
            assert time.monotonic() < deadline, f"only {sorted(pinned)} of {workers} accepted"
    except BaseException:
        for connection in pinned.values():
            connection.close()
        raise
    return pinned


def test_the_parent_runs_two_workers_and_both_accept_connections(server: ServerProcess) -> None:
    workers = workers_of(server)

    pinned = connections_to_every_worker(server, workers)
    for connection in pinned.values():
        connection.close()

    assert server.process.pid not in workers
    assert sorted(pinned) == workers


def test_a_weather_chat_run_completes_and_reads_back_the_same_through_each_worker(
    server: ServerProcess, api: Api, llm: ScriptedLLM, meteo: FakeOpenMeteo, thread_id: str
) -> None:
    llm.script(tool_call("get_weather", {"location": "北京"}), text("北京今天晴。"))

    reply = api.chat(graph="weather", threadId=thread_id, message="北京天气")

    assert reply.status_code == 200, reply.text
    done = reply.json()
    assert done["status"] == "done"
    assert done["messages"][-1]["content"] == "北京今天晴。"
    assert [m["role"] for m in done["messages"]] == ["assistant", "tool", "assistant"]
    assert done["messages"][1]["content"].startswith("北京")
    assert len(meteo.forecast_requests) == 1
    pinned = connections_to_every_worker(server, workers_of(server))
    try:
        views = {pid: c.get(f"/api/threads/{thread_id}") for pid, c in pinned.items()}
    finally:
        for connection in pinned.values():
            connection.close()
    assert all(status == 200 for status, _ in views.values()), views
    assert len({body for _, body in views.values()}) == 1, views


def test_sigterm_to_the_parent_stops_every_worker_gracefully_with_exit_status_0(
    llm: ScriptedLLM, meteo: FakeOpenMeteo, tmp_path: Path, thread_id: str, backend: Backend
) -> None:
    # A run still waiting for its forecast: the workers drain within the grace period.
    meteo.hang_forecast(30)
    llm.script(tool_call("get_weather", {"location": "上海"}), text("上海多云。"))
    env = server_env(llm, meteo, tmp_path, backend=backend, AGENT_SHUTDOWN_GRACE_S=str(GRACE_S))
    server = ServerProcess(env, command=SERVE_WORKERS)
    api = Api(server)
    try:
        workers = workers_of(server)
        started = api.run(
            "weather",
            run_body(thread_id, ("u1", "上海天气")),
            until=lambda event: event["type"] == "RUN_STARTED",
        )
        assert started.types == ["RUN_STARTED"]
        wait_until("the tool to ask for the forecast", lambda: meteo.forecast_requests)
        stopping = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        status = server.process.wait(timeout=15)
        took = time.monotonic() - stopping
    finally:
        api.close()
        server.stop()  # also waits for the end of its output
        meteo.reset()

    assert status == 0, server.log_text[-3000:]
    # The grace period ended it, not the forecast's 30 s hang; the margin is for stopping
    # the processes on a loaded 2-core machine.
    assert took < GRACE_S + 9
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    for pid in workers:  # logged by uvicorn once a worker's shutdown has completed
        assert f"Finished server process [{pid}]" in server.log_text, server.log_text[-3000:]
