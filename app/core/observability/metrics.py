"""The service's Prometheus metrics: one registry per service, rendered for `GET /metrics`.

Contract:

- `Metrics()` owns a `prometheus_client.CollectorRegistry` with every metric below
  (plus the process and Python collectors); `render()` is the text exposition format.
  `AGENT_METRICS=false` means no `Metrics` at all: nothing is measured.
- Labels are bounded: graph ids, tool names (`tool_label`), and fixed value sets
  (run outcomes, tool outcomes, model call outcomes, interrupt kinds, route templates,
  status codes). Never a thread id, a run id or text a user or a model wrote.
- Who measures what: `app.core.observability.telemetry` (runs, model and tool calls, interrupts),
  the HTTP layer (requests, SSE clients). Active runs are read from the service when
  scraped (`watch_active`), so the run path pays nothing for them.

| metric | type | labels |
|---|---|---|
| `agent_runs_started_total` | counter | graph |
| `agent_runs_finished_total` | counter | graph, outcome (`RUN_OUTCOMES`) |
| `agent_run_errors_total` | counter | graph, code (a RUN_ERROR code) |
| `agent_runs_active` | gauge | graph, status (`queued`, `running`) |
| `agent_run_duration_seconds` | histogram | graph, outcome |
| `agent_run_first_token_seconds` | histogram | graph |
| `agent_model_calls_total` | counter | graph, outcome (`MODEL_OUTCOMES`) |
| `agent_model_call_duration_seconds` | histogram | graph, outcome |
| `agent_model_tokens_total` | counter | graph, direction (`input`, `output`) |
| `agent_tool_calls_total` | counter | graph, tool, outcome (the tools node's outcomes) |
| `agent_tool_call_duration_seconds` | histogram | graph, tool, outcome |
| `agent_interrupts_raised_total` | counter | graph, kind (`INTERRUPT_KINDS`, `other`) |
| `agent_interrupts_resolved_total` | counter | graph, outcome (`answered`, `cancelled`) |
| `agent_interrupt_answer_seconds` | histogram | graph, outcome |
| `agent_sse_clients` | gauge | |
| `agent_http_requests_total` | counter | method, route, status |
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

# The classic text format (0.0.4): every Prometheus version scrapes it.
CONTENT_TYPE: Final = CONTENT_TYPE_PLAIN_0_0_4
RUN_OUTCOMES: Final = ("success", "interrupted", "error", "cancelled", "suspended")
# `http_<status>`: the endpoint's HTTP status after the client's retries.
MODEL_OUTCOMES: Final = (
    "ok",
    "retried",
    "timeout",
    "connection_error",
    "http_<status>",
    "cancelled",
    "error",
)
INTERRUPT_KINDS: Final = frozenset({"input", "select", "multi_select", "confirm"})
ACTIVE_STATUSES: Final = ("queued", "running")

# Tool names come from the model: an invented one is not a label value.
UNKNOWN_TOOL: Final = "_unknown"
OTHER: Final = "_other"
MAX_TOOL_LABELS: Final = 100
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_CODE = re.compile(r"[a-z0-9_]{1,40}")

RUN_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
CALL_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ANSWER_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 86400.0)

ActiveRuns = Callable[[], Iterable[tuple[str, str]]]


class _Active(Collector):
    """`agent_runs_active`, counted from the service's live runs when scraped."""

    def __init__(self, source: ActiveRuns) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "agent_runs_active",
            "Runs this process holds, by graph and status (queued behind another, running).",
            labels=["graph", "status"],
        )
        counts: dict[tuple[str, str], int] = {}
        for graph, status in self._source():
            counts[graph, status] = counts.get((graph, status), 0) + 1
        for (graph, status), count in sorted(counts.items()):
            family.add_metric([graph, status], count)
        yield family


