"""What this process knows of the model's context window, and how its tokens count.

The window is `AGENT_CONTEXT_TOKENS` when set. Otherwise the server is asked once, at
the first model call, with a short timeout, and a failure costs nothing but the
answer: llama.cpp `GET /props` (`default_generation_settings.n_ctx`, or `n_ctx` at its
root), vLLM `GET /v1/models` (`max_model_len`), Ollama `POST /api/show` (`num_ctx`
when its model file sets it, else `<arch>.context_length`). Then a table of
well-known model names, then `DEFAULT_WINDOW`.

A provider that refuses a request as too long names its limit (`refusal_of` reads the
real wordings of OpenAI, llama.cpp, vLLM, DeepSeek and DashScope); the process keeps
it, so only the first request can overflow. The provider's own `usage.prompt_tokens`
calibrates the character estimate of `graphs/context.py` (`ContextWindow.ratio`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from contextvars import Context
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import httpx
import openai
from langchain_core.exceptions import ContextOverflowError

from graphs.settings import GraphSettings

logger = logging.getLogger(__name__)

DEFAULT_WINDOW: Final = 32_768
DISCOVERY_TIMEOUT_S: Final = 3.0
# A refusal that names no limit: the next try assumes this share of the window used.
UNNAMED_SHRINK: Final = 0.75
# A refusal that shows the estimate low: real tokens per estimated token, this much over.
ESTIMATE_BUMP: Final = 1.1
# Real tokens per estimated token stay within these (a server reporting nonsense).
RATIO_RANGE: Final = (0.4, 3.0)

WINDOW_SETTLED = "context window %d tokens for model %s (from %s)"
WINDOW_LEARNED = "context window of model %s learned from a refusal: %s"

WindowSource = Literal[
    "AGENT_CONTEXT_TOKENS", "llama.cpp", "vLLM", "Ollama", "model table", "default", "refusal"
]

# Well-known models, by the start of their normalised name (see `_normalised`); the
# longest match wins. Hosted endpoints mostly: local servers are asked instead.
KNOWN_WINDOWS: Final[dict[str, int]] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "deepseek": 131_072,
    "qwen-max": 32_768,
    "qwen-plus": 131_072,
    "qwen-turbo": 131_072,
    "qwen2.5": 32_768,
    "qwen3": 32_768,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama-3": 8_192,
}

# --- what providers say when a request is too long ----------------------------------
_TOO_LONG = re.compile(
    r"context_length_exceeded|exceed_context_size_error|exceeds? (?:the available )?context size"
    r"|maximum context length|larger than the max context size|exceeds the context window"
    r"|Range of input length should be|prompt is too long|input is too long",
    re.IGNORECASE,
)
# The window: OpenAI, vLLM and DeepSeek ("This model's maximum context length is N
# tokens"), llama.cpp ("... exceeds the available context size (N tokens)").
_WINDOW = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),
    re.compile(r"context size \((\d+) tokens\)", re.IGNORECASE),
)
# DashScope limits the input alone: "Range of input length should be [1, N]".
_INPUT_LIMIT = (re.compile(r"Range of input length should be \[\d+,\s*(\d+)\]", re.IGNORECASE),)
# The refused prompt's real size: OpenAI ("your messages resulted in N tokens"),
# DeepSeek and older vLLM ("(N in the messages"), vLLM ("your prompt contains [at least]
# N input tokens", "your request has N input tokens"), llama.cpp ("request (N tokens)").
_PROMPT = (
    re.compile(r"resulted in (\d+) tokens", re.IGNORECASE),
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),
    re.compile(r"contains (?:at least )?(\d+) input tokens", re.IGNORECASE),
    re.compile(r"has (\d+) input tokens", re.IGNORECASE),
    re.compile(r"(?:request|input) \((\d+) tokens\)", re.IGNORECASE),
)
_FUNCTIONS = re.compile(r"(\d+) in the functions", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """A model's context window: prompt and reply together, in tokens, and where it came from.

    `input_limit` is a provider's cap on the prompt alone, when it has one (DashScope's).
    """

    tokens: int
    source: WindowSource
    input_limit: int | None = None


@dataclass(frozen=True)
class Refusal:
    """A provider's refusal of a request as too long, with the sizes it named (or None)."""

    window: int | None
    input_limit: int | None
    prompt_tokens: int | None


