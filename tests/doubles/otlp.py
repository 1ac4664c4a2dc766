"""OtlpReceiver: an OTLP/HTTP trace receiver on 127.0.0.1 that decodes what it is sent.

    with OtlpReceiver() as otlp:        # OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url
        ...
        spans = otlp.wait_for(lambda spans: any(s.name == "..." for s in spans))

`POST /v1/traces` takes an `ExportTraceServiceRequest` (protobuf, optionally gzip), as
OpenTelemetry's OTLP/HTTP exporter sends it, decoded with `opentelemetry-proto`; every
span is kept as a `ReceivedSpan` with its ids in hex and its attributes as plain values.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.doubles._server import ServedDouble, ServerThread

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, as the receiver decoded it."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    resource: dict[str, Any] = field(default_factory=dict)
    scope: str = ""


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


class OtlpReceiver(ServedDouble):
    """The OTLP/HTTP traces endpoint double; `url` is the OTEL_EXPORTER_OTLP_ENDPOINT."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._spans: list[ReceivedSpan] = []
        self._requests = 0
        app = Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])])
        self._server = ServerThread(app)

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    @property
    def requests(self) -> int:
        """Export requests received so far."""
        with self._lock:
            return self._requests

    def reset(self) -> None:
        with self._lock:
            self._spans = []
            self._requests = 0

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], within_s: float = 15.0
    ) -> list[ReceivedSpan]:
        """Block until `done(spans)` holds; AssertionError with what came otherwise."""
        with self._lock:
            if not self._lock.wait_for(lambda: done(list(self._spans)), within_s):
                names = [span.name for span in self._spans]
                raise AssertionError(f"OtlpReceiver: condition not met; spans so far: {names}")
            return list(self._spans)

    async def _traces(self, request: Request) -> Response:
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        received: list[ReceivedSpan] = []
        for resource_spans in export.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            resource=resource,
                            scope=scope_spans.scope.name,
                        )
                    )
        with self._lock:
            self._requests += 1
            self._spans.extend(received)
            self._lock.notify_all()
        reply = ExportTraceServiceResponse().SerializeToString()
        return Response(reply, media_type=PROTOBUF)
