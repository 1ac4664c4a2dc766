"""The chat model from settings, and the repair of what providers send.

`OpenAICompatibleChat` is ChatOpenAI plus what non-OpenAI endpoints need: reasoning
(`reasoning_content`, `reasoning`, `<think>`) kept as `additional_kwargs["reasoning_content"]`
and never in `content`; tool-call deltas made regular; a reply cut off inside a tool call
refused; and the reasoning of tool-calling turns sent back (DeepSeek's thinking mode
answers 400 without it). The stream-shape details are in `graphs/provider_quirks.py`.
"""

from __future__ import annotations

import inspect
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import LC_ID_PREFIX, AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import ToolCall
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from openai import AsyncStream, RequestOptions, Stream
from pydantic import model_validator

from graphs.provider_quirks import (
    REASONING_KEY,
    ThinkSplitter,
    ToolCallDeltas,
    new_call_id,
    reasoning_of,
    split_think,
)
from graphs.settings import GraphSettings

MISSING_VARIABLE = "模型未配置：需要设置环境变量 {var}（或写入 .env），设置后重新启动再试。"
MODEL_CALL_FAILED = "模型服务调用失败：{detail}"
OUTPUT_TOO_LONG = (
    "模型输出达到长度上限，工具 {name} 的调用参数没有写完，本次调用未执行。"
    "请调大模型的最大输出长度，或把问题拆小后重试。"
)
STREAM_CUT = "模型服务的回复在工具 {name} 的调用参数中途中断，本次调用未执行，请重试。"
STREAM_BROKEN = "模型服务的回复在中途断开（{error}），请重试。"
STREAM_ENDED_EARLY = (
    "模型服务的回复没有结束标记就中断了（finish_reason 缺失），回复不完整，请重试。"
)
# Streamed chunks held before they are merged into the reply so far (see `_agenerate`).
MERGE_EVERY = 256


class ModelError(RuntimeError):
    """The model could not answer; the message is safe to show to users."""


class ModelNotConfigured(ModelError):
    """The model cannot be called because a required variable is missing."""


class ModelCallFailed(ModelError):
    """The model endpoint failed even after the bounded retries."""


class ModelReplyUnreadable(ModelError):
    """The endpoint answered 200 with something that is not a completion."""


REPLY_UNREADABLE = (
    "模型服务的回复无法解析（既不是补全结果，也不是事件流）："
    "请检查 OPENAI_BASE_URL 是否指向兼容 OpenAI 的 /v1 接口"
)


def is_unreadable_reply(exc: ValueError) -> bool:
    """Whether a ValueError from the model call means its answer could not be read.

    The OpenAI client raises JSONDecodeError on a body that is not JSON; LangChain a
    ValueError with this text when an event stream carried no completion at all.
    """
    return isinstance(exc, json.JSONDecodeError) or str(exc) == "No generations found in stream."


class ModelOutputCut(ModelError):
    """The reply ended inside a tool call's arguments; the half call is not run."""


# What to check, by what went wrong; each names the variable that sets it.
CHECK_URL = "请检查 OPENAI_BASE_URL"
NOT_A_MODEL_SERVER = "该地址不是兼容 OpenAI 的模型服务，请检查 OPENAI_BASE_URL（通常以 /v1 结尾）"
CHECK_KEY = "请检查 OPENAI_API_KEY"
CHECK_MODEL = "请检查 OPENAI_MODEL"


def model_call_failed(
    exc: openai.APIError, *, retries: int, redact: Callable[[str], str] = str
) -> ModelCallFailed:
    """A readable error for a failed model call: the URL tried (no credentials, no query),
    what went wrong and which variable to check; no secrets.

    The provider's own message is kept, through `redact`: providers echo the key they
    refused ("Incorrect API key provided: sk-...").
    """
    url = _shown_url(exc)
    if isinstance(exc, openai.APIStatusError):
        body: Any = exc.body if isinstance(exc.body, dict) else {}
        inner = body.get("error", body)
        reason = inner.get("message") if isinstance(inner, dict) else None
        detail = f"{url} 回答 HTTP {exc.status_code}"
        if reason:
            detail += f"（{redact(str(reason))}）"
        if exc.status_code == 429 or exc.status_code >= 500:
            detail += f"，已重试 {retries} 次"
        elif isinstance(inner, dict) and inner.get("code") == "model_not_found":
            detail += f"：{CHECK_MODEL}"
        elif exc.status_code in (404, 405):
            detail += f"：{NOT_A_MODEL_SERVER}"
        elif exc.status_code in (401, 403):
            detail += f"：{CHECK_KEY}"
    elif isinstance(exc, openai.APITimeoutError):
        detail = f"请求 {url} 超时（OPENAI_TIMEOUT），已重试 {retries} 次"
    elif isinstance(exc, openai.APIConnectionError):
        detail = f"无法连接到模型服务 {url}，已重试 {retries} 次：{CHECK_URL}"
    else:
        detail = type(exc).__name__
    return ModelCallFailed(MODEL_CALL_FAILED.format(detail=redact(detail)))


