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
  per model call, children of the try that made them (the try running in the thread
  making the call: a context variable, each thread its own); a foreach item's tries
  are children of the foreach step's try when they run in its thread, of the root
  when they run on its pool.

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

Spans are written whole, from flowpilot's own records, as the SDK's ``ReadableSpan``
handed to its batch processor (``RunTracer``): live SDK spans (a first version) cost a
chain about twice as much, mostly in the sampler, the attribute checks and the context
switches of every span (``benchmarks/compare.py`` measures a chain with tracing off
and on). No other
library's spans join these traces: the httpx instrumentation would record URLs
unmasked, and the Celery one makes a trace per task, where a run is one trace.

The tracer provider is one per process (like the process's HTTP client: pooled,
never per run), made on first use after a fork.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import random
import time
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings

from tools.redaction import Redactor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.trace import Tracer

SCOPE = "flowpilot"
logger = logging.getLogger("flowpilot.engine")
MAX_ATTRIBUTE_CHARS = 2000  # an error message quoting a huge value stays a short attribute
# An attribute's integer is a signed 64-bit number in OTLP; a larger one is sent as text.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        from runs.engine.otlp import span_exporter

        exporters = list(getattr(settings, "FLOWPILOT_TRACE_EXPORTERS", ()) or ("otlp",))
        name = os.environ.get("OTEL_SERVICE_NAME") or "flowpilot"
        self.provider: TracerProvider = TracerProvider(
            resource=Resource.create({"service.name": name})
        )
        self.processors: list[SpanProcessor] = []
        for kind in exporters:
            exporter: SpanExporter = ConsoleSpanExporter() if kind == "console" else span_exporter()
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


# The span of the try running in this context (this thread), so that the calls it makes
# name it as their parent: (trace id, span id). Each thread has its own value.
_CURRENT: ContextVar[tuple[int, int] | None] = ContextVar("flowpilot_current_span", default=None)


class SpanStart:
    """A span being made, and the block it times: its id, its parent's (the span
    current in this context when it was made, else the run's root), when it began and
    what it says so far. While the block runs it is the current span; when the block
    ends its tracer writes it. A class, not a generator: a chain's step makes two."""

    __slots__ = (
        "_token",
        "attributes",
        "name",
        "parent_id",
        "run_level",
        "span_id",
        "start_ns",
        "tracer",
    )  # fmt: skip

    def __init__(
        self, tracer: RunTracer, name: str, attributes: dict[str, Any], run_level: bool
    ) -> None:
        current = _CURRENT.get()
        trace_id = tracer.trace_id
        self.tracer = tracer
        self.name = name
        self.span_id = _new_span_id()
        self.parent_id = (
            current[1] if current is not None and current[0] == trace_id else tracer.root_id
        )
        self.attributes = attributes
        self.run_level = run_level  # carries the run's attributes (a try's span does)
        self.start_ns = time.time_ns()

    def __enter__(self) -> SpanStart:
        self._token = _CURRENT.set((self.tracer.trace_id, self.span_id))
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        _CURRENT.reset(self._token)
        if kind is not None and "flowpilot.ok" not in self.attributes:
            # Left by an exception nothing recorded (the worker stopped, a soft time
            # limit): the span says so rather than passing for a success.
            self.attributes["flowpilot.error.type"] = kind.__name__
            self.attributes["flowpilot.ok"] = False
        self.tracer._write(self, time.time_ns())


