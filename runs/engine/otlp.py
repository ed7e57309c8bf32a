"""The OTLP/HTTP span exporter of runs' traces, with an encoder of its own.

``span_exporter`` is the SDK's OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-
http``: its endpoint, headers, timeout, compression, TLS and retries, all from the
standard ``OTEL_EXPORTER_OTLP_*`` variables) with one part replaced: turning a batch
of spans into the protobuf bytes of an ``ExportTraceServiceRequest``.

The SDK's encoder builds a protobuf object per span, attribute and value, from the
SDK's ``ReadableSpan``, itself built of a ``SpanContext`` per span and per parent, a
``Status`` and an attribute mapping. A run's spans are all of one shape (ids, a name,
two times, a few attributes that are text, numbers or booleans, a status), so their
wire format is written directly (``encode_span``) from the parts the runs' tracer kept
(``runs.engine.tracing.SpanBundle``): the fixed-size fields in one pack, the fields a
run's spans share (the trace id, the status, a repeated attribute) from cached bytes,
and a request is the spans' bytes joined under the process's resource and scope
(``encode_request``). A chain of 100 steps' 201 spans is written in under a
millisecond here, where building the SDK's spans and encoding them took several
(``benchmarks/compare.py``, tracing, and docs/benchmarks.md).

The bytes are the same message the SDK's encoder makes of the equivalent
``ReadableSpan`` (a test decodes both and compares them). Any other span handed to the
exporter (one of the SDK's own) is encoded by the SDK's encoder, in a request of its
own.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.trace import SpanContext, TraceFlags

logger = logging.getLogger("flowpilot.engine")

_DOUBLE = struct.Struct("<d")
_SMALL = [bytes((n,)) for n in range(128)]


def _varint(value: int) -> bytes:
    if value < 128:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode("utf-8", "surrogatepass"))


def _any_value(value: Any) -> bytes:
    """An ``AnyValue``: string 1, bool 2, int 3, double 4."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    return _text(1, str(value))


def _attributes(number: int, attributes: Mapping[str, Any]) -> bytes:
    """Repeated ``KeyValue`` (key 1, value 2) as field ``number``."""
    return b"".join(_pair_of(number, key, value) for key, value in attributes.items())


def _pair_of(number: int, key: str, value: Any) -> bytes:
    """``_pair``, but a float is written each time: ``0.0`` and ``-0.0`` are equal and
    hash alike, so a cache would write one for the other."""
    if type(value) is float:
        return _pair.__wrapped__(number, key, value)
    return _pair(number, key, value)


@functools.lru_cache(maxsize=4096, typed=True)
def _pair(number: int, key: str, value: Any) -> bytes:
    """One ``KeyValue`` field; the same pairs come again and again (a run's ids, a tool's
    name, a status), so they are written once (``typed``: ``True``, ``1`` and ``1.0``
    are three values; floats do not come here, ``_pair_of``)."""
    return _field(number, _text(1, key) + _field(2, _any_value(value)))


class EncodedSpan:
    """A finished span as the bytes of its ``Span`` message, for the SDK's batch
    processor, which reads only ``context.trace_flags.sampled`` of what it queues (every
    span written is sampled: an unsampled run writes none)."""

    __slots__ = ("data",)
    context = SpanContext(1, 1, False, TraceFlags(TraceFlags.SAMPLED))
    count = 1  # spans

    def __init__(self, data: bytes) -> None:
        self.data = data

    def otlp(self) -> list[bytes]:
        return [self.data]


# A span's fixed-size fields, in one pack (protobuf reads fields in any order): the
# span id (2, 8 bytes, big-endian as OTLP writes ids), the parent's (4), the kind
# (6: INTERNAL, the API's 0 counted from 1), the start and end times (7 and 8, fixed64)
# and the flags (16, fixed32: "has is-remote", 0x100; no parent here is remote).
_FIXED = struct.Struct("<2s8s2s8s2sBQBQ2sI")
_FIXED_ROOT = struct.Struct("<2s8s2sBQBQ2sI")
_OK = b"\x7a\x02\x18\x01"  # field 15, Status {code: OK}


@functools.lru_cache(maxsize=256)
def trace_id_field(trace_id: int) -> bytes:
    """Field 1 (16 bytes); a run's spans share it, so it is written once per run."""
    return b"\x0a\x10" + trace_id.to_bytes(16, "big")


@functools.lru_cache(maxsize=1024)
def _error_status(message: str) -> bytes:
    """Field 15 (``Status``: message 2, code 3 ERROR)."""
    return _field(15, (_text(2, message) if message else b"") + b"\x18\x02")


