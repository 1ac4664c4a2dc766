"""ScriptedLLM: an OpenAI-compatible chat-completions server that replays scripted turns.

    llm.script(text("你好"), tool_call("get_weather", {"location": "北京"}))

Each request to `POST /v1/chat/completions` consumes the next turn, streamed as SSE
`chat.completion.chunk`s when the request says `stream: true`, else one JSON
`chat.completion`. Every request body is kept in `llm.requests`.

A context window (`llm.limit_context(n, wording=...)`, `tests/doubles/context_limits.py`)
makes the double count each prompt with its own tokenizer, report the count as
`usage.prompt_tokens` and refuse a too long request the way that provider does, without
using up a turn. `serve_props`, `serve_models` and `serve_ollama_show` answer the
window questions of llama.cpp (`GET /props`), vLLM (`GET /v1/models`) and Ollama
(`POST /api/show`); `discovery_requests` lists what was asked.

Provider conformance: a turn can be shaped as a real endpoint streams it
(`provider(turn, call_shape=...)`, `deepseek(...)`, `ollama_calls(...)`, `cut_off(...)`,
`think(...)`, `honoring_stop(...)`); see the `Turn` fields below. `react(...)` writes a
text-mode ReAct reply (Thought / Action / Action Input / Final Answer).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.doubles._server import ServedDouble, ServerThread
from tests.doubles.context_limits import ContextLimit, TokenCount, too_long

# What `usage.prompt_tokens` says when no window counts the prompt.
DEFAULT_PROMPT_TOKENS = 10
OUT_OF_SCRIPT = "ScriptedLLM: script ran out at request #{n} (add a turn with llm.script(...))"
# How long a paused stream waits for the test's release at most.
PAUSE_S = 60.0
HANG_RELEASED = "ScriptedLLM: the hanging reply was released before it finished"

_ids = itertools.count(1)


@dataclass(frozen=True)
class Call:
    """One tool call of a scripted turn."""

    name: str
    args: dict[str, Any] | str
    id: str | None = None
    split: bool = True

    @property
    def arguments(self) -> str:
        """The arguments as the JSON text the model emits."""
        if isinstance(self.args, str):
            return self.args
        return json.dumps(self.args, ensure_ascii=False)


@dataclass(frozen=True)
class Turn:
    """One scripted model reply: text, tool calls, an HTTP error or a hang."""

    content: str = ""
    calls: tuple[Call, ...] = ()
    interleave: bool = False
    chunk_size: int = 3
    delay_s: float = 0.0
    status: int = 200
    error_body: dict[str, Any] | None = None
    retry_after_s: float | None = None
    should_retry: bool | None = None
    hang_s: float = 0.0
    # Nothing is sent until `ScriptedLLM.release()` (or this long); then the whole turn.
    hold_s: float = 0.0
    # Streaming: the content is sent up to the end of this text, then the rest only once
    # the test calls `ScriptedLLM.release()` (or after PAUSE_S).
    pause_after: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    # --- provider shapes (defaults: OpenAI's own) ------------------------------------
    # The delta/message field the reasoning goes in ("reasoning" for some servers).
    reasoning_field: str = "reasoning_content"
    # How tool-call deltas look; see CALL_SHAPES.
    call_shape: str = "openai"
    # "" whole; "end": the body ends halfway through the last call's arguments (no finish
    # chunk, no [DONE]); "length": the arguments stop halfway, finish_reason "length";
    # "drop": the connection breaks halfway through them.
    cut: str = ""
    # DeepSeek thinking mode: 400 unless every earlier assistant turn with tool calls
    # carries `reasoning_content`.
    requires_reasoning_echo: bool = False
    # Cut the content at the request's first `stop` sequence (the default ignores stop).
    honor_stop: bool = False
    # A 200 whose body is not what was asked for (an HTML error page from a proxy).
    garbage: str = ""
    # An error turn's message, made at request time from the Authorization header the
    # request carried (a provider echoing the key it refused); None: `error_body` as is.
    echo: Callable[[str], str] | None = None


# How a turn's tool-call deltas are shaped:
CALL_SHAPES = (
    "openai",  # vLLM / llama.cpp / OpenAI: id, type, name first, then argument pieces
    "repeat",  # DashScope: every delta repeats id, type and name
    "null_id",  # DashScope: later deltas carry "id": null, "name": null explicitly
    "same_index",  # parallel calls all at index 0 (each call's first delta has its id)
    "one_delta",  # Ollama: every call whole, all in one delta
)
CUTS = ("", "end", "length", "drop")
DEEPSEEK_MISSING_REASONING = (
    "Missing `reasoning_content` field in the assistant message at message index {i}. "
    "For more information, please refer to "
    "https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)


def text(content: str, *, chunk_size: int = 3, delay_s: float = 0.0) -> Turn:
    """A text reply, streamed `chunk_size` characters at a time, `delay_s` between chunks."""
    return Turn(content=content, chunk_size=chunk_size, delay_s=delay_s)


def call(
    name: str, args: dict[str, Any] | str, *, id: str | None = None, split: bool = True
) -> Call:
    """A tool call to put into `tool_calls([...])`."""
    return Call(name=name, args=args, id=id, split=split)


def tool_call(
    name: str,
    args: dict[str, Any] | str,
    *,
    id: str | None = None,
    split: bool = True,
    content: str = "",
    chunk_size: int = 3,
    delay_s: float = 0.0,
) -> Turn:
    """A reply with one tool call (after optional text `content`).

    split=True streams the arguments over many small chunks, the name only in the first;
    split=False sends id, name and the whole arguments in one chunk.
    """
    return Turn(
        content=content,
        calls=(Call(name=name, args=args, id=id, split=split),),
        chunk_size=chunk_size,
        delay_s=delay_s,
    )


def tool_calls(
    calls: Iterable[Call | Turn | tuple[str, dict[str, Any] | str]],
    *,
    interleave: bool = True,
    content: str = "",
    chunk_size: int = 3,
    delay_s: float = 0.0,
) -> Turn:
    """A reply with several parallel tool calls; interleave=True mixes their chunks."""
    flat: list[Call] = []
    for item in calls:
        if isinstance(item, Call):
            flat.append(item)
        elif isinstance(item, Turn):
            flat.extend(item.calls)
        else:
            flat.append(Call(name=item[0], args=item[1]))
    return Turn(
        content=content,
        calls=tuple(flat),
        interleave=interleave,
        chunk_size=chunk_size,
        delay_s=delay_s,
    )


def error(
    status: int,
    body: dict[str, Any] | None = None,
    *,
    retry_after_s: float | None = 0.01,
    echo: Callable[[str], str] | None = None,
) -> Turn:
    """An HTTP error with OpenAI's error JSON (a short `retry-after-ms` keeps retries fast).

    With `echo`, the message is `echo(<the request's Authorization header>)`, as a
    provider answering "Incorrect API key provided: sk-..." writes it.
    """
    if body is None:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            429: "rate_limit_exceeded",
        }.get(status, "server_error")
        body = {
            "error": {
                "message": f"scripted error {status}",
                "type": kind,
                "param": None,
                "code": kind,
            }
        }
    return Turn(status=status, error_body=body, retry_after_s=retry_after_s, echo=echo)


def hang(seconds: float = 60.0, *, partial: str = "") -> Turn:
    """A reply that waits `seconds` (ended early by `llm.reset()`, stop or disconnect).

    Streaming: the role chunk and `partial` text are sent first, then the stream stalls.
    """
    return Turn(content=partial, hang_s=seconds)


def held(then: Turn, seconds: float = 60.0) -> Turn:
    """`then`, answered in full once the test calls `llm.release()` (or after `seconds`)."""
    return replace(then, hold_s=seconds)


def paused(turn: Turn, *, after: str) -> Turn:
    """`turn`, its stream stopping after the content `after` until `llm.release()`."""
    if after not in turn.content:
        raise ValueError(f"{after!r} is not in the turn's content")
    return replace(turn, pause_after=after)


def garbage(body: str = "<html><body>502 Bad Gateway</body></html>") -> Turn:
    """A 200 answer with a body that is neither a completion nor an event stream."""
    return Turn(garbage=body)


def reasoning(thought: str, then: Turn) -> Turn:
    """`then`, preceded by DeepSeek-style `reasoning_content` deltas."""
    return replace(then, reasoning=thought)


def provider(turn: Turn, **shape: Any) -> Turn:
    """`turn` with provider-shape fields set, e.g. `provider(t, call_shape="repeat")`."""
    if shape.get("call_shape", "openai") not in CALL_SHAPES:
        raise ValueError(f"unknown call_shape {shape['call_shape']!r}")
    if shape.get("cut", "") not in CUTS:
        raise ValueError(f"unknown cut {shape['cut']!r}")
    return replace(turn, **shape)


def deepseek(thought: str, then: Turn) -> Turn:
    """DeepSeek's thinking mode: `reasoning_content` first, then `then`; the request must
    send back the reasoning of every earlier tool-calling assistant turn, else 400."""
    return replace(then, reasoning=thought, requires_reasoning_echo=True)


def ollama_calls(calls: Iterable[Call | tuple[str, dict[str, Any] | str]]) -> Turn:
    """Ollama's shape: every call whole in one delta, and finish_reason "stop"."""
    return provider(tool_calls(calls), call_shape="one_delta", finish_reason="stop")


