"""LangSmithSink: a stand-in LangSmith API on 127.0.0.1 that takes whatever is sent and records it.

    with LangSmithSink() as sink:       # LANGSMITH_ENDPOINT=sink.url
        ...
        sink.wait_for_runs()            # the paths of the run uploads received

`GET /info` answers an empty server info (the client then uses its defaults); every other
request is answered 200 `{}` and kept as `(method, path)`.
"""

from __future__ import annotations

import threading

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.doubles._server import ServedDouble, ServerThread


class LangSmithSink(ServedDouble):
    """Records every request; `url` is the LANGSMITH_ENDPOINT."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._requests: list[tuple[str, str]] = []
        methods = ["GET", "POST", "PATCH", "PUT"]
        app = Starlette(routes=[Route("/{path:path}", self._any, methods=methods)])
        self._server = ServerThread(app)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def requests(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._requests)

    def wait_for_runs(self, within_s: float = 15.0) -> list[str]:
        """Block until a run upload (a POST under /runs) came; its paths."""

        def uploads() -> list[str]:
            return [p for m, p in self._requests if m == "POST" and p.startswith("/runs")]

        with self._lock:
            if not self._lock.wait_for(lambda: bool(uploads()), within_s):
                raise AssertionError(f"LangSmithSink: no run upload; got {self._requests}")
            return uploads()

    async def _any(self, request: Request) -> Response:
        await request.body()
        with self._lock:
            self._requests.append((request.method, request.url.path))
            self._lock.notify_all()
        return JSONResponse({})
