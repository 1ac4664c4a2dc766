"""What runs report: metrics and spans for each run, its model calls and its tool calls.

Contract:

- `Telemetry(metrics, tracing)` is made once per server (`Telemetry.from_settings`);
  either part may be None (`AGENT_METRICS=false`; no OTLP endpoint), and the terminal
  client runs with `Telemetry()`, which measures nothing.
- The run core calls `telemetry.watch(graph, thread_id, run_id)` at the start of a run's
  task. The returned `RunWatch` counts the run, opens its span (current for the rest of
  the task, so model, tool and httpx spans nest under it, and the HTTP request that
  started the run is its parent), and binds the run's ids for the log lines
  (`app.core.observability.logs.bind_run`). Then:
  `entered(resume)` when the run enters its graph (answers to questions are counted);
  `config(config)` the run's config plus the callback handler that measures model and
  tool calls; `observe(mode, data)` sees the graph stream (tool results with their
  outcome); `event(event)` sees each AG-UI event (first text token, questions asked,
  the end); `finish(status, error)` ends it all (idempotent).
- graphs/ and tools/ know nothing of this. Model and tool calls are seen through a
  LangChain callback handler in the run's config (`on_chat_model_start`, `on_tool_start`,
  `on_tool_end`, `on_tool_error`; with tracing also `on_llm_end`, `on_llm_error`); text
  mode's request to the model it wraps (tagged `graphs.text_mode.WRAPPED_CALL`) is part
  of its call, not another one. Without
  tracing a model call ends when the run's stream shows its reply or the run's failure
  (`observe`): the handler then ignores LLM events, so LangChain never hands it the
  per-token callbacks, the bulk of a run's callbacks; a tool call's outcome
  is the one its ToolMessage records (`graphs.tools_node.outcome_of`), so the calls the
  guards refused and the declined ones are counted too. Model retries (done inside the
  OpenAI client) are seen by a request hook on the shared model's HTTP client
  (`watch_model`), which reads the client's own retry-count header.
- Nothing here raises into a run; no label or attribute carries user or model text.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import suppress
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

import openai
from ag_ui.core import (
    BaseEvent,
    RunErrorEvent,
    RunFinishedEvent,
    TextMessageContentEvent,
)
from ag_ui.core.events import RunFinishedInterruptOutcome
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import Generation, LLMResult
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp

from app.core.observability.logs import bind_run
from app.core.observability.metrics import Metrics, code_label, kind_label
from app.core.observability.tracing import Tracing, open_tracing
from app.settings import Settings
from graphs.react import AGENT_NODE, TOOLS_NODE
from graphs.text_mode import WRAPPED_CALL
from graphs.tools_node import outcome_of

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

logger = logging.getLogger(__name__)

# What `observe` is given, instead of a stream mode, when the run fails.
FAILED: Final = "failed"
RETRY_HEADER = "x-stainless-retry-count"  # the OpenAI client numbers its attempts
FAILED_TOOL = frozenset({"error", "timeout", "invalid_args", "unknown_tool"})
MAX_ASKED = 10_000  # questions whose asking time is kept (for the answer latency)
PROVIDER = "openai"  # every model is reached through an OpenAI-compatible endpoint

# OpenTelemetry GenAI semantic conventions (and this service's own `agent.*` names).
OPERATION = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
ERROR_TYPE = "error.type"
THREAD_ID = "agent.thread.id"
RUN_ID = "agent.run.id"
GRAPH = "agent.graph"
RUN_OUTCOME = "agent.run.outcome"
TOOL_OUTCOME = "agent.tool.outcome"
MODEL_RETRIES = "agent.model.retries"


@dataclass(slots=True)
class _ModelCall:
    model: str
    started: float
    span: Span | None = None
    token: Token[Context] | None = None
    retries: int = 0


@dataclass(slots=True)
class _ToolCall:
    name: str
    started: float
    span: Span | None = None
    token: Token[Context] | None = None
    ended: float | None = None
    ended_ns: int | None = None
    interrupted: bool = False


# The model call the current task is making: read by the retry hook.
_model_call: ContextVar[_ModelCall | None] = ContextVar("agent_model_call", default=None)


async def _count_retry(request: Any) -> None:
    """HTTP request hook of the model's client: a retry of the current call is counted."""
    call = _model_call.get()
    if call is not None and request.headers.get(RETRY_HEADER, "0") != "0":
        call.retries += 1