def _shown_url(exc: openai.APIError) -> str:
    """The URL the failed request went to, without credentials or query."""
    try:
        url = exc.request.url
    except (AttributeError, RuntimeError):  # an error made without a request
        return "OPENAI_BASE_URL"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


def make_model(settings: GraphSettings) -> ChatOpenAI:
    """An OpenAI-compatible chat model: temperature 0, bounded retries with backoff.

    The OpenAI client retries 429, 5xx, connection errors and timeouts itself,
    with exponential backoff, `OPENAI_MAX_RETRIES` times.
    """
    if settings.openai_api_key is None:
        raise ModelNotConfigured(MISSING_VARIABLE.format(var="OPENAI_API_KEY"))
    if not settings.openai_model:
        raise ModelNotConfigured(MISSING_VARIABLE.format(var="OPENAI_MODEL"))
    return OpenAICompatibleChat(
        model=settings.openai_model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        temperature=0,
        max_retries=settings.openai_max_retries,
        timeout=settings.openai_timeout_s,
        # Streamed replies report usage too: the context budget counts by it (graphs/window.py).
        stream_usage=True,
    )


_shared: tuple[GraphSettings, ChatOpenAI] | None = None


def shared_model(settings: GraphSettings) -> ChatOpenAI:
    """The process's model for `settings`, made once and reused by every graph.

    Making one builds HTTP clients and TLS contexts, which is start-up work: the
    service calls this before it reports healthy, so no run pays for it.
    """
    global _shared
    if _shared is None or _shared[0] is not settings:
        _shared = (settings, make_model(settings))
    return _shared[1]


def _request_options(params: dict[str, Any]) -> RequestOptions:
    """What `create` sends beside the body, taken out of `params`: its own auth (the API
    key) and the caller's extras, as the SDK's public `RequestOptions`."""
    options: RequestOptions = {"security": {"bearer_auth": True}}
    if (headers := params.pop("extra_headers", None)) is not None:
        options["headers"] = headers
    if (query := params.pop("extra_query", None)) is not None:
        options["params"] = query
    if (extra := params.pop("extra_body", None)) is not None:
        options["extra_json"] = extra
    if "timeout" in params:
        options["timeout"] = params.pop("timeout")
    return options


class _PlainChunks:
    """`chat.completions` whose streamed `create` yields each chunk as the JSON dict it was.

    The SDK's `create` walks every request's messages and tools through their type
    annotations, and builds a pydantic object per streamed chunk that langchain-openai
    turns straight back into a dict (`model_dump`): together about a fifth of a run's
    CPU, and the transform grows with the thread. A streamed request here skips both, a
    whole reply (`with_raw_response.create`, as langchain-openai asks for one) the
    transform; the HTTP client, retries, errors and SSE parsing stay the SDK's.
    Everything else goes to the SDK's own resource.
    """

    def __init__(self, completions: Any, client: Any, *, is_async: bool) -> None:
        self._completions = completions
        self._client = client
        self._stream_cls = AsyncStream[object] if is_async else Stream[object]

    def create(self, **params: Any) -> Any:
        if not params.get("stream"):
            return self._completions.create(**params)
        options = _request_options(params)
        return self._client.post(
            "/chat/completions",
            body=params,
            options=options,
            cast_to=object,
            stream=True,
            stream_cls=self._stream_cls,
        )

    @property
    def with_raw_response(self) -> _WholeReplies:
        """What langchain-openai asks whole replies of: posted as they are, the reply a dict."""
        return _WholeReplies(self)

    def post_whole(self, params: dict[str, Any]) -> Any:
        """A whole (not streamed) reply to `params`, as the JSON it was."""
        options = _request_options(params)
        return self._client.post("/chat/completions", body=params, options=options, cast_to=object)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._completions, name)


