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

Spans are made from flowpilot's own records, without the SDK's span objects: when a
try's or a call's block ends, what it says is kept as one flat tuple in its run's item
of the SDK's batch processor (``SpanBundle``), and the item's bytes are written when
the exporter sends it (``runs.engine.otlp``). Live SDK spans (a first version) cost a
chain about twice as much, mostly in the sampler, the attribute checks and the
context switches of every span; building the SDK's ``ReadableSpan`` per span, or even
its bytes at its end, still cost the step's own thread a few milliseconds per chain
(``benchmarks/compare.py`` measures a chain with tracing off and on; the console
exporter, for a person trying tracing out, still gets ``ReadableSpan``). No other
No other
library's spans join these traces: the httpx instrumentation would record URLs
unmasked, and the Celery one makes a trace per task, where a run is one trace.

The tracer provider is one per process (like the process's HTTP client: pooled,
never per run), made on first use after a fork.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import random
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import TYPE_CHECKING, Any

from django.conf import settings

from tools.redaction import Redactor

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

SCOPE = "flowpilot"
logger = logging.getLogger("flowpilot.engine")
DROP_WARNING_SECONDS = 10.0  # spans dropped past the queue's bound: one warning at most so often
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
    """This process's provider and its span processors: ``encoded`` take the runs'
    spans as OTLP bytes (``runs.engine.otlp.EncodedSpan``), ``readable`` as the SDK's
    ``ReadableSpan`` (the console exporter)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

        from runs.engine.otlp import span_exporter

        exporters = list(getattr(settings, "FLOWPILOT_TRACE_EXPORTERS", ()) or ("otlp",))
        name = os.environ.get("OTEL_SERVICE_NAME") or "flowpilot"
        self.resource = Resource.create({"service.name": name})
        self.provider: TracerProvider = TracerProvider(resource=self.resource)
        self.encoded: list[SpanProcessor] = []
        self.readable: list[SpanProcessor] = []
        # A run's spans wait to be sent together, as one item of the batch processor
        # (``SpanBundle``, at most an export batch of spans). The batch processor counts
        # items, so the bound on what waits, in spans, is kept here (``admit``, ``sent``).
        self.bundle_size = _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
        self.queue_limit = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self._waiting = self._dropped = 0
        self._warned_at = -math.inf
        self._waiting_lock = threading.Lock()
        self._early = threading.Event()
        self.closed = False
        for kind in dict.fromkeys(exporters):
            if kind == "console":
                processor = BatchSpanProcessor(ConsoleSpanExporter())
                self.readable.append(processor)
            else:
                exporter = span_exporter(
                    self.resource, SCOPE, batch=self.bundle_size, sent=self.sent
                )
                processor = BatchSpanProcessor(exporter, max_queue_size=self.queue_limit)
                self.encoded.append(processor)
            self.provider.add_span_processor(processor)
        if self.encoded:
            threading.Thread(target=self._send_early, name="flowpilot-spans", daemon=True).start()

    def admit(self, count: int) -> bool:
        """Whether ``count`` more spans may wait to be sent (``OTEL_BSP_MAX_QUEUE_SIZE``
        in all); if so they are counted as waiting. Once an export batch of spans waits,
        they are sent at once (``_send_early``), not at the batch processor's next
        delay: it counts items, one per run, so it would not wake for them. Spans past
        the bound are dropped, with a warning at most every ``DROP_WARNING_SECONDS``."""
        with self._waiting_lock:
            if self._waiting + count > self.queue_limit:
                self._dropped += count
                warn = time.monotonic() - self._warned_at >= DROP_WARNING_SECONDS
                if warn:
                    dropped, self._dropped, self._warned_at = self._dropped, 0, time.monotonic()
            else:
                self._waiting += count
                if self._waiting >= self.bundle_size:
                    self._early.set()
                return True
        if warn:
            logger.warning(
                "tracing: %d spans dropped: %d wait to be sent already "
                "(OTEL_BSP_MAX_QUEUE_SIZE; is the collector down or slow?)",
                dropped, self.queue_limit,
            )  # fmt: skip
        return False

    def sent(self, count: int) -> None:
        """``count`` spans left the queue (the exporter took them, sent or not)."""
        with self._waiting_lock:
            self._waiting = max(0, self._waiting - count)

    def _send_early(self) -> None:
        """A thread of this process's own: sends what waits whenever an export batch of
        spans is waiting (``admit``), through the batch processors' own flush."""
        while True:
            self._early.wait()
            self._early.clear()
            if self.closed:
                return
            try:
                for processor in self.encoded:
                    processor.force_flush()
            except Exception as exc:  # noqa: BLE001 - the thread must stay up
                logger.warning("tracing: sending early failed (%s: %s)", type(exc).__name__, exc)

    def flush(self, timeout_millis: int = 30_000) -> bool:
        return self.provider.force_flush(timeout_millis)

    def write(self, span: SpanParts) -> None:
        """Hand a finished span to every processor: as OTLP bytes to the exporter's, as
        the SDK's span to the console's."""
        if self.encoded:
            from runs.engine.otlp import attribute_pair, encode_span, trace_id_field

            pairs = [attribute_pair(key, value) for key, value in span.attributes.items()]
            encoded = encode_span(
                trace_id_field(span.trace_id), span.span_id, span.parent_id, span.name,
                span.start_ns, span.end_ns, pairs, span.error,
            )  # fmt: skip
            if self.admit(1):
                for processor in self.encoded:
                    processor.on_end(encoded)  # type: ignore[arg-type]
        self.write_readable(span)

    def write_readable(self, span: SpanParts) -> None:
        """The span as the SDK's ``ReadableSpan``, to the processors that take those."""
        if self.readable:
            readable = self._readable(span)
            for processor in self.readable:
                processor.on_end(readable)

    def _readable(self, span: SpanParts) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        flags = TraceFlags(TraceFlags.SAMPLED)
        parent = span.parent_id
        return ReadableSpan(
            name=span.name,
            context=SpanContext(span.trace_id, span.span_id, False, flags),
            parent=None if parent is None else SpanContext(span.trace_id, parent, False, flags),
            resource=self.resource,
            attributes=span.attributes,
            kind=SpanKind.INTERNAL,
            status=Status(StatusCode.OK)
            if span.error is None
            else Status(StatusCode.ERROR, span.error),
            start_time=span.start_ns,
            end_time=span.end_ns,
            instrumentation_scope=InstrumentationScope(SCOPE),
        )