def cut_off(turn: Turn, how: str = "end") -> Turn:
    """`turn` broken off halfway through its last call's arguments (see `Turn.cut`)."""
    return provider(turn, cut=how)


def think(thought: str, answer: str, *, chunk_size: int = 3) -> Turn:
    """A reply whose content opens with `<think>thought</think>` before the answer."""
    return text(f"<think>{thought}</think>\n\n{answer}", chunk_size=chunk_size)


def react(
    thought: str = "",
    *,
    action: str | None = None,
    args: dict[str, Any] | str | None = None,
    answer: str | None = None,
    invented: str = "",
    chunk_size: int = 3,
) -> Turn:
    """A text-mode ReAct reply: `Thought:`, then `Action:` + `Action Input:` or `Final Answer:`.

    `invented` is what a model that ignores `stop` writes on: `Observation: <invented>`.
    """
    lines = [f"Thought: {thought}"] if thought else []
    if action is not None:
        lines.append(f"Action: {action}")
        if args is not None:
            body = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            lines.append(f"Action Input: {body}")
    if answer is not None:
        lines.append(f"Final Answer: {answer}")
    if invented:
        lines.append(f"Observation: {invented}")
    return text("\n".join(lines), chunk_size=chunk_size)


def refused_as_too_long(wording: str, window: int, prompt: int, completion: int = 0) -> Turn:
    """A refusal of the request as too long, in the real words of `wording`'s provider."""
    status, body = too_long(wording, window, prompt, completion)
    return Turn(status=status, error_body=body, should_retry=False)


