"""OpenTelemetry traces: on when an OTLP endpoint is configured, absent (not even imported) else.

Contract:

- `open_tracing(settings)` returns None unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used
  as it is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`) is set. Then, and only
  then, it imports the SDK, makes a `TracerProvider` (resource `service.name` =
  `OTEL_SERVICE_NAME`, sampler and batch settings from the standard `OTEL_*` variables)
  with a batch processor and an OTLP/HTTP exporter, and instruments httpx and httpx2
  (Open-Meteo, Tushare, the model endpoint) so their requests become child spans.
- The provider is the service's own, not the global one: `Tracing.tracer` makes the
  run, model and tool spans (`app.core.observability.telemetry`), the HTTP layer instruments FastAPI
  with `Tracing.provider`. `Tracing.shutdown()` flushes what is queued.
- No span attribute carries a secret, a prompt or an answer: ids, names, counts.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from app.settings import Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Tracer

logger = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
TRACER_NAME = "react-agent"


def traces_endpoint(settings: Settings) -> str | None:
    """Where spans go (the OTLP/HTTP traces URL), or None: tracing is off."""
    exact = (settings.otel_exporter_otlp_traces_endpoint or "").strip()
    if exact:
        return exact
    base = (settings.otel_exporter_otlp_endpoint or "").strip()
    if base:
        return base.rstrip("/") + TRACES_PATH
    return None


@dataclass(slots=True)
class Tracing:
    """The service's tracer provider, its tracer and where it exports."""

    provider: TracerProvider
    tracer: Tracer
    endpoint: str
    _instrumentors: tuple[Any, ...] = ()

    def shutdown(self) -> None:
        """Export what is queued, stop the exporter, undo the httpx instrumentation."""
        for instrumentor in self._instrumentors:
            instrumentor.uninstrument()
        self.provider.shutdown()


def open_tracing(settings: Settings) -> Tracing | None:
    """The tracer provider exporting to the configured endpoint; None when none is set."""
    endpoint = traces_endpoint(settings)
    if endpoint is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.httpx import (
        HTTPX2ClientInstrumentor,
        HTTPXClientInstrumentor,
    )
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({SERVICE_NAME: settings.otel_service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    instrumentors: list[Any] = []
    for kind in (HTTPXClientInstrumentor, HTTPX2ClientInstrumentor):
        instrumentor = kind()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)
            instrumentors.append(instrumentor)
    logger.info("tracing: exporting spans to %s", _shown(endpoint))
    return Tracing(provider, provider.get_tracer(TRACER_NAME), endpoint, tuple(instrumentors))


def _shown(url: str) -> str:
    """`url` without the user and password it may carry (for a log line)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