@dataclass(frozen=True, slots=True)
class SpanParts:
    """A finished span as the processors are handed it: kind INTERNAL, status OK or,
    with ``error`` as its message, ERROR; attributes already masked and typed."""

    trace_id: int
    span_id: int
    parent_id: int | None  # None: a root
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    error: str | None


def _env_int(name: str, default: int) -> int:
    """A positive whole number from the environment, else ``default`` (as the SDK reads
    its ``OTEL_BSP_*`` variables)."""
    try:
        value = int(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


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
        process = process_tracing()
        process.provider.shutdown()
        process.closed = True
        process._early.set()  # its thread ends
    _process.cache_clear()


# The span of the try running in this context (this thread), so that the calls it makes
# name it as their parent: (trace id, span id). Each thread has its own value.
_CURRENT: ContextVar[tuple[int, int] | None] = ContextVar("flowpilot_current_span", default=None)


class SpanStart:
    """A span being made, and the block it times: its id, its parent's (the span
    current in this context when it was made, else the run's root), when it began and
    what it says so far. While the block runs it is the current span; when the block
    ends its tracer keeps what it says (``RunTracer._write``). A class, not a
    generator: a chain's step makes two."""

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


class SpanBundle:
    """Finished spans of one run, waiting to be sent, handed to the SDK's batch
    processor as one item (it reads only ``context.trace_flags.sampled`` of what it
    queues: every span written is sampled, an unsampled run writes none).

    It is handed over with the run's first span and the run's later spans join it
    while it waits in the queue; when the exporter sends it, it asks for their bytes
    (``otlp``), which takes them out and closes the bundle to further spans, and the
    run's next span starts a new one. So a run's spans wait no longer than the batch
    processor's delay, as any span does, and the queue holds one item per run, not one
    per span. Each span is one flat tuple of numbers and text (its fields, then its
    attributes' keys and values): nothing for the garbage collector to follow once it
    has looked at it."""

    __slots__ = ("spans", "taken", "tracer")

    def __init__(self, tracer: RunTracer) -> None:
        self.tracer = tracer
        self.spans: list[tuple[Any, ...]] = []
        self.taken = False  # the exporter has taken the spans: closed to new ones

    @property
    def context(self) -> Any:
        return self.tracer.sampled_context

    @property
    def count(self) -> int:
        return len(self.spans)

    def otlp(self) -> list[bytes]:
        """Take the spans out (the bundle is closed to new ones) and write their bytes,
        one ``Span`` message each."""
        with self.tracer._lock:
            self.taken = True
            spans, self.spans = self.spans, []
        try:
            return self.tracer._otlp(spans)
        except BaseException:
            self.tracer.process.sent(len(spans))  # taken out, none written: none waits
            raise


class RunTracer:
    """The spans of one run, for the steps' tries and calls (see the module doc).

    A span is made in two moves: ``step_try``/``call`` note its start (and make it the
    parent of what starts inside it, in this thread); ``try_ended``/``call_ended`` add
    what its record says; when its block ends, what it says is kept to be sent
    (``_write``, ``SpanBundle``): no sampler, no live span object, no attribute checks
    at every set — every attribute is a string, a number or a boolean made here.
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
        from runs.engine.otlp import EncodedSpan, attribute_pair, encode_span, trace_id_field

        self.process = process or process_tracing()
        self.redactor = redactor
        self.trace_id = trace_id_of(run_uuid)
        self.root_id = root_span_id_of(run_uuid)
        self._pair, self._encode = attribute_pair, encode_span
        self.sampled_context = EncodedSpan.context
        self._trace_field = trace_id_field(self.trace_id)
        # Masked and encoded once here; ``_write`` masks only what a span adds to it.
        self.common: dict[str, Any] = self._clean(
            {
                "flowpilot.run_id": run_id if run_id is not None else -1,
                "flowpilot.workflow": workflow,
                "flowpilot.version_hash": version_hash,
            }
        )
        self._common_pairs = b"".join(attribute_pair(k, v) for k, v in self.common.items())
        # The run's spans waiting to be sent (``_write``, ``SpanBundle``).
        self._lock = threading.Lock()
        self._bundle: SpanBundle | None = None
        self._batch = self.process.bundle_size

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
        """Add the finished span, as a plain tuple, to the run's bundle waiting to be
        sent (``SpanBundle``), starting a new one when the exporter has taken the last
        or it holds an export batch; its bytes are written when it is sent, in the
        exporter's thread or the flush, not here in the step's. The SDK's span is made
        only for a processor that takes those (the console)."""
        try:
            end_ns = max(end_ns, span.start_ns)
            process = self.process
            if process.encoded and process.admit(1):
                # One flat tuple (the attributes' keys and values after the span's
                # own fields): one object to keep, where a tuple per attribute made
                # eight.
                self._add(
                    (span.span_id, span.parent_id, span.name, span.start_ns, end_ns,
                     span.run_level, *chain.from_iterable(span.attributes.items()))
                )  # fmt: skip
            if process.readable:
                self._write_readable(span, end_ns)
        except Exception as exc:  # noqa: BLE001 - a span is never worth a run's step
            lost_span(exc)

    def _add(self, record: tuple[Any, ...]) -> None:
        with self._lock:
            bundle = self._bundle
            if bundle is None or bundle.taken or len(bundle.spans) >= self._batch:
                bundle = self._bundle = SpanBundle(self)
                for processor in self.process.encoded:
                    processor.on_end(bundle)  # type: ignore[arg-type]
            bundle.spans.append(record)

    def _otlp(self, spans: list[tuple[Any, ...]]) -> list[bytes]:
        """The spans' bytes: the attributes masked (with what the redactor knows by
        now) and encoded in one pass, the run's own ones written once per tracer. A
        span that cannot be written is lost alone."""
        out = []
        trace_field, encode, common = self._trace_field, self._encode, self._common_pairs
        for span in spans:
            try:
                span_id, parent_id, name, start_ns, end_ns, run_level = span[:6]
                pairs, error = self._pairs(zip(span[6::2], span[7::2], strict=True))
                if run_level:
                    pairs.append(common)
                encoded = encode(
                    trace_field, span_id, parent_id, name, start_ns, end_ns, pairs, error
                )
            except Exception as exc:  # noqa: BLE001 - one span never costs the others
                lost_span(exc)
                self.process.sent(1)  # it no longer waits
                continue
            out.append(encoded.data)
        return out

    def _error_of(self, attributes: Mapping[str, Any]) -> str | None:
        """None for a span that succeeded, else its status message (masked)."""
        if attributes.get("flowpilot.ok", True):
            return None
        message = str(attributes.get("flowpilot.error.message") or "")
        return self.redactor.scrub_text(message)[:MAX_ATTRIBUTE_CHARS]

    def _write_readable(self, span: SpanStart, end_ns: int) -> None:
        clean = {k: v for k, v in self._clean(span.attributes).items() if k not in _STATUS_KEYS}
        if span.run_level:
            clean.update(self.common)
        self.process.write_readable(
            SpanParts(
                self.trace_id, span.span_id, span.parent_id, span.name, span.start_ns,
                end_ns, clean, self._error_of(span.attributes),
            )
        )  # fmt: skip

    def _pairs(self, attributes: Iterable[tuple[str, Any]]) -> tuple[list[bytes], str | None]:
        """The attributes as OTLP pairs, every text masked by value (``_clean``, in one
        pass for the usual types), and the span's error (None: it succeeded)."""
        pairs: list[bytes] = []
        scrub, pair = self.redactor.scrub_text, self._pair
        ok, message = True, ""
        for key, value in attributes:
            kind = type(value)
            if key in _STATUS_KEYS:  # the span's status, not an attribute
                if key == "flowpilot.ok":
                    ok = bool(value)
                else:
                    message = str(value or "")
            elif kind is str:
                pairs.append(pair(key, scrub(value)[:MAX_ATTRIBUTE_CHARS]))
            elif kind is bool or (kind is int and INT64_MIN <= value <= INT64_MAX):
                pairs.append(pair(key, value))
            elif value is not None:
                pairs.extend(pair(k, v) for k, v in self._clean({key: value}).items())
        return pairs, (None if ok else scrub(message)[:MAX_ATTRIBUTE_CHARS])

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


# What ``_ended`` notes of the outcome, written as the span's status.
_STATUS_KEYS = frozenset({"flowpilot.ok", "flowpilot.error.message"})

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
    trace_id, root_id = trace_id_of(run_uuid), root_span_id_of(run_uuid)
    name, span_id, parent_id = f"run {workflow}", root_id, None
    if resumed_at is not None:
        name, started = f"run {workflow} (resumed)", resumed_at
        digest = hashlib.sha256(f"flowpilot-run:{run_uuid}:{resumed_at.isoformat()}".encode())
        span_id = int.from_bytes(digest.digest()[:8], "big") or 1
        parent_id = root_id
    message = error_summary[:MAX_ATTRIBUTE_CHARS]  # stored scrubbed (the steps' errors)
    start_ns = _ns(started)
    process_tracing().write(
        SpanParts(
            trace_id=trace_id,
            span_id=span_id,
            parent_id=parent_id,
            name=name,
            start_ns=start_ns,
            end_ns=max(_ns(finished), start_ns),
            attributes=attributes,
            error=None if status == "succeeded" else message,
        )
    )


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
