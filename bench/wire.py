"""A lean HTTP/1.1 client for the throughput phases where the load generator's CPU counts.

The benchmark shares the machine's cores with the servers it measures: in the workers
comparison the servers use them all, so every millisecond the load generator spends per
run is taken from them. httpx costs about 3 ms of CPU per streamed run here (a new
connection each); this client does the same exchange on bare asyncio streams for a
fraction of it: one request per connection (`Connection: close`), the response read as
it comes (chunked or not), its body lines handed over one by one.

`post(url, body)` is the one entry point: an async context manager yielding the
`Response` (status, headers, `lines()`, `read()`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

BAD_RESPONSE = "not an HTTP/1.1 response: {line!r}"


class WireError(Exception):
    """The server's answer is not HTTP as this client reads it."""


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    _reader: asyncio.StreamReader

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, decoded from chunked transfer coding when it is so sent."""
        reader = self._reader
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            length = self.headers.get("content-length")
            yield await (reader.readexactly(int(length)) if length is not None else reader.read())
            return
        while True:
            size = int((await reader.readline()).split(b";", 1)[0], 16)
            if size == 0:
                await reader.readline()  # the final CRLF (no trailers are sent to us)
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)

    async def lines(self) -> AsyncIterator[bytes]:
        """The body's lines, without their line ends."""
        pending = b""
        async for chunk in self.chunks():
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                yield line.rstrip(b"\r")
        if pending:
            yield pending

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


@asynccontextmanager
async def post(
    url: str, body: bytes, *, content_type: str = "application/json", accept: str = "*/*"
) -> AsyncIterator[Response]:
    """POST `body` to `url` on a new connection, closed when the block ends."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = (
            f"POST {parts.path or '/'} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: {content_type}\r\nAccept: {accept}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + body)
        status_line = await reader.readline()
        fields = status_line.split(None, 2)
        if len(fields) < 2 or not fields[0].startswith(b"HTTP/1."):
            raise WireError(BAD_RESPONSE.format(line=status_line[:80]))
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        yield Response(int(fields[1]), headers, reader)
    finally:
        writer.close()
