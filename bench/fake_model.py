"""A lean OpenAI-compatible chat endpoint for the benchmark, on raw asyncio (uvloop if present).

Not the test double: no scripting, no framework, as little CPU per call as possible,
because it shares the machine with what it measures. Each `POST /v1/chat/completions`
answers by the last message:

- not a tool result -> one call of `lookup({"query": "bench"})`;
- a tool result, or a request without tools -> the fixed answer of `tokens` tokens.

Timing, the same whether the request streams (SSE chunks) or not (one JSON body):
`latency_ms` before the first chunk, then `token_delay_ms` before every further chunk.
A tool call is 2 chunks (id + name, then the arguments); an answer is `tokens` chunks.
So one benchmark run costs the model `2 * latency + (1 + tokens - 1) * token_delay`.

`POST /control {"latency_ms", "token_delay_ms", "tokens"}` changes the timing;
`GET /stats` -> `{"requests": n}`; `GET /healthz` -> `{"status": "ok"}`.

Run it as `python -m bench.fake_model [--port 0]`: it prints `PORT <n>` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

TOOL_NAME = "lookup"
TOOL_ARGS = '{"query": "bench"}'
MODEL_NAME = "bench-model"


def answer_tokens(tokens: int) -> list[str]:
    """The streamed pieces of the fixed answer (their concatenation is the answer)."""
    return [f" w{i}" for i in range(tokens)]


def answer_text(tokens: int) -> str:
    """The whole fixed answer of `tokens` tokens."""
    return "".join(answer_tokens(tokens))


@dataclass(slots=True)
class Timing:
    """How slow the model is."""

    latency_ms: float = 0.0
    token_delay_ms: float = 0.0
    tokens: int = 20


class FakeModel:
    """The request handler; one instance per process."""

    def __init__(self, timing: Timing) -> None:
        self.timing = timing
        self.requests = 0
        self._ids = itertools.count(1)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one keep-alive connection until the client closes it."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                method, path, headers = _parse_head(head)
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                await self._route(method, path, body, writer)
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client went away
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _route(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if method == "POST" and path.endswith("/chat/completions"):
            await self._completion(json.loads(body), writer)
        elif method == "POST" and path == "/control":
            update = json.loads(body)
            self.timing = Timing(**{**asdict(self.timing), **update})
            _send_json(writer, asdict(self.timing))
        elif method == "GET" and path == "/stats":
            _send_json(writer, {"requests": self.requests, **asdict(self.timing)})
        elif method == "GET" and path == "/healthz":
            _send_json(writer, {"status": "ok"})
        else:
            _send_json(writer, {"error": {"message": f"no route {method} {path}"}}, status=404)
        await writer.drain()

    async def _completion(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        timing = self.timing  # a /control mid-call does not change this call
        n = next(self._ids)
        reply_id = f"chatcmpl-{n}"
        messages = request.get("messages") or [{}]
        # A request without tools (the context budget's summary call) gets the answer too.
        answering = messages[-1].get("role") == "tool" or not request.get("tools")
        if answering:
            pieces: list[dict[str, Any]] = [
                {"content": token} for token in answer_tokens(timing.tokens)
            ]
            pieces[0]["role"] = "assistant"
            finish = "stop"
        else:
            call = {"index": 0, "id": f"call_{n}", "type": "function"}
            pieces = [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{**call, "function": {"name": TOOL_NAME, "arguments": ""}}],
                },
                {"tool_calls": [{"index": 0, "function": {"arguments": TOOL_ARGS}}]},
            ]
            finish = "tool_calls"
        latency = timing.latency_ms / 1000
        delay = timing.token_delay_ms / 1000
        if latency:
            await asyncio.sleep(latency)
        if not request.get("stream"):
            if delay:
                await asyncio.sleep(delay * (len(pieces) - 1))
            prompt = _prompt_tokens(messages)
            _send_json(
                writer, _completion_body(reply_id, answering, timing.tokens, n, finish, prompt)
            )
            return
        writer.write(_SSE_HEAD)
        prefix = (
            '{"id":"' + reply_id + '","object":"chat.completion.chunk","created":0,'
            '"model":"' + MODEL_NAME + '","choices":[{"index":0,"delta":'
        )
        for i, delta in enumerate(pieces):
            if i and delay:
                await asyncio.sleep(delay)
            writer.write(_chunk(prefix + json.dumps(delta) + ',"finish_reason":null}]}'))
            await writer.drain()
        writer.write(_chunk(prefix + '{},"finish_reason":"' + finish + '"}]}'))
        writer.write(_chunk("[DONE]") + b"0\r\n\r\n")


_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _chunk(data: str) -> bytes:
    """One SSE `data:` event as one HTTP chunk."""
    payload = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt's size as a tokenizer would count it, roughly (4 characters a token):
    the service calibrates its context budget by it, so a constant would skew the budget."""
    return max(1, len(json.dumps(messages)) // 4)


def _completion_body(
    reply_id: str, answering: bool, tokens: int, n: int, finish: str, prompt: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if answering:
        message["content"] = answer_text(tokens)
    else:
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": TOOL_ARGS},
            }
        ]
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": 0,
        "model": MODEL_NAME,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": tokens,
            "total_tokens": prompt + tokens,
        },
    }


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, path, _ = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    return method, path, headers


def _send_json(writer: asyncio.StreamWriter, body: dict[str, Any], status: int = 200) -> None:
    data = json.dumps(body).encode()
    reason = b"OK" if status == 200 else b"Not Found"
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
        % (status, reason, len(data), data)
    )


async def serve(host: str, port: int, timing: Timing) -> None:
    """Listen on `host:port` (0: any free port), print `PORT <n>`, serve until killed."""
    model = FakeModel(timing)
    server = await asyncio.start_server(model.handle, host, port, backlog=4096, limit=1 << 20)
    bound = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {bound}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.fake_model`: serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m bench.fake_model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--token-delay-ms", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=20)
    args = parser.parse_args(argv)
    timing = Timing(args.latency_ms, args.token_delay_ms, args.tokens)
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(args.host, args.port, timing))
    return 0


if __name__ == "__main__":
    sys.exit(main())
