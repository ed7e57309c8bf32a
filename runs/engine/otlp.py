"""The OTLP/HTTP span exporter of runs' traces, with an encoder of its own.

``SpanExporter`` is the SDK's OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-
http``: its endpoint, headers, timeout, compression, TLS and retries, all from the
standard ``OTEL_EXPORTER_OTLP_*`` variables) with one part replaced: turning a batch
of spans into the protobuf bytes of an ``ExportTraceServiceRequest``. The SDK's encoder
builds a protobuf object per span, attribute and value; the spans of a run are all of
one shape (ids, a name, two times, a few attributes that are text, numbers or
booleans, a status), and writing their wire format directly, the fields a run's spans
share (its trace id, the kind, a status, a repeated attribute) from cached bytes, is
several times faster: a chain of 100 steps' 201 spans in 1.7 ms here, where this
encoder's first version took 3.8 and the SDK's several times more
(``benchmarks/compare.py``, tracing, and docs/benchmarks.md).

The bytes are the same message the SDK's encoder makes (a test decodes both and
compares them); a batch holding anything this encoder does not write (events, links,
a value that is a list) is encoded by the SDK's instead.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

_FIXED64 = struct.Struct("<Q")
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


@functools.cache
def plain_span_class() -> type[ReadableSpan]:
    """The SDK's ``ReadableSpan`` as the runs' tracer makes it: every attribute a string,
    a number or a boolean, no events, no links — so the exporter need not look (looking
    cost about as much as encoding)."""
    from opentelemetry.sdk.trace import ReadableSpan

    class PlainSpan(ReadableSpan):
        pass

    return PlainSpan


def encodable(spans: Sequence[ReadableSpan]) -> bool:
    """Whether every span is one this encoder writes whole."""
    plain = plain_span_class()
    for span in spans:
        if type(span) is plain:
            continue
        if span.events or span.links or span.dropped_attributes:
            return False
        for value in (span.attributes or {}).values():
            if not isinstance(value, str | bool | int | float):
                return False
    return True


def _span(span: ReadableSpan) -> bytes:
    context = span.context
    assert context is not None
    parent = span.parent
    parts = [
        _trace_id_field(context.trace_id),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),  # field 2, 8 bytes
    ]
    trace_state = context.trace_state
    if trace_state:
        parts.append(_text(3, trace_state.to_header()))
    if parent is not None:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))  # field 4
    parts.append(_text(5, span.name))
    parts.append(_KIND[span.kind])
    parts.append(_TIMES.pack(0x39, span.start_time or 0, 0x41, span.end_time or 0))
    attributes = span.attributes
    if attributes:
        parts.extend(_pair_of(9, key, value) for key, value in attributes.items())
    status = span.status
    parts.append(_status(status.status_code, status.description or ""))
    parts.append(_FLAGS_REMOTE if parent is not None and parent.is_remote else _FLAGS)
    return b"".join(parts)


# Fields 7 and 8 (fixed64 start and end times), each after its one-byte tag.
_TIMES = struct.Struct("<BQBQ")
# Field 16 (fixed32 flags): "has is-remote" (0x100), and "is remote" (0x200).
_FLAGS = b"\x85\x01" + struct.pack("<I", 0x100)
_FLAGS_REMOTE = b"\x85\x01" + struct.pack("<I", 0x300)


@functools.lru_cache(maxsize=256)
def _trace_id_field(trace_id: int) -> bytes:
    """Field 1 (16 bytes); a run's spans share it, so it is written once per run."""
    return b"\x0a\x10" + trace_id.to_bytes(16, "big")


class _Kinds(dict):
    """Field 6 (``SpanKind``, counted from 1 in OTLP) for each kind, made on first use."""

    def __missing__(self, kind: Any) -> bytes:
        self[kind] = encoded = b"\x30" + _varint(kind.value + 1)
        return encoded


_KIND = _Kinds()


@functools.lru_cache(maxsize=1024)
def _status(code: Any, description: str) -> bytes:
    """Field 15 (``Status``: message 2, code 3)."""
    status = _text(2, description) if description else b""
    if code.value:
        status += b"\x18" + _varint(code.value)
    return _field(15, status)


def encode_spans(spans: Iterable[ReadableSpan]) -> bytes:
    """An ``ExportTraceServiceRequest``: the spans grouped by resource, then by
    instrumentation scope, as the SDK's encoder groups them."""
    groups: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        _, scopes = groups.setdefault(id(resource), (resource, {}))
        scopes.setdefault(id(scope), (scope, []))[1].append(_span(span))
    body = b""
    for resource, scopes in groups.values():
        scope_spans = b""
        for scope, encoded in scopes.values():
            head = b""
            if scope is not None:
                head = _text(1, scope.name)
                if scope.version:
                    head += _text(2, scope.version)
                head = _field(1, head)
            tail = b""
            if scope is not None and scope.schema_url:
                tail = _text(3, scope.schema_url)
            scope_spans += _field(2, head + b"".join(_field(2, s) for s in encoded) + tail)
        resource_bytes = _field(1, _attributes(1, resource.attributes))
        schema = _text(3, resource.schema_url) if resource.schema_url else b""
        body += _field(1, resource_bytes + scope_spans + schema)
    return body


def span_exporter() -> Any:
    """The SDK's OTLP/HTTP span exporter, encoding with ``encode_spans`` (see the module
    doc)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    class SpanExporter(OTLPSpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            client = getattr(self, "_client", None)
            if getattr(self, "_shutdown", False) or client is None or not encodable(spans):
                return super().export(spans)
            result = client.export(encode_spans(spans))
            return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE

    return SpanExporter()