class RunTracer:
    """The spans of one run, for the steps' tries and calls (see the module doc).

    A span is made in two moves: ``step_try``/``call`` note its start (and make it the
    parent of what starts inside it, in this thread); ``try_ended``/``call_ended`` add
    what its record says; the span is handed to the exporter's batch processor when its
    block ends. The spans are written whole, with their times, as OpenTelemetry's
    ``ReadableSpan``: no sampler, no live span object, no attribute checks at every
    set — every attribute is a string, a number or a boolean made here.
    """

    def __init__(
        self,
        *,
        run_id: int | None,
        run_uuid: str,
        workflow: str,
        version_hash: str,
        redactor: Redactor,
        process: _Process | None = None,
    ) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

        from runs.engine.otlp import plain_span_class

        self.sampled = TraceFlags(TraceFlags.SAMPLED)
        self.process = process or process_tracing()
        self.scope = InstrumentationScope(SCOPE)
        self.redactor = redactor
        self.trace_id = trace_id_of(run_uuid)
        # What every span of the run shares, made once (a try's span costs a few µs).
        self._readable, self._context, self._status = plain_span_class(), SpanContext, Status
        self._error = StatusCode.ERROR
        self._ok = Status(StatusCode.OK)
        self.root_id = root_span_id_of(run_uuid)
        self._root = SpanContext(self.trace_id, self.root_id, False, self.sampled)
        self._resource = self.process.provider.resource
        # Masked once here; ``_write`` masks only what is added to it per span.
        self.common: dict[str, Any] = self._clean(
            {
                "flowpilot.run_id": run_id if run_id is not None else -1,
                "flowpilot.workflow": workflow,
                "flowpilot.version_hash": version_hash,
            }
        )

    def step_try(self, step_id: str, number: int, item: int | None = None) -> SpanStart:
        """One try's span (a block), the parent of the calls made in this thread while
        it runs."""
        attributes: dict[str, Any] = {"flowpilot.step_id": step_id, "flowpilot.attempt": number}
        if item is not None:
            attributes["flowpilot.item"] = item
        name = f"step {step_id}" if item is None else f"step {step_id} item {item}"
        return SpanStart(self, name, attributes, True)

    def try_ended(
        self,
        span: SpanStart,
        status: str,
        error: Mapping[str, Any] | None,
        worker: str | None = None,
    ) -> None:
        """What the try's record says: its status, its error (type and message, as
        stored: scrubbed), its worker. What it sent is on its call's span."""
        span.attributes["flowpilot.status"] = status
        if worker:
            span.attributes["flowpilot.worker"] = worker
        self._ended(span, None, error)

    def call(self, name: str, attributes: Mapping[str, Any]) -> SpanStart:
        """A tool or model call's span (a block), a child of the try running in this
        thread."""
        return SpanStart(self, name, dict(attributes), False)

    def call_ended(
        self,
        span: SpanStart,
        *,
        request: Mapping[str, Any] | None = None,
        error: Mapping[str, Any] | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        if attributes:
            span.attributes.update(attributes)
        self._ended(span, request, error)

    # --- making and writing spans -----------------------------------------------------

    def _ended(
        self, span: SpanStart, request: Mapping[str, Any] | None, error: Mapping[str, Any] | None
    ) -> None:
        if request:
            for key, field in _REQUEST_ATTRIBUTES:
                value = request.get(field)
                if value is not None:
                    span.attributes[key] = value
        if error:
            span.attributes["flowpilot.error.type"] = str(error.get("type", ""))
            span.attributes["flowpilot.error.message"] = error.get("message", "")
        span.attributes["flowpilot.ok"] = not error

    def _write(self, span: SpanStart, end_ns: int) -> None:
        try:
            self._export(span, end_ns)
        except Exception as exc:  # noqa: BLE001 - a span is never worth a run's step
            lost_span(exc)

    def _export(self, span: SpanStart, end_ns: int) -> None:
        attributes = self._clean(span.attributes)
        if span.run_level:
            attributes.update(self.common)
        message = attributes.pop("flowpilot.error.message", None)
        ok = attributes.pop("flowpilot.ok", True)
        status = self._ok if ok else self._status(self._error, message or "")
        parent = (
            self._root
            if span.parent_id == self.root_id
            else self._context(self.trace_id, span.parent_id, False, self.sampled)
        )
        readable = self._readable(
            name=span.name,
            context=self._context(self.trace_id, span.span_id, False, self.sampled),
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            status=status,
            start_time=span.start_ns,
            end_time=max(end_ns, span.start_ns),
            instrumentation_scope=self.scope,
        )
        for processor in self.process.processors:
            processor.on_end(readable)

    def _clean(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Attributes as OpenTelemetry takes them, every text masked by value."""
        clean: dict[str, Any] = {}
        scrub = self.redactor.scrub_text
        for key, value in attributes.items():
            kind = type(value)
            if kind is str:
                clean[key] = scrub(value)[:MAX_ATTRIBUTE_CHARS]
            elif kind is bool or kind is float or (kind is int and INT64_MIN <= value <= INT64_MAX):
                clean[key] = value
            elif kind is int:
                clean[key] = str(value)
            elif value is None:
                continue
            elif isinstance(value, bool | float):
                clean[key] = bool(value) if isinstance(value, bool) else float(value)
            elif isinstance(value, int):
                number = int(value)
                clean[key] = number if INT64_MIN <= number <= INT64_MAX else str(number)
            else:
                clean[key] = scrub(str(value))[:MAX_ATTRIBUTE_CHARS]
        return clean


_REQUEST_ATTRIBUTES = (
    ("http.request.method", "method"),
    ("url.full", "url"),
    ("http.response.status_code", "status"),
)


def lost_span(exc: Exception) -> None:
    """Say that a span was not made (the run goes on)."""
    logger.warning("tracing: a span was lost (%s: %s)", type(exc).__name__, exc)


def _new_span_id() -> int:
    return random.getrandbits(64) or 1


def run_tracer(
    *, run_id: int | None, run_uuid: str, workflow: str, version_hash: str, redactor: Redactor
) -> RunTracer | None:
    """A run's tracer, or None when tracing is off (or the run is not sampled)."""
    if not tracing_enabled() or not sampled(run_uuid):
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
    approved_at: str | None = None,
    parent_run_id: int | None = None,
    resumed_at: datetime | None = None,
    extra: Mapping[str, int] | None = None,
) -> None:
    """Write the run's root span, once it has finished (see the module doc): built with
    the ids every earlier span named as their parent, from ``started`` to ``finished``.

    A resumed run finishes again: that end is a span of its own (``run <workflow>
    (resumed)``, from ``resumed_at``), a child of the root written at the first end, so
    no span id is written twice. ``extra`` holds what upper layers add (ids: the
    approval the run ran under, ``flowpilot.approval_id``)."""
    if not tracing_enabled() or not sampled(run_uuid):
        return
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    from runs.engine.otlp import plain_span_class

    process = process_tracing()
    attributes: dict[str, Any] = {
        "flowpilot.run_id": run_id,
        "flowpilot.run_uuid": str(run_uuid),
        "flowpilot.workflow": workflow,
        "flowpilot.version_hash": version_hash,
        "flowpilot.status": status,
        "flowpilot.trigger": trigger,
    }
    optional = {
        "flowpilot.version": version,
        "flowpilot.approved_by": approved_by,
        "flowpilot.approved_at": approved_at,
        "flowpilot.parent_run_id": parent_run_id,
    }
    attributes.update({key: value for key, value in optional.items() if value is not None})
    for key, value in (extra or {}).items():
        attributes.setdefault(key, value)  # never in place of the run's own
    flags = TraceFlags(TraceFlags.SAMPLED)
    trace_id, root_id = trace_id_of(run_uuid), root_span_id_of(run_uuid)
    name, span_id, parent = f"run {workflow}", root_id, None
    if resumed_at is not None:
        name, started = f"run {workflow} (resumed)", resumed_at
        digest = hashlib.sha256(f"flowpilot-run:{run_uuid}:{resumed_at.isoformat()}".encode())
        span_id = int.from_bytes(digest.digest()[:8], "big") or 1
        parent = SpanContext(trace_id, root_id, False, flags)
    ok = status == "succeeded"
    message = error_summary[:MAX_ATTRIBUTE_CHARS]  # stored scrubbed (the steps' errors)
    span = plain_span_class()(
        name=name,
        context=SpanContext(trace_id, span_id, False, flags),
        parent=parent,
        resource=process.provider.resource,
        attributes=attributes,
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK) if ok else Status(StatusCode.ERROR, message),
        start_time=_ns(started),
        end_time=_ns(max(finished, started)),
        instrumentation_scope=InstrumentationScope(SCOPE),
    )
    for processor in process.processors:
        processor.on_end(span)


def sampled(run_uuid: str) -> bool:
    """Whether the run is traced, under ``FLOWPILOT_TRACE_RATIO`` (from the standard
    ``OTEL_TRACES_SAMPLER`` and its argument): the decision OpenTelemetry's trace-id
    ratio sampler makes, from the low 64 bits of the trace id, so every process decides
    the same for one run."""
    ratio = float(getattr(settings, "FLOWPILOT_TRACE_RATIO", 1.0))
    if ratio >= 1:
        return True
    return trace_id_of(run_uuid) & 0xFFFFFFFFFFFFFFFF < round(ratio * 2**64)


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000_000)
