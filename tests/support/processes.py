"""Servers as real child processes: started on port 0, the port read from their log.

Uvicorn logs the port it really bound, so no test picks a port that another process
may take before the server binds it.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
REACT_AGENT = str(Path(sys.executable).with_name("react-agent"))
SERVE = (REACT_AGENT, "serve", "--host", "127.0.0.1", "--port", "0")
# The address it announces: 127.0.0.1 unless the command says `--host` otherwise.
LISTENING = re.compile(r"Uvicorn running on http://(\[[0-9a-f:]+\]|[^\s:/]+):(\d+)")

POLL_S = 0.05
LOG_TAIL = 3000  # characters of the child's log shown when it fails to start


class ServerProcess:
    """One server child (`react-agent serve` unless told otherwise); its log lines are in `log`.

    Creating one returns once the server logged its port and `health` answers 200, else stops
    the child and raises RuntimeError with the end of its log.
    """

    def __init__(
        self,
        env: dict[str, str],
        *,
        command: Sequence[str] = SERVE,
        cwd: Path = ROOT,
        health: str = "/healthz",
        # Only a hung start waits this out: a shared machine running the suite on every
        # core can take tens of seconds to start a Python server.
        startup_s: float = 90.0,
    ) -> None:
        self.log: list[str] = []
        self.host = "127.0.0.1"
        self.port = 0
        # Set once the port is known or the output has ended, whichever comes first.
        self._announced = threading.Event()
        self.process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + startup_s
        try:
            if not self._announced.wait(startup_s) or not self.port:
                raise RuntimeError(self._failure("never logged its port"))
            self._wait_healthy(health, deadline)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def log_text(self) -> str:
        return "".join(self.log)

    def logged(self, needle: str, within_s: float = 10.0) -> str:
        """The first line of the child's output containing `needle`, once it has written it."""
        deadline = time.monotonic() + within_s
        while True:
            found = next((line for line in list(self.log) if needle in line), None)
            if found is not None:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} never logged:\n{self.log_text[-LOG_TAIL:]}")
            time.sleep(POLL_S)  # polling the child's output, not a wait for a result

    def _read(self) -> None:
        # Drains the pipe for the child's whole life, so a chatty child never blocks on it.
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line)
            match = LISTENING.search(line)
            if match and not self.port:
                self.host, self.port = match.group(1), int(match.group(2))
                self._announced.set()
        self._announced.set()

    def _wait_healthy(self, health: str, deadline: float) -> None:
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(self._failure("exited"))
            try:
                if httpx.get(f"{self.url}{health}", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(self._failure(f"never answered 200 on {health}"))
            time.sleep(POLL_S)  # polling interval, not a wait for a result

    def _failure(self, what: str) -> str:
        if not self._reader.is_alive():  # its output has ended: it is exiting, so learn how
            with suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        status = self.process.poll()
        exited = "" if status is None else f" (exit status {status})"
        return f"{self.process.args!r} {what}{exited}:\n{self.log_text[-LOG_TAIL:]}"

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what is on disk is all that survives."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._reader.join(timeout=5)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a graceful shutdown), then SIGKILL if it takes longer than `timeout`."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._reader.join(timeout=5)


@contextmanager
def refused_port() -> Iterator[int]:
    """A port that refuses every connection while the block runs.

    Bound but never listening: a connection is refused at once, and no other process (a
    server of a parallel test worker, bound to port 0) can take the port meanwhile, as it
    could take one that was merely free a moment ago.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
