"""A context window for ScriptedLLM: its own token count, and each provider's real refusal.

    llm.limit_context(8192, wording="llama.cpp")

From then on every chat request's prompt is counted with `TokenCount` (not the agent's
estimate: a different tokenizer, as a real server has), reported as
`usage.prompt_tokens`, and refused as too long the way that provider refuses it:

- `openai`: 400, code `context_length_exceeded`, "This model's maximum context length
  is N tokens. However, your messages resulted in P tokens." (prompt + reply cap);
- `llama.cpp`: 400, type `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`,
  "request (P tokens) exceeds the available context size (N tokens), try increasing it"
  (the prompt alone; llama.cpp cuts the reply short instead);
- `vllm`: 400, "This model's maximum context length is N tokens. However, you requested
  C output tokens and your prompt contains P input tokens, ..." (prompt + reply cap);
- `deepseek`: 400, "... However, you requested T tokens (P in the messages, C in the
  completion) ..." (prompt + reply cap);
- `dashscope`: 400, `invalid_parameter_error`, "<400> InternalError.Algo.InvalidParameter:
  Range of input length should be [1, N]" (N limits the prompt alone).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final

WORDINGS: Final = ("openai", "llama.cpp", "vllm", "deepseek", "dashscope")
_CJK = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


@dataclass(frozen=True)
class TokenCount:
    """The double's tokenizer: tokens per CJK character and characters per other token."""

    cjk: float = 0.8
    chars_per_token: float = 3.6
    per_message: int = 4

    def text(self, value: str) -> int:
        cjk = len(_CJK.findall(value))
        return math.ceil(cjk * self.cjk + (len(value) - cjk) / self.chars_per_token)

    def prompt(self, body: dict[str, Any]) -> int:
        """The prompt tokens of one chat-completions request body."""
        total = 0
        for message in body.get("messages") or []:
            total += self.per_message + self.text(_content(message.get("content")))
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str):
                total += self.text(reasoning)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                total += self.per_message + self.text(
                    str(function.get("name") or "") + str(function.get("arguments") or "")
                )
        if body.get("tools"):
            total += self.text(json.dumps(body["tools"], ensure_ascii=False))
        return total


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def reply_cap(body: dict[str, Any]) -> int:
    """The reply cap a request asked for (0: none)."""
    value = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    return int(value)


@dataclass(frozen=True)
class ContextLimit:
    """A window of `tokens` enforced in one provider's `wording`."""

    tokens: int
    wording: str = "llama.cpp"
    count: TokenCount = TokenCount()

    def __post_init__(self) -> None:
        if self.wording not in WORDINGS:
            raise ValueError(f"unknown wording {self.wording!r}; one of {WORDINGS}")

    def refusal(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The provider's answer refusing `body` as too long, or None when it fits."""
        prompt = self.count.prompt(body)
        completion = reply_cap(body)
        if self.wording == "llama.cpp":
            return too_long("llama.cpp", self.tokens, prompt) if prompt >= self.tokens else None
        if self.wording == "dashscope":
            return too_long("dashscope", self.tokens, prompt) if prompt > self.tokens else None
        if prompt + completion > self.tokens:
            return too_long(self.wording, self.tokens, prompt, completion)
        return None


def too_long(
    wording: str, window: int, prompt: int, completion: int = 0
) -> tuple[int, dict[str, Any]]:
    """The status and body with which `wording`'s provider refuses a too long request."""
    if wording == "openai":
        if completion:
            said = (
                f"This model's maximum context length is {window} tokens. However, you "
                f"requested {prompt + completion} tokens ({prompt} in the messages, "
                f"{completion} in the completion). Please reduce the length of the messages "
                "or completion."
            )
        else:
            said = (
                f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {prompt} tokens. Please reduce the length of the messages."
            )
        error = {
            "message": said,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
        return 400, {"error": error}
    if wording == "llama.cpp":
        error = {
            "code": 400,
            "message": (
                f"request ({prompt} tokens) exceeds the available context size ({window} "
                "tokens), try increasing it"
            ),
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }
        return 400, {"error": error}
    if wording == "vllm":
        said = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{completion} output tokens and your prompt contains {prompt} input tokens, for a "
            f"total of {prompt + completion} tokens. Please reduce the length of the input "
            "prompt or the number of requested output tokens."
        )
        return 400, {
            "error": {"message": said, "type": "BadRequestError", "param": None, "code": 400}
        }
    if wording == "deepseek":
        said = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
        error = {
            "message": said,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
        return 400, {"error": error}
    if wording == "dashscope":
        error = {
            "code": "invalid_parameter_error",
            "param": None,
            "message": (
                f"<400> InternalError.Algo.InvalidParameter: Range of input length should be "
                f"[1, {window}]"
            ),
            "type": "invalid_request_error",
        }
        return 400, {"error": error, "request_id": "3b8b9c1e-scripted"}
    raise ValueError(f"unknown wording {wording!r}; one of {WORDINGS}")
