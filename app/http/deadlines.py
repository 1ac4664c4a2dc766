"""Slow clients: a deadline for a request's head and one for its body, and a cap on the
connections a process keeps open. Only a request's arrival is bounded: the answer (an
event stream) lasts as long as its run.

What uvicorn does on its own: `timeout_keep_alive` (5 s) closes a connection idle after
an answer, but only until its first byte: a client that then sends a byte every few
seconds, or one that never completes its first request, is kept forever. h11 caps an
incomplete head at 16 KiB (`h11_max_incomplete_event_size`, a 400); httptools, which
uvicorn prefers when installed, caps nothing. `limit_concurrency` counts a connection
only once its head is complete, and answers plain text. So, here:

- `GuardedHttpTools` / `GuardedH11` (`http_protocol()` picks one as uvicorn's "auto"
  would): the next request's head must be complete within `AGENT_HEADER_TIMEOUT_S` of
  the connection opening or of the answer before, and (httptools) within
  `MAX_HEAD_BYTES`; else the connection is closed (431 `headers_too_large` first for a
  head too large; nothing for a late one: no request arrived to answer). A request on a
  connection beyond the `AGENT_MAX_CONNECTIONS`-th open one is 503 `too_many_connections`
  and the connection is closed; the probes are answered still, so that an orchestrator
  does not restart a server that is only full.
- `BodyDeadline` (ASGI): the body must be whole within `AGENT_BODY_TIMEOUT_S` of the
  head, else reading it raises 408 `body_timeout` (answered with `Connection: close`: the
  rest of the body is not read).
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.core.errors import RequestTimeout, ServiceError, Unavailable
from app.http.hosts import PROBES
from app.settings import get_settings

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional for uvicorn: h11 then
    HttpToolsProtocol = None  # type: ignore[assignment, misc]

logger = logging.getLogger(__name__)

# A request head (request line and headers) larger than this is refused: what h11 keeps
# (16 KiB) is too little for some proxies' and identity providers' headers.
MAX_HEAD_BYTES = 64 * 1024

HEAD_LATE = "closed a connection from %s: no complete request head within %ss"
HEAD_TOO_LARGE = "the request head is over {limit} bytes"
TOO_MANY_CONNECTIONS = (
    "this server has {limit} connections open (AGENT_MAX_CONNECTIONS): retry in a moment"
)
BODY_LATE = "the request body did not arrive within {timeout:g} s (AGENT_BODY_TIMEOUT_S)"
RETRY_AFTER_S = "1"

if TYPE_CHECKING:
    _Protocol = H11Protocol
else:
    _Protocol = object


def _refusing(app: ASGIApp, limit: int) -> ASGIApp:
    """The app a request beyond the connection cap is given: 503 with the connection
    closed, but `app` for the probes."""
    refusal = Unavailable("too_many_connections", TOO_MANY_CONNECTIONS.format(limit=limit))
    response = JSONResponse(
        {"detail": refusal.message, "code": refusal.code},
        status_code=refusal.status,
        headers={"Connection": "close", "Retry-After": RETRY_AFTER_S},
    )

    async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("path") in PROBES:
            await app(scope, receive, send)
        else:
            await response(scope, receive, send)

    return refuse


class _Guard(_Protocol):
    """The head deadline, the head's size and the connection cap, over uvicorn's protocol.

    The deadline runs from the connection's opening, and again from each answer's end
    (the keep-alive idle time counts); a head is complete when the protocol has made the
    request's cycle (`self.cycle`), which both uvicorn protocols do then.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = get_settings()
        self._head_timeout_s = settings.agent_header_timeout_s
        self._max_connections = settings.agent_max_connections
        self._served_app = self.app
        self._refusing_app = _refusing(self.app, self._max_connections)
        self._head_timer: asyncio.TimerHandle | None = None
        self._cycle_before: object = None
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_arrived()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Counted with the connection itself: its own request is refused when it is the
        # cap's first beyond. The probes go through (`_refusing`).
        full = len(self.connections) > self._max_connections
        self.app = self._refusing_app if full else self._served_app
        # The rest of a body answered before it was read (a 413 on its Content-Length) is
        # not the next head: a chunk that starts in a body is not counted.
        of_a_head = not self._in_a_body()
        super().data_received(data)
        if self._head_timer is None:
            return
        if self.cycle is not self._cycle_before:
            self._head_arrived()
            return
        if of_a_head:
            self._head_bytes += len(data)
        if self._head_bytes > MAX_HEAD_BYTES and not self.transport.is_closing():
            self._head_arrived()
            detail = HEAD_TOO_LARGE.format(limit=MAX_HEAD_BYTES)
            refusal = ServiceError("headers_too_large", detail, status=431)
            self.transport.write(_raw_response(refusal))
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request already in (httptools) has its head: nothing to wait for.
        if not self.transport.is_closing() and not getattr(self, "pipeline", None):
            self._await_head()

    def _in_a_body(self) -> bool:
        """Whether the bytes arriving now belong to a body. h11 caps a head itself (16
        KiB), so it counts none here."""
        return True

    def _await_head(self) -> None:
        self._head_arrived()
        self._cycle_before = self.cycle
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self._head_timeout_s, self._head_late)

    def _head_arrived(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            # Nothing is answered: no request arrived, and an idle browser connection
            # would take a 408 for the answer to its next request.
            logger.info(HEAD_LATE, _peer(self.client), f"{self._head_timeout_s:g}")
            self.transport.close()


def _raw_response(refusal: ServiceError) -> bytes:
    """A whole answer the protocol writes itself (no request reached the app), after
    which it closes the connection."""
    body = json.dumps({"detail": refusal.message, "code": refusal.code}).encode()
    head = (
        f"HTTP/1.1 {refusal.status} {HTTPStatus(refusal.status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown peer"


class GuardedH11(_Guard, H11Protocol):
    """uvicorn's h11 protocol with the head deadline and the connection cap."""


if HttpToolsProtocol is not None:

    class GuardedHttpTools(_Guard, HttpToolsProtocol):  # type: ignore[misc]
        """uvicorn's httptools protocol with the head deadline, its size and the cap."""

        _reading_body = False  # from a head's end to its message's (the parser's calls)

        def _in_a_body(self) -> bool:
            return self._reading_body

        def on_headers_complete(self) -> None:
            self._reading_body = True
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._reading_body = False
            super().on_message_complete()


def http_protocol() -> str:
    """The protocol `serve` gives uvicorn: httptools' when installed, as uvicorn's "auto"
    picks, else h11's. An import string, not the class: a `--workers` child unpickles its
    config before it answers the supervisor's health checks, and importing this module
    (the settings, Starlette) then can outlast them on a loaded machine; uvicorn imports
    the string when it loads the config, once the child answers."""
    name = "GuardedHttpTools" if HttpToolsProtocol is not None else "GuardedH11"
    return f"{__name__}:{name}"


class BodyDeadline:
    """ASGI middleware: a request's body is whole within `timeout_s` of its head, else
    reading it raises 408 `body_timeout` (answered by the app's `ServiceError` handler)."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        whole = False

        async def timed_receive() -> Message:
            nonlocal whole
            if whole:  # the body is in: from here on only a disconnect is awaited, untimed
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                detail = BODY_LATE.format(timeout=self.timeout_s)
                # The rest of the body is never read: the connection cannot carry another.
                raise RequestTimeout(
                    "body_timeout", detail, headers={"Connection": "close"}
                ) from None
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed_receive, send)