class _WholeReplies:
    """`with_raw_response` of `_PlainChunks`: a whole reply skips the SDK's request
    transform too, which walks the whole history and grows with the thread."""

    def __init__(self, chunks: _PlainChunks) -> None:
        self._chunks = chunks

    def create(self, **params: Any) -> Any:
        if params.get("stream"):
            return self._chunks._completions.with_raw_response.create(**params)
        reply = self._chunks.post_whole(params)
        return _parsed_later(reply) if inspect.isawaitable(reply) else _Parsed(reply)


class _Parsed:
    """The part of the SDK's raw response langchain-openai reads: `parse()`."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def parse(self) -> Any:
        return self._body


async def _parsed_later(reply: Awaitable[Any]) -> _Parsed:
    return _Parsed(await reply)


class OpenAICompatibleChat(ChatOpenAI):
    """ChatOpenAI for any OpenAI-compatible endpoint (see the module's docstring).

    langchain-openai 1.x reads only OpenAI's own fields, so a non-OpenAI endpoint's
    reasoning would be dropped; these hooks keep it and regularise the stream.
    Streamed chunks arrive as plain dicts (`_PlainChunks`).
    """

    @model_validator(mode="after")
    def _plain_chunks(self) -> OpenAICompatibleChat:
        # After ChatOpenAI's own validator, which makes the clients.
        if self.root_async_client is not None and not isinstance(self.async_client, _PlainChunks):
            self.async_client = _PlainChunks(
                self.async_client, self.root_async_client, is_async=True
            )
        if self.root_client is not None and not isinstance(self.client, _PlainChunks):
            self.client = _PlainChunks(self.client, self.root_client, is_async=False)
        return self

    def _convert_chunk_to_generation_chunk(
        self,
        chunk: dict[str, Any],
        default_chunk_class: type,
        base_generation_info: dict[str, Any] | None,
    ) -> ChatGenerationChunk | None:
        choices = chunk.get("choices") or []
        delta = choices[0].get("delta") if choices and isinstance(choices[0], dict) else None
        if isinstance(delta, dict) and delta.get("tool_calls"):
            # langchain-openai drops every call of a delta when one lacks "index" or
            # "function"; some servers leave them out.
            calls = [
                {"index": None, **part, "function": part.get("function") or {}}
                for part in delta["tool_calls"]
            ]
            delta = {**delta, "tool_calls": calls}
            chunk = {**chunk, "choices": [{**choices[0], "delta": delta}, *choices[1:]]}
        generation = super()._convert_chunk_to_generation_chunk(
            chunk, default_chunk_class, base_generation_info
        )
        reasoning = reasoning_of(delta) if isinstance(delta, dict) else ""
        if generation is not None and reasoning:
            generation.message.additional_kwargs[REASONING_KEY] = reasoning
        return generation

    def _should_stream(
        self,
        *,
        async_api: bool,
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> bool:
        if async_api and run_manager is not None:
            return False  # an ainvoke: `_agenerate` streams it when upstream would
        return super()._should_stream(async_api=async_api, run_manager=run_manager, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        """The reply; streamed (each chunk to `run_manager`) when upstream would stream it.

        Upstream's own streaming keeps every chunk until the reply ends (about 2 kB a
        token: 60 MB for a 100,000-character reply); this merges them as they come.
        """
        streams = run_manager is not None and super()._should_stream(
            async_api=True, run_manager=run_manager, **kwargs
        )
        if run_manager is None or not streams or self.output_version == "v1":
            return await super()._agenerate(messages, stop, run_manager, **kwargs)
        run_id = f"{LC_ID_PREFIX}-{run_manager.run_id}"
        reply: ChatGenerationChunk | None = None
        held: list[ChatGenerationChunk] = []
        chunk: ChatGenerationChunk | None = None
        # What upstream's `_agenerate_with_cache` does with each chunk, then the last one.
        async for chunk in self._astream(messages, stop=stop, **kwargs):
            info = chunk.generation_info or {}
            chunk.message.response_metadata = {**info, **chunk.message.response_metadata}
            if chunk.message.id is None:
                chunk.message.id = run_id
            await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            held.append(chunk)
            if len(held) >= MERGE_EVERY:
                first, *rest = held if reply is None else [reply, *held]
                reply, held = first + rest, []
        if (
            chunk is not None
            and isinstance(chunk.message, AIMessageChunk)
            and not chunk.message.chunk_position
        ):
            empty: str | list[Any] = "" if isinstance(chunk.message.content, str) else []
            last = AIMessageChunk(content=empty, chunk_position="last", id=run_id)
            await run_manager.on_llm_new_token("", chunk=ChatGenerationChunk(message=last))
            held.append(ChatGenerationChunk(message=last))
        return generate_from_stream(iter(held if reply is None else [reply, *held]))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        retries = self.max_retries or 0
        for attempt in range(retries + 1):
            repair = _StreamRepair()
            try:
                async for raw in super()._astream(messages, stop, None, **kwargs):
                    chunk = repair.chunk(raw)
                    if run_manager:
                        await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk
            except (httpx.TransportError, openai.APIConnectionError) as exc:
                repair.ask_again_after(exc, last=attempt == retries)
                continue
            if repair.is_final(last=attempt == retries):
                break
        tail = repair.finish()
        if tail is not None:
            if run_manager:
                await run_manager.on_llm_new_token(tail.text, chunk=tail)
            yield tail

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        retries = self.max_retries or 0
        for attempt in range(retries + 1):
            repair = _StreamRepair()
            try:
                for raw in super()._stream(messages, stop, None, **kwargs):
                    chunk = repair.chunk(raw)
                    if run_manager:
                        run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                    yield chunk
            except (httpx.TransportError, openai.APIConnectionError) as exc:
                repair.ask_again_after(exc, last=attempt == retries)
                continue
            if repair.is_final(last=attempt == retries):
                break
        tail = repair.finish()
        if tail is not None:
            if run_manager:
                run_manager.on_llm_new_token(tail.text, chunk=tail)
            yield tail

    def _create_chat_result(
        self,
        response: dict[str, Any] | openai.BaseModel,
        generation_info: dict[str, Any] | None = None,
    ) -> ChatResult:
        raw = response if isinstance(response, dict) else response.model_dump()
        if not isinstance(raw.get("choices"), list) and not raw.get("error"):
            # JSON, but not a completion (a proxy's or another API's answer).
            raise ModelReplyUnreadable(REPLY_UNREADABLE)
        result = super()._create_chat_result(response, generation_info)
        for generation, choice in zip(result.generations, raw.get("choices") or [], strict=False):
            message = generation.message
            if not isinstance(message, AIMessage):
                continue
            reasoning = reasoning_of(choice.get("message") or {})
            if isinstance(message.content, str):
                thought, message.content = split_think(message.content)
                reasoning += thought
            if reasoning:
                message.additional_kwargs[REASONING_KEY] = reasoning
            for call in message.tool_calls:
                call["id"] = call["id"] or new_call_id()
            finish = (generation.generation_info or {}).get("finish_reason")
            if finish == "length" and (message.tool_calls or message.invalid_tool_calls):
                calls = [*message.tool_calls, *message.invalid_tool_calls]
                raise ModelOutputCut(OUTPUT_TOO_LONG.format(name=calls[-1]["name"]))
        return result

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "max_completion_tokens" in payload and not is_openai_endpoint(self.openai_api_base):
            # langchain-openai sends OpenAI's name for the reply cap; vLLM, llama.cpp,
            # Ollama, DeepSeek and DashScope read `max_tokens`.
            payload["max_tokens"] = payload.pop("max_completion_tokens")
        messages = self._convert_input(input_).to_messages()
        entries = payload.get("messages")
        if isinstance(entries, list) and len(entries) == len(messages):
            for message, entry in zip(messages, entries, strict=True):
                echo_reasoning(message, entry)
        return payload


def is_openai_endpoint(base_url: str | None) -> bool:
    """Whether `base_url` is OpenAI's own API (or Azure's), which takes `max_completion_tokens`."""
    if not base_url:
        return True
    host = urlsplit(base_url).hostname or ""
    return host == "api.openai.com" or host.endswith(".openai.azure.com")


def echo_reasoning(message: BaseMessage, entry: dict[str, Any]) -> None:
    """Send back the reasoning of an assistant turn that called tools (DeepSeek needs it).

    Other turns' reasoning is not re-sent.
    """
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return
    reasoning = message.additional_kwargs.get(REASONING_KEY)
    if isinstance(reasoning, str):
        entry[REASONING_KEY] = reasoning


class _StreamRepair:
    """One stream's state: `<think>` split off, tool-call deltas renumbered, cut calls refused."""

    def __init__(self) -> None:
        self._think = ThinkSplitter()
        self._calls = ToolCallDeltas()
        self._finish_reason: str | None = None
        self.started = False
        # Whether a reader has seen part of the reply: once it has, the stream cannot be
        # asked again without showing the reply twice.
        self.shown = False

    @property
    def ended(self) -> bool:
        """Whether the server said the reply was over (a `finish_reason`)."""
        return self._finish_reason is not None

    def ask_again_after(self, exc: Exception, *, last: bool) -> None:
        """Return when the stream `exc` broke may be asked again (it showed nothing and
        this was not the `last` try); raise otherwise."""
        if not self.started:
            raise exc  # the request itself failed: the client's error, already retried
        if self.shown or last:
            raise ModelCallFailed(STREAM_BROKEN.format(error=type(exc).__name__)) from exc

    def is_final(self, *, last: bool) -> bool:
        """Whether the stream that ended stands (`finish` judges it) rather than being
        asked again: it finished, showed something, carried nothing at all, or was `last`."""
        return self.ended or self.shown or not self.started or last

    def chunk(self, generation: ChatGenerationChunk) -> ChatGenerationChunk:
        self.started = True
        message = generation.message
        if not isinstance(message, AIMessageChunk):
            return generation
        self.shown = self.shown or bool(
            message.content or message.tool_call_chunks or message.additional_kwargs
        )
        reason = (generation.generation_info or {}).get("finish_reason")
        if reason:
            self._finish_reason = str(reason)
        content: str | list[Any] = message.content
        thought = ""
        if isinstance(content, str) and content:
            thought, content = self._think.feed(content)
        parts = message.tool_call_chunks
        calls = self._calls.normalize(parts) if parts else parts
        if not thought and content is message.content and calls == parts:
            # Most chunks of most providers need nothing: building a new message per
            # token would be the stream's largest cost.
            return generation
        extra = dict(message.additional_kwargs)
        if thought:
            extra[REASONING_KEY] = str(extra.get(REASONING_KEY, "")) + thought
        repaired = AIMessageChunk(
            content=content,
            additional_kwargs=extra,
            response_metadata=message.response_metadata,
            tool_call_chunks=calls,
            usage_metadata=message.usage_metadata,
            id=message.id,
        )
        return ChatGenerationChunk(message=repaired, generation_info=generation.generation_info)

    def finish(self) -> ChatGenerationChunk | None:
        """What the stream still held; raises ModelOutputCut for a call left unfinished and
        ModelCallFailed for a reply that ended without a `finish_reason` (the connection
        closed early: what came is a fragment, not the answer)."""
        cut = self._calls.incomplete(self._finish_reason)
        if cut is not None:
            template = OUTPUT_TOO_LONG if self._finish_reason == "length" else STREAM_CUT
            raise ModelOutputCut(template.format(name=cut.name or "?"))
        if self.started and not self.ended:
            raise ModelCallFailed(STREAM_ENDED_EARLY)
        thought, text = self._think.flush()
        if not thought and not text:
            return None
        extra: Mapping[str, Any] = {REASONING_KEY: thought} if thought else {}
        return ChatGenerationChunk(
            message=AIMessageChunk(content=text, additional_kwargs=dict(extra))
        )