def _detach(token: Token[Context] | None) -> None:
    """Make the span current before `token` current again, if still in that context.

    LangChain may call an end callback from another task (a copy of the context):
    there nothing needs undoing, the copy ends with its task.
    """
    if token is None:
        return
    with suppress(ValueError, RuntimeError):
        token.var.reset(token)


def model_outcome(error: BaseException) -> str:
    """A failed model call's outcome label."""
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    if isinstance(error, openai.APITimeoutError):
        return "timeout"
    if isinstance(error, openai.APIConnectionError):
        return "connection_error"
    if isinstance(error, openai.APIStatusError) and 100 <= error.status_code <= 599:
        return f"http_{error.status_code}"
    return "error"


class Telemetry:
    """The process's metrics and tracing (either may be off) and what runs share."""

    def __init__(self, metrics: Metrics | None = None, tracing: Tracing | None = None) -> None:
        self.metrics = metrics
        self.tracing = tracing
        # Interrupt id -> when it was asked (wall clock), for the answer latency.
        self._asked: OrderedDict[str, float] = OrderedDict()

    @classmethod
    def from_settings(cls, settings: Settings) -> Telemetry:
        """Metrics unless `AGENT_METRICS=false`; traces when an OTLP endpoint is set."""
        return cls(Metrics() if settings.agent_metrics else None, open_tracing(settings))

    @property
    def on(self) -> bool:
        return self.metrics is not None or self.tracing is not None

    def watch(self, graph: str, thread_id: str, run_id: str) -> RunWatch:
        """Start watching a run (call it in the run's own task)."""
        return RunWatch(self, graph, thread_id, run_id)

    def watch_model(self, model: Any) -> None:
        """Count the retries of `model`'s HTTP client (a LangChain ChatOpenAI)."""
        if not self.on:
            return
        # The OpenAI client keeps its HTTP client private; without one, retries are not seen.
        client = getattr(getattr(model, "root_async_client", None), "_client", None)
        hooks = getattr(client, "event_hooks", None)
        if not isinstance(hooks, dict):
            logger.warning("model retries cannot be counted: no HTTP client found")
            return
        requests = hooks.setdefault("request", [])
        if _count_retry not in requests:
            requests.append(_count_retry)
            client.event_hooks = hooks  # type: ignore[union-attr]

    def asked(self, interrupt_id: str) -> None:
        self._asked[interrupt_id] = time.time()
        while len(self._asked) > MAX_ASKED:
            self._asked.popitem(last=False)

    def answered(self, interrupt_id: str) -> float | None:
        """Seconds since `interrupt_id` was asked (None: not asked by this process)."""
        asked = self._asked.pop(interrupt_id, None)
        return None if asked is None else max(0.0, time.time() - asked)

    def close(self) -> None:
        """Flush and stop the trace exporter."""
        if self.tracing is not None:
            self.tracing.shutdown()


