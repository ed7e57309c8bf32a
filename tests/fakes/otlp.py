"""An OTLP/HTTP trace receiver on loopback: what a collector would be sent, kept.

``FakeCollector`` answers ``POST /v1/traces`` (protobuf, optionally gzipped, as the
OpenTelemetry exporter sends it) with 200 and keeps every request body as received,
so a test can both decode the spans (``spans()``) and search the raw bytes for a
value that must never be there (``raw()``)::

    with FakeCollector() as collector:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.traces_url}
"""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.http import LoopbackServer


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_id: str  # "" for a root
    name: str
    attributes: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    start_ns: int
    end_ns: int
    service: str


class FakeCollector(LoopbackServer):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bodies: list[bytes] = []
        self._metric_bodies: list[bytes] = []

    @property
    def metrics_url(self) -> str:
        return f"{self.origin}/v1/metrics"

    def metric_points(self) -> list[tuple[str, dict[str, Any], float]]:
        """Every data point received: (metric name, attributes, value: a sum's value or
        a histogram's count)."""
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        with self._lock:
            bodies = list(self._metric_bodies)
        points = []
        for body in bodies:
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        for point in getattr(metric, kind).data_points:
                            labels = {a.key: _value(a.value) for a in point.attributes}
                            if kind == "histogram":
                                value = float(point.count)
                            else:
                                value = point.as_double or float(point.as_int)
                            points.append((metric.name, labels, value))
        return points

    @property
    def traces_url(self) -> str:
        return f"{self.origin}/v1/traces"

    def raw(self) -> bytes:
        with self._lock:
            return b"".join(self._bodies)

    def spans(self) -> list[ReceivedSpan]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        with self._lock:
            bodies = list(self._bodies)
        found = []
        for body in bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            ReceivedSpan(
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                name=span.name,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                status=span.status.code,
                                status_message=span.status.message,
                                start_ns=span.start_time_unix_nano,
                                end_ns=span.end_time_unix_nano,
                                service=str(resource.get("service.name", "")),
                            )
                        )
        return found

    def wait_for(self, predicate, timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans once ``predicate(spans)`` holds (the exporter sends in batches)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if predicate(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def _keep(self, body: bytes) -> None:
        with self._lock:
            self._bodies.append(body)

    def _keep_metrics(self, body: bytes) -> None:
        with self._lock:
            self._metric_bodies.append(body)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path.rstrip("/") == "/v1/traces":
            self.server.fake._keep(body)  # type: ignore[attr-defined]
            status = 200
        elif self.path.rstrip("/") == "/v1/metrics":
            self.server.fake._keep_metrics(body)  # type: ignore[attr-defined]
            status = 200
        else:
            status = 404
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


FakeCollector.handler = _Handler