@functools.lru_cache(maxsize=4096)
def _name(name: str) -> bytes:
    """Field 5; a run's span names come back run after run (``step <id>``)."""
    return _text(5, name)


def attribute_pair(key: str, value: Any) -> bytes:
    """One attribute of a span (field 9): a string, a boolean, a 64-bit integer or a
    float."""
    return _pair_of(9, key, value)


def encode_span(
    trace_field: bytes,
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    pairs: list[bytes],
    error: str | None,
) -> EncodedSpan:
    """One span of kind INTERNAL (``trace_field``: ``trace_id_field(trace id)``; no
    parent: a root; ``pairs``: its attributes, each ``attribute_pair``), its status
    OK, or ERROR with ``error`` as its message."""
    if parent_id is None:
        fixed = _FIXED_ROOT.pack(
            b"\x12\x08", span_id.to_bytes(8, "big"), b"\x30\x01",
            0x39, start_ns, 0x41, end_ns, b"\x85\x01", 0x100,
        )  # fmt: skip
    else:
        fixed = _FIXED.pack(
            b"\x12\x08", span_id.to_bytes(8, "big"), b"\x22\x08", parent_id.to_bytes(8, "big"),
            b"\x30\x01", 0x39, start_ns, 0x41, end_ns, b"\x85\x01", 0x100,
        )  # fmt: skip
    body = b"".join(
        [trace_field, fixed, _name(name), *pairs, _OK if error is None else _error_status(error)]
    )
    return EncodedSpan(b"\x12" + _varint(len(body)) + body)  # field 2 of ScopeSpans


def resource_field(resource: Any) -> bytes:
    """Field 1 of ``ResourceSpans``: the resource's attributes."""
    return _field(1, _attributes(1, resource.attributes))


def encode_request(
    resource: bytes, scope: str, spans: Sequence[bytes], schema_url: str = ""
) -> bytes:
    """An ``ExportTraceServiceRequest`` of encoded spans, all of one resource (its
    ``resource_field``) and one instrumentation scope (a name, no version)."""
    scope_spans = _field(2, _field(1, _text(1, scope)) + b"".join(spans))
    schema = _text(3, schema_url) if schema_url else b""
    return _field(1, resource + scope_spans + schema)


def span_exporter(
    resource: Any, scope: str, *, batch: int = 512, sent: Callable[[int], None] | None = None
) -> Any:
    """The SDK's OTLP/HTTP span exporter, sending the spans of the runs' tracer (an item
    with ``otlp()``: its spans' bytes, one ``Span`` message each), all of ``resource``
    and ``scope``, in requests of at most ``batch`` spans; ``sent`` is told how many
    spans each export took off the queue, sent or not (see the module doc)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    head = resource_field(resource)
    schema_url = resource.schema_url or ""

    class SpanExporter(OTLPSpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            others: list[Any] = []
            requests: list[list[bytes]] = [[]]
            taken = in_request = 0
            for span in spans:
                otlp = getattr(span, "otlp", None)
                if otlp is None:
                    others.append(span)
                    continue
                try:
                    written = otlp()
                except Exception as exc:  # noqa: BLE001 - one item never costs the batch
                    taken += int(getattr(span, "count", 1))
                    logger.warning("tracing: spans were lost (%s: %s)", type(exc).__name__, exc)
                    continue
                taken += len(written)
                for data in written:
                    if in_request >= batch:
                        requests.append([])
                        in_request = 0
                    requests[-1].append(data)
                    in_request += 1
            try:
                result = super().export(others) if others else SpanExportResult.SUCCESS
                client = getattr(self, "_client", None)
                for request in requests:
                    if not request:
                        continue
                    if getattr(self, "_shutdown", False) or client is None:
                        logger.warning("tracing: the exporter is shut down; spans lost")
                        return SpanExportResult.FAILURE
                    result = self._send(client, request, result)
                return result
            finally:
                if sent is not None and taken:
                    sent(taken)

        def _send(self, client: Any, encoded: list[bytes], result: Any) -> SpanExportResult:
            body = encode_request(head, scope, encoded, schema_url)
            limit = int(getattr(self, "_max_request_size", 0) or 0)
            if 0 < limit < len(body):
                if len(encoded) > 1:  # two requests, each within the limit
                    half = len(encoded) // 2
                    first = self._send(client, encoded[:half], result)
                    return self._send(client, encoded[half:], first)
                logger.warning(
                    "tracing: a span of %d bytes is over the exporter's max_request_size "
                    "(%d bytes); it is dropped",
                    len(body), limit,
                )  # fmt: skip
                return SpanExportResult.FAILURE
            if not client.export(body).success:
                return SpanExportResult.FAILURE
            return result

    return SpanExporter()