def refusal_of(exc: openai.APIStatusError) -> Refusal | None:
    """The refusal `exc` is, if the provider said the request was too long."""
    body: Any = exc.body if isinstance(exc.body, dict) else {}
    message = str(body.get("message") or exc.message)
    said = " ".join([message, str(body.get("type") or ""), str(body.get("code") or "")])
    if not isinstance(exc, ContextOverflowError) and not _TOO_LONG.search(said):
        return None
    prompt = _count(body.get("n_prompt_tokens")) or _first(_PROMPT, message)
    functions = _FUNCTIONS.search(message)
    if prompt is not None and functions is not None:
        prompt += int(functions.group(1))  # OpenAI names the tools' share apart
    return Refusal(
        window=_count(body.get("n_ctx")) or _first(_WINDOW, message),
        input_limit=_first(_INPUT_LIMIT, message),
        prompt_tokens=prompt,
    )


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# --- the process's knowledge, per endpoint and model ---------------------------------


class ContextWindow:
    """One endpoint and model's window as this process knows it, and its token ratio."""

    def __init__(self, settings: GraphSettings) -> None:
        self._settings = settings
        configured = settings.agent_context_tokens
        self._base = Window(configured, "AGENT_CONTEXT_TOKENS") if configured else None
        self._asking: asyncio.Task[Window] | None = None
        self._learned: Window | None = None
        self._ratio: float | None = None

    @property
    def known(self) -> Window | None:
        """The window as known now, without asking the server (None: not asked yet)."""
        if self._base is None:
            return None
        learned = self._learned
        if learned is None:
            return self._base
        narrowed = learned.tokens < self._base.tokens or learned.input_limit is not None
        return Window(
            min(self._base.tokens, learned.tokens),
            "refusal" if narrowed else self._base.source,
            learned.input_limit,
        )

    async def window(self) -> Window:
        """The window, asking the server the first time (once per process)."""
        if self._base is None:
            task = self._asking
            loop = asyncio.get_running_loop()
            if task is None or task.get_loop() is not loop:
                # The question is the process's, not the run's that happens to ask first:
                # an empty context keeps it out of that run's trace and log lines.
                task = self._asking = loop.create_task(self._settle(), context=Context())
            # Shielded: a run cancelled meanwhile must not cancel the question for the others.
            self._base = await asyncio.shield(task)
        known = self.known
        assert known is not None
        return known

    async def _settle(self) -> Window:
        settings = self._settings
        window = await discover_window(settings) or table_window(settings.openai_model)
        logger.info(WINDOW_SETTLED, window.tokens, settings.openai_model, window.source)
        return window

    @property
    def ratio(self) -> float:
        """Real tokens per estimated token, from the provider's reports (1.0 before any)."""
        return self._ratio or 1.0

    def calibrate(self, estimated: float, reported: int) -> None:
        """Take in what the provider reported for a prompt estimated at `estimated`."""
        if estimated <= 0 or reported <= 0:
            return
        low, high = RATIO_RANGE
        seen = min(high, max(low, reported / estimated))
        self._ratio = seen if self._ratio is None else (self._ratio + seen) / 2

    def learn(self, refusal: Refusal, *, used: Window, reply: int, estimated: float) -> None:
        """Take in a refusal of a prompt estimated at `estimated` under the window `used`
        with the reply cap `reply`."""
        if refusal.prompt_tokens:
            self.calibrate(estimated, refusal.prompt_tokens)
        learned = self._learned or Window(used.tokens, "refusal")
        if refusal.input_limit:
            limit = min(refusal.input_limit, learned.input_limit or refusal.input_limit)
            learned = replace(learned, input_limit=limit)
            floor = refusal.input_limit
        elif refusal.window:
            learned = replace(learned, tokens=min(refusal.window, learned.tokens))
            floor = refusal.window - reply
        else:
            learned = replace(learned, tokens=int(used.tokens * UNNAMED_SHRINK))
            floor = 0
        if not refusal.prompt_tokens and estimated > 0 and floor / estimated > self.ratio:
            # The prompt was over `floor` tokens: the estimate counted too few per token.
            self._ratio = min(RATIO_RANGE[1], floor / estimated * ESTIMATE_BUMP)
        self._learned = learned
        logger.info(WINDOW_LEARNED, self._settings.openai_model, self.known)