class Metrics:
    """Every metric of the service, in a registry of its own."""

    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self._tools: set[str] = set()
        self._active: _Active | None = None

        self.runs_started = Counter(
            "agent_runs_started", "Runs started, by graph.", ["graph"], registry=registry
        )
        self.runs_finished = Counter(
            "agent_runs_finished",
            "Runs ended, by graph and outcome (success, interrupted, error, cancelled, "
            "suspended: left to the next start at shutdown).",
            ["graph", "outcome"],
            registry=registry,
        )
        self.run_errors = Counter(
            "agent_run_errors",
            "Runs that ended with RUN_ERROR, by graph and error code.",
            ["graph", "code"],
            registry=registry,
        )
        self.run_duration = Histogram(
            "agent_run_duration_seconds",
            "From a run entering its graph to its end, by graph and outcome.",
            ["graph", "outcome"],
            buckets=RUN_BUCKETS,
            registry=registry,
        )
        self.first_token = Histogram(
            "agent_run_first_token_seconds",
            "From a run entering its graph to its first streamed text token.",
            ["graph"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.model_calls = Counter(
            "agent_model_calls",
            "Model calls, by graph and outcome (ok, retried: ok after retries, timeout, "
            "connection_error, http_<status>, cancelled, error).",
            ["graph", "outcome"],
            registry=registry,
        )
        self.model_duration = Histogram(
            "agent_model_call_duration_seconds",
            "Model call latency (retries included), by graph and outcome.",
            ["graph", "outcome"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.model_tokens = Counter(
            "agent_model_tokens",
            "Tokens the model endpoint reported, by graph and direction (input, output).",
            ["graph", "direction"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "agent_tool_calls",
            "Tool calls, by graph, tool and outcome (ok, error, timeout, invalid_args, "
            "unknown_tool, repeated, capped, declined, cancelled, abandoned).",
            ["graph", "tool", "outcome"],
            registry=registry,
        )
        self.tool_duration = Histogram(
            "agent_tool_call_duration_seconds",
            "Latency of tool calls that ran, by graph, tool and outcome.",
            ["graph", "tool", "outcome"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.interrupts_raised = Counter(
            "agent_interrupts_raised",
            "Questions asked (a run ending with an interrupt), by graph and kind.",
            ["graph", "kind"],
            registry=registry,
        )
        self.interrupts_resolved = Counter(
            "agent_interrupts_resolved",
            "Questions resolved by a resume, by graph and outcome (answered, cancelled).",
            ["graph", "outcome"],
            registry=registry,
        )
        self.answer_time = Histogram(
            "agent_interrupt_answer_seconds",
            "From a question being asked to its answer (questions this process asked).",
            ["graph", "outcome"],
            buckets=ANSWER_BUCKETS,
            registry=registry,
        )
        self.sse_clients = Gauge(
            "agent_sse_clients", "Clients following an event stream now.", registry=registry
        )
        self.http_requests = Counter(
            "agent_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=registry,
        )

    def watch_active(self, source: ActiveRuns) -> None:
        """Count `agent_runs_active` from `source()` ((graph, status) per live run) when scraped."""
        if self._active is not None:
            self.registry.unregister(self._active)
        self._active = _Active(source)
        self.registry.register(self._active)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def tool_label(self, name: str | None, outcome: str) -> str:
        """A bounded label for a tool name: real tools by name, anything else grouped."""
        if outcome == "unknown_tool" or not name or not _TOOL_NAME.fullmatch(name):
            return UNKNOWN_TOOL
        if name not in self._tools:
            if len(self._tools) >= MAX_TOOL_LABELS:
                return OTHER
            self._tools.add(name)
        return name


def code_label(code: str | None) -> str:
    """A RUN_ERROR code as a label (codes are machine words; anything else is grouped)."""
    return code if code and _CODE.fullmatch(code) else OTHER


def kind_label(kind: object) -> str:
    """An interrupt payload's type as a label."""
    return kind if isinstance(kind, str) and kind in INTERRUPT_KINDS else "other"