def honoring_stop(turn: Turn) -> Turn:
    """`turn` cut at the request's first stop sequence, as real endpoints do."""
    return replace(turn, honor_stop=True)


Fallback = Callable[[dict[str, Any]], Turn]


@dataclass
class _State:
    turns: deque[Turn] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    limit: ContextLimit | None = None
    refused: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    discovery: list[str] = field(default_factory=list)
    props: dict[str, Any] | None = None
    max_model_len: int | None = None
    ollama_show: dict[str, Any] | None = None


class ScriptedLLM(ServedDouble):
    """The OpenAI-compatible double; `url` ends in `/v1` (OPENAI_BASE_URL)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._state = _State()
        self.fallback: Fallback | None = None
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/props", self._props, methods=["GET"]),
                Route("/api/show", self._ollama_show, methods=["POST"]),
            ]
        )
        self._server = ServerThread(app)

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, ending in `/v1`."""
        return f"{self._server.url}/v1"

    # --- script ----------------------------------------------------------------------

    def script(self, *turns: Turn) -> None:
        """Append turns; each request consumes the next one."""
        with self._lock:
            self._state.turns.extend(turns)

    def reset(self) -> None:
        """Forget turns, requests and the fallback; release hanging replies."""
        with self._lock:
            self._state = _State()
            self.fallback = None
        self.release()

    def release(self) -> None:
        """Let the replies held or hanging now go on (a later one waits again)."""
        self._server.release_hangs()

    def limit_context(
        self, tokens: int, *, wording: str = "llama.cpp", count: TokenCount | None = None
    ) -> None:
        """Enforce a window of `tokens`, refusing in `wording` (see `context_limits`)."""
        limit = ContextLimit(tokens, wording, count or TokenCount())
        with self._lock:
            self._state.limit = limit

    def serve_props(self, props: dict[str, Any]) -> None:
        """Answer llama.cpp's `GET /props` with `props` (unset: 404)."""
        with self._lock:
            self._state.props = props

    def serve_models(self, max_model_len: int) -> None:
        """List the model in `GET /v1/models` with vLLM's `max_model_len`."""
        with self._lock:
            self._state.max_model_len = max_model_len

    def serve_ollama_show(self, shown: dict[str, Any]) -> None:
        """Answer Ollama's `POST /api/show` with `shown` (unset: 404)."""
        with self._lock:
            self._state.ollama_show = shown

    @property
    def refused(self) -> list[dict[str, Any]]:
        """The request bodies refused as too long by `limit_context`'s window."""
        with self._lock:
            return list(self._state.refused)

    @property
    def prompt_tokens(self) -> list[int]:
        """Each request's prompt as the window counts it (refused ones too)."""
        with self._lock:
            return list(self._state.prompt_tokens)

    @property
    def discovery_requests(self) -> list[str]:
        """`METHOD /path` of every window question asked (props, models, show)."""
        with self._lock:
            return list(self._state.discovery)

    @property
    def pending(self) -> int:
        """Scripted turns not consumed yet."""
        with self._lock:
            return len(self._state.turns)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received so far (a copy)."""
        with self._lock:
            return list(self._state.requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every request (lower-case names)."""
        with self._lock:
            return list(self._state.headers)

    @property
    def last_request(self) -> dict[str, Any]:
        """The most recent request body."""
        with self._lock:
            if not self._state.requests:
                raise AssertionError("ScriptedLLM received no request")
            return self._state.requests[-1]

    def wait_for_requests(self, n: int, within_s: float = 5.0) -> list[dict[str, Any]]:
        """Block until at least `n` requests arrived; raises TimeoutError otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._state.requests) >= n, within_s):
                got = len(self._state.requests)
                raise TimeoutError(f"ScriptedLLM got {got} request(s), expected {n}")
            return list(self._state.requests)

    async def await_requests(self, n: int, within_s: float = 5.0) -> list[dict[str, Any]]:
        """`wait_for_requests` without blocking the caller's event loop."""
        return await asyncio.to_thread(self.wait_for_requests, n, within_s)

    def _next_turn(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[Turn, int]:
        with self._lock:
            self._state.requests.append(body)
            self._state.headers.append(headers)
            n = len(self._state.requests)
            turn = self._state.turns.popleft() if self._state.turns else None
            fallback = self.fallback
            self._lock.notify_all()
        if turn is None and fallback is not None:
            turn = fallback(body)
        if turn is None:
            return _out_of_script(n), n
        return turn, n

    # --- HTTP ------------------------------------------------------------------------

    def _asked(self, request: Request) -> _State:
        with self._lock:
            self._state.discovery.append(f"{request.method} {request.url.path}")
            return self._state

    async def _models(self, request: Request) -> Response:
        model: dict[str, Any] = {"id": "test-model", "object": "model", "owned_by": "test"}
        length = self._asked(request).max_model_len
        if length is not None:
            model["max_model_len"] = length
        return JSONResponse({"object": "list", "data": [model]})

    async def _props(self, request: Request) -> Response:
        props = self._asked(request).props
        if props is None:
            return JSONResponse(_error_body("File Not Found", "not_found_error"), 404)
        return JSONResponse(props)

    async def _ollama_show(self, request: Request) -> Response:
        shown = self._asked(request).ollama_show
        if shown is None:
            return Response("404 page not found", status_code=404)
        return JSONResponse(shown)

    def _measured(
        self, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[Response | None, int]:
        """The window's refusal of `body` (recorded as a request, no turn used) or None,
        and the prompt tokens to report."""
        with self._lock:
            limit = self._state.limit
            if limit is None:
                return None, DEFAULT_PROMPT_TOKENS
            counted = limit.count.prompt(body)
            self._state.prompt_tokens.append(counted)
            refusal = limit.refusal(body)
            if refusal is None:
                return None, counted
            self._state.requests.append(body)
            self._state.headers.append(headers)
            self._state.refused.append(body)
            self._lock.notify_all()
        status, error_body = refusal
        turn = Turn(status=status, error_body=error_body, should_retry=False)
        return _error_response(turn), counted

    async def _completions(self, request: Request) -> Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return JSONResponse(_error_body("invalid JSON body", "invalid_request_error"), 400)
        headers = {k.lower(): v for k, v in request.headers.items()}
        refused, prompt_tokens = self._measured(body, headers)
        if refused is not None:
            return refused
        turn, n = self._next_turn(body, headers)
        if turn.hold_s:
            await self._server.hang(turn.hold_s)
        if turn.requires_reasoning_echo:
            turn = _check_reasoning_echo(turn, body)
        if turn.status != 200:
            if turn.echo is not None:
                turn = _echoed(turn, request.headers.get("authorization", ""))
            return _error_response(turn)
        if turn.garbage:
            kind = "text/event-stream" if body.get("stream") else "application/json"
            return Response(turn.garbage, media_type=kind)
        if turn.honor_stop:
            turn = _apply_stop(turn, body.get("stop"))
        reply = _Reply(
            turn, model=str(body.get("model") or "test-model"), n=n, prompt_tokens=prompt_tokens
        )
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                self._stream(reply, include_usage),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        if turn.hang_s and not await self._server.hang(turn.hang_s, request):
            return _error_response(Turn(status=503, error_body=_error_body(HANG_RELEASED)))
        return JSONResponse(reply.completion())

    async def _stream(self, reply: _Reply, include_usage: bool) -> AsyncIterator[str]:
        turn = reply.turn
        for i, chunk in enumerate(reply.chunks(include_usage)):
            if i and turn.delay_s:
                await asyncio.sleep(turn.delay_s)
            yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
            if turn.hang_s and i == reply.hang_after:
                # Stalls mid-stream; a released hang ends the stream without a finish chunk.
                await self._server.hang(turn.hang_s)
                return
            if i == reply.pause_after:
                await self._server.hang(PAUSE_S)
        if turn.cut == "drop":
            raise ConnectionDropped  # the server goes away: the body is never completed
        if turn.cut != "end":
            yield "data: [DONE]\n\n"


class ConnectionDropped(Exception):
    """Raised inside a stream whose turn has `cut="drop"`: the connection breaks."""


class _QuietDrops(logging.Filter):
    """Keeps uvicorn from printing a traceback for a connection dropped on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ConnectionDropped))


logging.getLogger("uvicorn.error").addFilter(_QuietDrops())


def _check_reasoning_echo(turn: Turn, body: dict[str, Any]) -> Turn:
    """DeepSeek's rule: every assistant turn with tool calls sends back its reasoning."""
    for i, message in enumerate(body.get("messages") or []):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        if not isinstance(message.get("reasoning_content"), str):
            return Turn(
                status=400,
                error_body=_error_body(
                    DEEPSEEK_MISSING_REASONING.format(i=i), "invalid_request_error"
                ),
                should_retry=False,
            )
    return turn


def _apply_stop(turn: Turn, stop: Any) -> Turn:
    sequences = [stop] if isinstance(stop, str) else list(stop or [])
    cuts = [turn.content.find(s) for s in sequences if s and s in turn.content]
    return replace(turn, content=turn.content[: min(cuts)]) if cuts else turn


class _Reply:
    """Renders one turn as OpenAI's JSON completion or its stream of chunks."""

    def __init__(self, turn: Turn, *, model: str, n: int, prompt_tokens: int) -> None:
        self.turn = turn
        self.prompt_tokens = prompt_tokens
        self.model = model
        self.id = f"chatcmpl-scripted{n:04d}"
        self.created = int(time.time())
        self.calls = [
            (c, c.id or f"call_scripted{next(_ids):04d}_{i}") for i, c in enumerate(turn.calls)
        ]
        if turn.cut and self.calls:
            # The last call's arguments stop halfway.
            last, call_id = self.calls[-1]
            half = last.arguments[: max(1, len(last.arguments) // 2)]
            self.calls[-1] = (replace(last, args=half), call_id)
        self.hang_after = -1
        self.pause_after = -1

    @property
    def finish_reason(self) -> str:
        if self.turn.cut == "length":
            return "length"
        if self.turn.finish_reason:
            return self.turn.finish_reason
        return "tool_calls" if self.calls else "stop"

    def usage(self) -> dict[str, Any]:
        completion = len(self.turn.content) + sum(len(c.arguments) for c, _ in self.calls)
        completion_tokens = max(1, completion // 2)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }

    def completion(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.turn.content or (None if self.calls else ""),
            "refusal": None,
        }
        if self.turn.reasoning:
            message[self.turn.reasoning_field] = self.turn.reasoning
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c, call_id in self.calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(),
        }

    def _chunk(
        self, delta: dict[str, Any], finish: str | None = None, *, usage: bool
    ) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_scripted",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage:
            chunk["usage"] = None
        return chunk

    def chunks(self, include_usage: bool) -> list[dict[str, Any]]:
        turn = self.turn
        size = max(1, turn.chunk_size)
        deltas: list[dict[str, Any]] = []
        first: dict[str, Any] = {"role": "assistant", "content": "", "refusal": None}
        deltas.append(first)
        deltas.extend({turn.reasoning_field: piece} for piece in _pieces(turn.reasoning, size))
        if turn.pause_after:
            sent = turn.content.index(turn.pause_after) + len(turn.pause_after)
            self.pause_after = len(deltas) + (sent - 1) // size
        deltas.extend({"content": piece} for piece in _pieces(turn.content, size))
        if turn.hang_s:
            self.hang_after = len(deltas) - 1
        deltas.extend(self._call_deltas(size))
        if self.calls and not turn.content and not turn.reasoning:
            # OpenAI opens a tool-call reply with content null and the first call inline.
            first["content"] = None
            first.update(deltas.pop(1))
        out = [self._chunk(d, usage=include_usage) for d in deltas]
        if turn.cut in ("end", "drop"):
            return out  # broken off: no finish chunk, no usage
        out.append(self._chunk({}, self.finish_reason, usage=include_usage))
        if include_usage:
            out.append({**self._chunk({}, usage=False), "choices": [], "usage": self.usage()})
        return out

    def _call_deltas(self, size: int) -> list[dict[str, Any]]:
        shape = self.turn.call_shape
        if shape == "one_delta":
            whole = [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for index, (c, call_id) in enumerate(self.calls)
            ]
            return [{"tool_calls": whole}] if whole else []
        streams: list[list[dict[str, Any]]] = []
        for position, (c, call_id) in enumerate(self.calls):
            index = 0 if shape == "same_index" else position
            head = {"index": index, "id": call_id, "type": "function"}
            if not c.split:
                streams.append([{**head, "function": {"name": c.name, "arguments": c.arguments}}])
                continue
            parts = [{**head, "function": {"name": c.name, "arguments": ""}}]
            parts.extend(
                _continuation(shape, head, c.name, piece) for piece in _pieces(c.arguments, size)
            )
            streams.append(parts)
        if self.turn.interleave:
            ordered = [
                part
                for group in itertools.zip_longest(*streams)
                for part in group
                if part is not None
            ]
        else:
            ordered = [part for stream in streams for part in stream]
        return [{"tool_calls": [part]} for part in ordered]


def _continuation(shape: str, head: dict[str, Any], name: str, piece: str) -> dict[str, Any]:
    """A later delta of one call: an argument piece, shaped as `shape` sends it."""
    if shape == "repeat":
        return {**head, "function": {"name": name, "arguments": piece}}
    if shape == "null_id":
        return {
            "index": head["index"],
            "id": None,
            "type": "function",
            "function": {"name": None, "arguments": piece},
        }
    return {"index": head["index"], "function": {"arguments": piece}}


def _pieces(value: str, size: int) -> Sequence[str]:
    return [value[i : i + size] for i in range(0, len(value), size)]


def _error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _out_of_script(n: int) -> Turn:
    # A missing turn must fail loudly at once, not after the client's retries.
    return Turn(status=500, error_body=_error_body(OUT_OF_SCRIPT.format(n=n)), should_retry=False)


def _echoed(turn: Turn, authorization: str) -> Turn:
    """`turn` with its error message made by `turn.echo` from the Authorization header."""
    assert turn.echo is not None
    body = dict(turn.error_body or _error_body(""))
    inner = body.get("error")
    message = turn.echo(authorization)
    if isinstance(inner, dict):
        body["error"] = {**inner, "message": message}
    else:
        body["message"] = message
    return replace(turn, error_body=body)


def _error_response(turn: Turn) -> Response:
    headers: dict[str, str] = {}
    if turn.retry_after_s is not None:
        headers["retry-after-ms"] = str(int(turn.retry_after_s * 1000) or 1)
    if turn.should_retry is not None:
        headers["x-should-retry"] = "true" if turn.should_retry else "false"
    return JSONResponse(turn.error_body, status_code=turn.status, headers=headers)
