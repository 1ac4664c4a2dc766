"""The chat model from settings, and the repair of misplaced tool calls."""

from __future__ import annotations

import json
import uuid
from typing import Any

import openai
from langchain_core.messages import AIMessage
from langchain_core.messages.tool import ToolCall
from langchain_openai import ChatOpenAI

from graphs.settings import GraphSettings

MISSING_VARIABLE = "{var} is not set: export {var} (see the README's configuration table)"
MODEL_CALL_FAILED = "模型服务调用失败：{detail}"


class ModelError(RuntimeError):
    """The model could not answer; the message is safe to show to users."""


class ModelNotConfigured(ModelError):
    """The model cannot be called because a required variable is missing."""


class ModelCallFailed(ModelError):
    """The model endpoint failed even after the bounded retries."""


def model_call_failed(exc: openai.APIError, *, retries: int) -> ModelCallFailed:
    """A readable error for a failed model call (no request details, no secrets)."""
    if isinstance(exc, openai.APIStatusError):
        body: Any = exc.body if isinstance(exc.body, dict) else {}
        inner = body.get("error", body)
        reason = inner.get("message") if isinstance(inner, dict) else None
        detail = f"HTTP {exc.status_code}"
        if reason:
            detail += f"（{reason}）"
        if exc.status_code == 429 or exc.status_code >= 500:
            detail += f"，已重试 {retries} 次"
    elif isinstance(exc, openai.APITimeoutError):
        detail = f"请求超时，已重试 {retries} 次"
    elif isinstance(exc, openai.APIConnectionError):
        detail = f"无法连接到模型服务，已重试 {retries} 次"
    else:
        detail = type(exc).__name__
    return ModelCallFailed(MODEL_CALL_FAILED.format(detail=detail))


def make_model(settings: GraphSettings) -> ChatOpenAI:
    """An OpenAI-compatible chat model: temperature 0, bounded retries with backoff.

    The OpenAI client retries 429, 5xx, connection errors and timeouts itself,
    with exponential backoff, `OPENAI_MAX_RETRIES` times.
    """
    if settings.openai_api_key is None:
        raise ModelNotConfigured(MISSING_VARIABLE.format(var="OPENAI_API_KEY"))
    if not settings.openai_model:
        raise ModelNotConfigured(MISSING_VARIABLE.format(var="OPENAI_MODEL"))
    return ChatOpenAI(
        model=settings.openai_model,
        api_key=settings.openai_api_key,
        base_url=settings.openai_base_url,
        temperature=0,
        max_retries=settings.openai_max_retries,
        timeout=settings.openai_timeout_s,
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