class RunWatch:
    """One run's metrics and spans, from its task's start to its end."""

    def __init__(self, telemetry: Telemetry, graph: str, thread_id: str, run_id: str) -> None:
        self._telemetry = telemetry
        self._metrics = telemetry.metrics
        self._tracer: Tracer | None = (
            telemetry.tracing.tracer if telemetry.tracing is not None else None
        )
        self.graph = graph
        self._entered: float | None = None
        self._first_token = False
        self._done = False
        self._span: Span | None = None
        self._context: Context | None = None
        self._token: Token[Context] | None = None
        self.handler: CallWatcher | None = None
        trace_id: str | None = None
        if self._tracer is not None:
            from opentelemetry import context, trace

            self._span = self._tracer.start_span(
                f"invoke_agent {graph}",
                attributes={
                    OPERATION: "invoke_agent",
                    AGENT_NAME: graph,
                    CONVERSATION_ID: thread_id,
                    THREAD_ID: thread_id,
                    RUN_ID: run_id,
                    GRAPH: graph,
                },
            )
            self._context = trace.set_span_in_context(self._span)
            self._token = context.attach(self._context)
            trace_id = format(self._span.get_span_context().trace_id, "032x")
        bind_run(thread_id, run_id, trace_id)
        if self._metrics is not None:
            self._metrics.runs_started.labels(graph).inc()
        if telemetry.on:
            self.handler = CallWatcher(self)

    # --- the run's course -------------------------------------------------------------

    def entered(self, resume: Sequence[Mapping[str, Any]] | None) -> None:
        """The run enters its graph; `resume` are the answers it carries (request JSON)."""
        self._entered = time.perf_counter()
        metrics = self._metrics
        if metrics is None or not resume:
            return
        for entry in resume:
            outcome = "cancelled" if entry.get("status") == "cancelled" else "answered"
            metrics.interrupts_resolved.labels(self.graph, outcome).inc()
            waited = self._telemetry.answered(str(entry.get("interruptId", "")))
            if waited is not None:
                metrics.answer_time.labels(self.graph, outcome).observe(waited)

    def config(self, config: RunnableConfig) -> RunnableConfig:
        """`config` with the handler that watches model and tool calls."""
        if self.handler is None:
            return config
        callbacks = config.get("callbacks")
        handlers = list(callbacks) if isinstance(callbacks, list) else []
        return {**config, "callbacks": [*handlers, self.handler]}

    def observe(self, mode: str, data: Any) -> None:
        """One item of the graph's stream (or `FAILED` and the run's exception): replies
        and failures end model calls, tool results end tool calls."""
        handler = self.handler
        if handler is None:
            return
        if mode == FAILED:
            handler.model_failed(data)
            return
        if mode != "updates" or not isinstance(data, dict):
            return
        for node in (AGENT_NODE, TOOLS_NODE):
            update = data.get(node)
            if not isinstance(update, dict):
                continue
            for message in update.get("messages") or ():
                if isinstance(message, ToolMessage):
                    handler.tool_result(message)
                elif isinstance(message, AIMessage):
                    handler.model_replied(message)

    def event(self, event: BaseEvent) -> None:
        """One AG-UI event of the run, just logged."""
        if self._done:
            return
        if isinstance(event, TextMessageContentEvent):
            if not self._first_token and self._entered is not None:
                self._first_token = True
                if self._metrics is not None:
                    waited = time.perf_counter() - self._entered
                    self._metrics.first_token.labels(self.graph).observe(waited)
        elif isinstance(event, RunFinishedEvent):
            outcome = event.outcome
            if isinstance(outcome, RunFinishedInterruptOutcome):
                for interrupt in outcome.interrupts:
                    self._telemetry.asked(interrupt.id)
                    if self._metrics is not None:
                        kind = kind_label(interrupt.reason)
                        self._metrics.interrupts_raised.labels(self.graph, kind).inc()
                self.finish("interrupted", None)
            else:
                self.finish("success", None)
        elif isinstance(event, RunErrorEvent):
            self.finish("error", event.code)

    def finish(self, outcome: str, code: str | None) -> None:
        """The run ended (`outcome`: its status, or `suspended`); `code` of its RUN_ERROR."""
        if self._done:
            return
        self._done = True
        if self.handler is not None:
            self.handler.close()
        metrics = self._metrics
        if metrics is not None:
            metrics.runs_finished.labels(self.graph, outcome).inc()
            if code is not None and outcome == "error":
                metrics.run_errors.labels(self.graph, code_label(code)).inc()
            if self._entered is not None:
                took = time.perf_counter() - self._entered
                metrics.run_duration.labels(self.graph, outcome).observe(took)
        span = self._span
        if span is not None:
            from opentelemetry.trace import StatusCode

            span.set_attribute(RUN_OUTCOME, outcome)
            if code is not None and outcome == "error":
                span.set_attribute(ERROR_TYPE, code_label(code))
                span.set_status(StatusCode.ERROR, code_label(code))
            span.end()
            _detach(self._token)
            self._token = None

    # --- for the handler --------------------------------------------------------------

    @property
    def parent(self) -> Context | None:
        """The run span's context: the parent of its model and tool spans."""
        return self._context

    @property
    def metrics(self) -> Metrics | None:
        return self._metrics

    @property
    def tracer(self) -> Tracer | None:
        return self._tracer