def _misplaced_call(block: Any) -> ToolCall | None:
    """A content block that is really a tool call (has a name and arguments)."""
    if not isinstance(block, dict) or not block.get("name"):
        return None
    if block.get("type") == "tool_call":
        args = block.get("args")
    elif "args" in block or "arguments" in block:
        args = block.get("args", block.get("arguments"))
    else:
        return None
    if isinstance(args, str):
        try:
            args = json.loads(args or "{}")
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    call_id = block.get("id") or f"call_{uuid.uuid4().hex[:24]}"
    return ToolCall(name=str(block["name"]), args=args, id=str(call_id), type="tool_call")


def repair_misplaced_tool_calls(message: AIMessage) -> AIMessage:
    """Move tool calls that a provider streamed into `content` back to `tool_calls`.

    Some OpenAI-compatible providers (seen with DeepSeek in stream mode) end up with
    list content holding blocks that carry `name`/`args`/`id` but are typed as text,
    while `tool_calls` is empty, so the loop would wrongly stop. A message that
    already has tool calls, or plain string content, is returned unchanged.
    """
    if message.tool_calls or not isinstance(message.content, list):
        return message
    calls: list[ToolCall] = []
    text: list[str | dict[str, Any]] = []
    for block in message.content:
        call = _misplaced_call(block)
        if call is not None:
            calls.append(call)
            if isinstance(block, dict) and block.get("text"):
                text.append({"type": "text", "text": block["text"]})
        elif isinstance(block, str) or (isinstance(block, dict) and block.get("text")):
            text.append(block)
    if not calls:
        return message
    return message.model_copy(update={"content": text, "tool_calls": calls})