_windows: dict[tuple[str, str, int | None], ContextWindow] = {}


def context_window(settings: GraphSettings) -> ContextWindow:
    """The process's knowledge of the window of `settings`' endpoint and model."""
    key = (
        settings.openai_base_url or "",
        settings.openai_model or "",
        settings.agent_context_tokens,
    )
    known = _windows.get(key)
    if known is None:
        known = _windows[key] = ContextWindow(settings)
    return known


def known_window(settings: GraphSettings) -> Window | None:
    """The window this process uses for `settings`' model now (None: not asked yet)."""
    return context_window(settings).known


def forget_context_windows() -> None:
    """Forget every window and ratio learned (a test's fresh start)."""
    _windows.clear()


# --- asking the server and the table --------------------------------------------------


async def discover_window(settings: GraphSettings) -> Window | None:
    """The window the server at `OPENAI_BASE_URL` reports (None: it says nothing we read)."""
    base = (settings.openai_base_url or "").rstrip("/")
    if not base:
        return None  # OpenAI's own endpoint reports no windows: the table knows its models
    root = base.removesuffix("/v1")
    key = settings.openai_api_key
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
    model = settings.openai_model or ""
    timeout = min(DISCOVERY_TIMEOUT_S, settings.openai_timeout_s)
    async with httpx.AsyncClient(timeout=timeout, headers=headers) as http:
        answers = await asyncio.gather(
            _llama_cpp(http, root),
            _vllm(http, base, model),
            _ollama(http, root, model),
            return_exceptions=True,  # an endpoint that lacks one, or any failure: no answer
        )
    return next((found for found in answers if isinstance(found, Window)), None)


async def _llama_cpp(http: httpx.AsyncClient, root: str) -> Window | None:
    props = (await http.get(f"{root}/props")).raise_for_status().json()
    settings = props.get("default_generation_settings") or {}
    tokens = _count(settings.get("n_ctx")) or _count(props.get("n_ctx"))
    return Window(tokens, "llama.cpp") if tokens else None


async def _vllm(http: httpx.AsyncClient, base: str, model: str) -> Window | None:
    listed = (await http.get(f"{base}/models")).raise_for_status().json()
    models = [m for m in listed.get("data") or [] if isinstance(m, dict)]
    named = [m for m in models if m.get("id") == model] or (models if len(models) == 1 else [])
    tokens = _count(named[0].get("max_model_len")) if named else None
    return Window(tokens, "vLLM") if tokens else None


async def _ollama(http: httpx.AsyncClient, root: str, model: str) -> Window | None:
    shown = (await http.post(f"{root}/api/show", json={"model": model})).raise_for_status().json()
    # The runtime window is num_ctx when the model file sets it; the model's own
    # context_length otherwise (Ollama cuts longer prompts silently: set AGENT_CONTEXT_TOKENS).
    parameters = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    if parameters:
        return Window(int(parameters.group(1)), "Ollama")
    info = shown.get("model_info") or {}
    architecture = info.get("general.architecture")
    tokens = _count(info.get(f"{architecture}.context_length"))
    return Window(tokens, "Ollama") if tokens else None


def table_window(model: str | None) -> Window:
    """The window of a well-known model name, else `DEFAULT_WINDOW`."""
    name = _normalised(model or "")
    matches = [prefix for prefix in _KNOWN if name.startswith(prefix)]
    if not matches:
        return Window(DEFAULT_WINDOW, "default")
    return Window(_KNOWN[max(matches, key=len)], "model table")


def _normalised(name: str) -> str:
    """`meta-llama/Llama-3.1-8B-Instruct`, `llama3.1:8b` -> `llama3.18binstruct`, `llama3.18b`."""
    tail = name.lower().rsplit("/", 1)[-1]
    return re.sub(r"[\s_\-:]", "", tail)


_KNOWN: Final = {_normalised(prefix): tokens for prefix, tokens in KNOWN_WINDOWS.items()}