class CallWatcher(BaseCallbackHandler):
    """LangChain callbacks of one run: each model call and tool call measured and traced."""

    run_inline = True  # called in the caller's task: cheap, and spans nest under it

    def __init__(self, watch: RunWatch) -> None:
        self._watch = watch
        self._graph = watch.graph
        self._metrics = watch.metrics
        self._tracer = watch.tracer
        self._models: dict[UUID, _ModelCall] = {}
        self._tools: dict[str, _ToolCall] = {}  # by tool call id (or callback run id)
        self._tool_keys: dict[UUID, str] = {}

    # Only model and tool events matter; chains are many and would only cost time
    # (tool events go by `ignore_agent`, model events by `ignore_llm`: both kept).
    @property
    def ignore_chain(self) -> bool:
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    @property
    def ignore_llm(self) -> bool:
        # Spans need the exact end of a call; metrics take it from the stream (`observe`).
        return self._tracer is None

    # --- model calls ------------------------------------------------------------------

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if tags and WRAPPED_CALL in tags:
            return  # text mode's request to the model it wraps: part of that model's call
        params = kwargs.get("invocation_params") or {}
        model = params.get("model") or params.get("model_name")
        model = str(model or (metadata or {}).get("ls_model_name") or "unknown")
        call = _ModelCall(model, time.perf_counter())
        if self._tracer is not None:
            from opentelemetry import context, trace

            call.span = self._tracer.start_span(
                f"chat {model}",
                context=self._watch.parent,
                kind=trace.SpanKind.CLIENT,
                attributes={OPERATION: "chat", PROVIDER_NAME: PROVIDER, REQUEST_MODEL: model},
            )
            call.token = context.attach(trace.set_span_in_context(call.span))
        self._models[run_id] = call
        _model_call.set(call)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._models.pop(run_id, None)
        if call is not None:
            message = getattr(_first(response), "message", None)
            usage = _usage_of(message) or _llm_usage(response)
            self._model_ended(call, usage, _response_attributes(response))

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._models.pop(run_id, None)
        if call is not None:
            self._model_errored(call, model_outcome(error))

    def model_replied(self, message: AIMessage) -> None:
        """The agent node's reply: it ends the call still open (calls without tracing)."""
        if self._models:
            _, call = self._models.popitem()
            self._model_ended(call, _usage_of(message), _message_attributes(message))

    def model_failed(self, error: BaseException) -> None:
        """The run failed: a call still open failed with it (the model error is its cause)."""
        if self._models:
            _, call = self._models.popitem()
            cause = error.__cause__ if isinstance(error.__cause__, Exception) else error
            self._model_errored(call, model_outcome(cause))

    def _model_ended(
        self, call: _ModelCall, usage: tuple[int, int] | None, attributes: dict[str, Any]
    ) -> None:
        outcome = "retried" if call.retries else "ok"
        metrics = self._metrics
        if metrics is not None:
            metrics.model_calls.labels(self._graph, outcome).inc()
            took = time.perf_counter() - call.started
            metrics.model_duration.labels(self._graph, outcome).observe(took)
            if usage is not None:
                metrics.model_tokens.labels(self._graph, "input").inc(usage[0])
                metrics.model_tokens.labels(self._graph, "output").inc(usage[1])
        span = call.span
        if span is not None:
            span.set_attribute(MODEL_RETRIES, call.retries)
            for key, value in attributes.items():
                span.set_attribute(key, value)
            if usage is not None:
                span.set_attribute(INPUT_TOKENS, usage[0])
                span.set_attribute(OUTPUT_TOKENS, usage[1])
            span.end()
        _detach(call.token)

    def _model_errored(self, call: _ModelCall, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.model_calls.labels(self._graph, outcome).inc()
            took = time.perf_counter() - call.started
            self._metrics.model_duration.labels(self._graph, outcome).observe(took)
        span = call.span
        if span is not None:
            from opentelemetry.trace import StatusCode

            span.set_attribute(MODEL_RETRIES, call.retries)
            span.set_attribute(ERROR_TYPE, outcome)
            span.set_status(StatusCode.ERROR, outcome)  # never the message: it may echo input
            span.end()
        _detach(call.token)

    # --- tool calls -------------------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        name = str(serialized.get("name") or kwargs.get("name") or "")
        key = str(kwargs.get("tool_call_id") or run_id)
        call = _ToolCall(name, time.perf_counter())
        if self._tracer is not None:
            from opentelemetry import context, trace

            call.span = self._tracer.start_span(
                f"execute_tool {name}",
                context=self._watch.parent,
                kind=trace.SpanKind.INTERNAL,
                attributes={OPERATION: "execute_tool", TOOL_NAME: name, TOOL_CALL_ID: key},
            )
            call.token = context.attach(trace.set_span_in_context(call.span))
        self._tools[key] = call
        self._tool_keys[run_id] = key

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_ended(run_id, interrupted=False)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_ended(run_id, interrupted=isinstance(error, GraphBubbleUp))

    def _tool_ended(self, run_id: UUID, *, interrupted: bool) -> None:
        key = self._tool_keys.pop(run_id, None)
        call = self._tools.get(key) if key is not None else None
        if call is None:
            return
        call.ended, call.ended_ns = time.perf_counter(), time.time_ns()
        call.interrupted = interrupted
        _detach(call.token)
        call.token = None

    def tool_result(self, message: ToolMessage) -> None:
        """A tool call's ToolMessage: its outcome ends the call (ran or refused)."""
        outcome = outcome_of(message)
        call = self._tools.pop(message.tool_call_id, None)
        name = message.name or (call.name if call is not None else None)
        metrics = self._metrics
        if metrics is not None:
            tool = metrics.tool_label(name, outcome)
            metrics.tool_calls.labels(self._graph, tool, outcome).inc()
            if call is not None and call.ended is not None:
                took = call.ended - call.started
                metrics.tool_duration.labels(self._graph, tool, outcome).observe(took)
        if self._tracer is None:
            return
        span = call.span if call is not None else None
        if span is None:  # refused before it ran: a span of no length, for the record
            from opentelemetry import trace

            label = name if outcome != "unknown_tool" else "unknown"
            span = self._tracer.start_span(
                f"execute_tool {label}",
                context=self._watch.parent,
                kind=trace.SpanKind.INTERNAL,
                attributes={
                    OPERATION: "execute_tool",
                    TOOL_NAME: str(label),
                    TOOL_CALL_ID: message.tool_call_id,
                },
            )
        _end_tool_span(span, outcome, call.ended_ns if call is not None else None)

    def close(self) -> None:
        """The run ended: end what is still open (a question asked, a cancelled call)."""
        for model in self._models.values():  # the run was stopped during the call
            if self._metrics is not None:
                self._metrics.model_calls.labels(self._graph, "cancelled").inc()
                took = time.perf_counter() - model.started
                self._metrics.model_duration.labels(self._graph, "cancelled").observe(took)
            if model.span is not None:
                model.span.set_attribute(MODEL_RETRIES, model.retries)
                model.span.set_attribute(ERROR_TYPE, "cancelled")
                model.span.end()
        self._models.clear()
        for tool in self._tools.values():
            if tool.span is not None:
                outcome = "interrupted" if tool.interrupted else "unfinished"
                _end_tool_span(tool.span, outcome, tool.ended_ns)
        self._tools.clear()


def _end_tool_span(span: Span, outcome: str, end_ns: int | None) -> None:
    from opentelemetry.trace import StatusCode

    span.set_attribute(TOOL_OUTCOME, outcome)
    if outcome in FAILED_TOOL:  # a refusal or the user's no is an outcome, not an error
        span.set_attribute(ERROR_TYPE, outcome)
        span.set_status(StatusCode.ERROR, outcome)
    span.end(end_time=end_ns)


def _usage_of(message: Any) -> tuple[int, int] | None:
    """(input, output) tokens a reply says the provider reported, if it did."""
    usage = getattr(message, "usage_metadata", None)
    if usage:
        return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    return None


def _llm_usage(response: LLMResult) -> tuple[int, int] | None:
    """The same from a whole result's `llm_output` (a call that did not stream)."""
    token_usage = (response.llm_output or {}).get("token_usage")
    if isinstance(token_usage, dict) and token_usage:
        return int(token_usage.get("prompt_tokens", 0)), int(
            token_usage.get("completion_tokens", 0)
        )
    return None


def _first(response: LLMResult) -> Generation | None:
    return response.generations[0][0] if response.generations and response.generations[0] else None


def _response_attributes(response: LLMResult) -> dict[str, Any]:
    generation = _first(response)
    if generation is None:
        return {}
    message = getattr(generation, "message", None)
    meta: dict[str, Any] = {
        **(getattr(message, "response_metadata", None) or {}),
        **(generation.generation_info or {}),
    }
    return _attributes(meta, getattr(message, "id", None))


def _message_attributes(message: AIMessage) -> dict[str, Any]:
    return _attributes(message.response_metadata or {}, message.id)


def _attributes(meta: Mapping[str, Any], message_id: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    model = meta.get("model_name") or meta.get("model")
    if model:
        out[RESPONSE_MODEL] = str(model)
    reason = meta.get("finish_reason")
    if reason:
        out[FINISH_REASONS] = [str(reason)]
    response_id = meta.get("id") or message_id
    if isinstance(response_id, str) and response_id:
        out[RESPONSE_ID] = response_id
    return out
