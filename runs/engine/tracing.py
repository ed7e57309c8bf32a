"""Traces of runs (OpenTelemetry), off unless the environment configures an exporter.

**One trace per run.** Its trace id is the run's UUID, and its root span's id is
derived from that UUID too, so every process that works on the run — the in-process
driver, each Celery worker making a try, the coordinator that finishes it — writes
its spans into the same trace without passing anything along a task. The spans:

- ``run <workflow>``: the root, written once the run has finished (announced:
  ``runs.engine.finish``), from the run's creation to its end;
- ``step <id>``: one per try (``runs.engine.tries.try_once``: the attempt record is
  what it describes), a child of the root, wherever the try ran;
- ``tool <name>`` and ``llm <endpoint>``: one per tool call (HTTP, MCP, built-in) and
  per model call, children of the try that made them (OpenTelemetry's current span,
  in the thread making the call).

**Nothing secret.** Spans carry ids, names, the version's hash, statuses, error types
and messages as the attempt record stores them, the request as stored (method, URL
with its secrets masked, status), tokens and cost — never arguments, outputs,
prompts or replies; every text attribute is masked by value with the run's redactor
before it is set.

**Off costs nothing.** With tracing off (the default) a run's context has no tracer
(``RunContext.tracer`` is None), each hook is one ``is None`` test, and nothing of
OpenTelemetry is imported. It is on when the standard variables ask for an exporter
(``config.settings``: ``FLOWPILOT_TRACING``): the OTLP exporter (HTTP/protobuf) reads
its endpoint, headers and timeouts from the standard ``OTEL_EXPORTER_OTLP_*``
variables, the batch processor its delays from ``OTEL_BSP_*``, the resource its
service name from ``OTEL_SERVICE_NAME`` (default ``flowpilot``).

The tracer provider is one per process (like the process's HTTP client: pooled,
never per run), made on first use after a fork.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from tools.redaction import Redactor

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Span, Tracer

SCOPE = "flowpilot"
MAX_ATTRIBUTE_CHARS = 2000  # an error message quoting a huge value stays a short attribute


def tracing_enabled() -> bool:
    return bool(getattr(settings, "FLOWPILOT_TRACING", False))


def trace_id_of(run_uuid: str) -> int:
    """The trace id of a run: its UUID as a 128-bit number."""
    return uuid.UUID(str(run_uuid)).int or 1


def root_span_id_of(run_uuid: str) -> int:
    """The run's root span id: 64 bits of a hash of its UUID (never 0)."""
    digest = hashlib.sha256(f"flowpilot-run:{run_uuid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def trace_url(run_uuid: str) -> str:
    """The run's trace in the tracing UI (``FLOWPILOT_TRACE_URL``, with ``{trace_id}``),
    or "" when none is configured."""
    template = str(getattr(settings, "FLOWPILOT_TRACE_URL", "") or "")
    if not template:
        return ""
    return template.replace("{trace_id}", f"{trace_id_of(run_uuid):032x}")


class _Process:
    """This process's provider, its tracer and its span processor."""

    def __init__(self) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        exporters = list(getattr(settings, "FLOWPILOT_TRACE_EXPORTERS", ()) or ("otlp",))
        name = os.environ.get("OTEL_SERVICE_NAME") or "flowpilot"
        self.provider: TracerProvider = TracerProvider(
            resource=Resource.create({"service.name": name})
        )
        self.processors: list[SpanProcessor] = []
        for kind in exporters:
            exporter: SpanExporter = (
                ConsoleSpanExporter() if kind == "console" else OTLPSpanExporter()
            )
            processor = BatchSpanProcessor(exporter)
            self.provider.add_span_processor(processor)
            self.processors.append(processor)
        self.tracer: Tracer = self.provider.get_tracer(SCOPE)

    def flush(self, timeout_millis: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_millis)


def process_tracing() -> _Process:
    """This process's provider (made on first use; one per process id, so a forked
    worker never shares its parent's export thread)."""
    return _process(os.getpid())


@functools.cache
def _process(pid: int) -> _Process:
    return _Process()


def flush_traces(timeout_millis: int = 30_000) -> bool:
    """Export what this process has buffered (a command about to exit, a test)."""
    if not tracing_enabled():
        return True
    return process_tracing().flush(timeout_millis)


def shutdown_tracing() -> None:
    """Export what is buffered and drop this process's provider; the next run makes a
    new one from the settings and environment of then (tests; a process may call it
    before exiting, as the provider's own exit handler does)."""
    if _process.cache_info().currsize:
        process_tracing().provider.shutdown()
    _process.cache_clear()


class RunTracer:
    """The spans of one run, for the steps' tries and calls (see the module doc)."""

    def __init__(
        self,
        *,
        run_id: int | None,
        run_uuid: str,
        workflow: str,
        version_hash: str,
        redactor: Redactor,
        tracer: Tracer | None = None,
    ) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        self.tracer = tracer or process_tracing().tracer
        self.redactor = redactor
        self.common: dict[str, Any] = {
            "flowpilot.run_id": run_id if run_id is not None else -1,
            "flowpilot.run_uuid": str(run_uuid),
            "flowpilot.workflow": workflow,
            "flowpilot.version_hash": version_hash,
        }
        root = SpanContext(
            trace_id=trace_id_of(run_uuid),
            span_id=root_span_id_of(run_uuid),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        self.trace_id = root.trace_id
        self.root = trace.set_span_in_context(NonRecordingSpan(root))

    @contextmanager
    def step_try(self, step_id: str, number: int, item: int | None = None) -> Iterator[Span]:
        """The span of one try, current in this thread while the try runs; the caller
        ends it with ``try_ended``."""
        from opentelemetry import trace

        attributes: dict[str, Any] = {
            **self.common,
            "flowpilot.step_id": step_id,
            "flowpilot.attempt": number,
        }
        if item is not None:
            attributes["flowpilot.item"] = item
        span = self.tracer.start_span(
            f"step {step_id}", context=self._parent(), attributes=attributes
        )
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            yield span

    def try_ended(
        self,
        span: Span,
        status: str,
        error: Mapping[str, Any] | None,
        sent: Mapping[str, Any] | None,
        worker: str | None = None,
    ) -> None:
        """What the try's record says: its status, its error (type and message, as
        stored: scrubbed), what it sent (method, masked URL, status)."""
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("flowpilot.status", status)
        if worker:
            span.set_attribute("flowpilot.worker", worker)
        if sent:
            self._request(span, sent)
        if error:
            span.set_attribute("flowpilot.error.type", str(error.get("type", "")))
            span.set_attribute("flowpilot.error.retryable", bool(error.get("retryable")))
            span.set_status(Status(StatusCode.ERROR, self._text(error.get("message", ""))))
        else:
            span.set_status(Status(StatusCode.OK))

    @contextmanager
    def call(self, name: str, attributes: Mapping[str, Any]) -> Iterator[Span]:
        """A tool or model call's span, a child of the current one (its try)."""
        from opentelemetry import trace

        span = self.tracer.start_span(
            name, context=self._parent(), attributes={**self.common, **self._clean(attributes)}
        )
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            yield span

    def call_ended(
        self,
        span: Span,
        *,
        request: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        from opentelemetry.trace import Status, StatusCode

        if request:
            self._request(span, request)
        if attributes:
            span.set_attributes(self._clean(attributes))
        if error:
            span.set_attribute("flowpilot.error.type", str(error.get("type", "")))
            span.set_status(Status(StatusCode.ERROR, self._text(error.get("message", ""))))
        else:
            span.set_status(Status(StatusCode.OK))

    def _parent(self) -> Context:
        """The span current in this thread when it is one of this run's (a foreach item's
        try inside its step's, a call inside its try), else the run's root."""
        from opentelemetry import trace

        current = trace.get_current_span().get_span_context()
        if current.is_valid and current.trace_id == self.trace_id:
            return trace.set_span_in_context(trace.get_current_span())
        return self.root

    def _request(self, span: Span, request: Mapping[str, Any]) -> None:
        values = {
            "http.request.method": request.get("method"),
            "url.full": request.get("url"),
            "http.response.status_code": request.get("status"),
            "flowpilot.elapsed_ms": request.get("elapsed_ms"),
        }
        span.set_attributes(self._clean(values))

    def _clean(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Attributes OpenTelemetry accepts, every text masked by value."""
        clean: dict[str, Any] = {}
        for key, value in attributes.items():
            if value is None:
                continue
            if isinstance(value, bool | int | float):
                clean[key] = value
            else:
                clean[key] = self._text(value)
        return clean

    def _text(self, value: Any) -> str:
        return self.redactor.scrub_text(str(value))[:MAX_ATTRIBUTE_CHARS]


def run_tracer(
    *, run_id: int | None, run_uuid: str, workflow: str, version_hash: str, redactor: Redactor
) -> RunTracer | None:
    """A run's tracer, or None when tracing is off."""
    if not tracing_enabled():
        return None
    return RunTracer(
        run_id=run_id,
        run_uuid=run_uuid,
        workflow=workflow,
        version_hash=version_hash,
        redactor=redactor,
    )


def emit_run_span(
    *,
    run_id: int,
    run_uuid: str,
    workflow: str,
    version: int | None,
    version_hash: str,
    status: str,
    trigger: str,
    started: datetime,
    finished: datetime,
    error_summary: str,
    approved_by: int | None,
    parent_run_id: int | None = None,
) -> None:
    """Write the run's root span, once it has finished (see the module doc): built with
    the ids every earlier span named as their parent, from ``started`` to ``finished``."""
    if not tracing_enabled():
        return
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    process = process_tracing()
    attributes: dict[str, Any] = {
        "flowpilot.run_id": run_id,
        "flowpilot.run_uuid": str(run_uuid),
        "flowpilot.workflow": workflow,
        "flowpilot.version_hash": version_hash,
        "flowpilot.status": status,
        "flowpilot.trigger": trigger,
    }
    if version is not None:
        attributes["flowpilot.version"] = version
    if approved_by is not None:
        attributes["flowpilot.approved_by"] = approved_by
    if parent_run_id is not None:
        attributes["flowpilot.parent_run_id"] = parent_run_id
    ok = status == "succeeded"
    message = error_summary  # stored scrubbed (the steps' errors, as recorded)
    span = ReadableSpan(
        name=f"run {workflow}",
        context=SpanContext(
            trace_id=trace_id_of(run_uuid),
            span_id=root_span_id_of(run_uuid),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        ),
        parent=None,
        resource=process.provider.resource,
        attributes=attributes,
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK)
        if ok
        else Status(StatusCode.ERROR, message[:MAX_ATTRIBUTE_CHARS]),
        start_time=_ns(started),
        end_time=_ns(max(finished, started)),
        instrumentation_scope=InstrumentationScope(SCOPE),
    )
    for processor in process.processors:
        processor.on_end(span)


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
