"""The OTLP/HTTP span exporter of runs' traces, with an encoder of its own.

``SpanExporter`` is the SDK's OTLP/HTTP exporter (``opentelemetry-exporter-otlp-proto-
http``: its endpoint, headers, timeout, compression, TLS and retries, all from the
standard ``OTEL_EXPORTER_OTLP_*`` variables) with one part replaced: turning a batch
of spans into the protobuf bytes of an ``ExportTraceServiceRequest``. The SDK's encoder
builds a protobuf object per span, attribute and value, about 20 µs a span here; the
spans of a run are all of one shape (ids, a name, two times, a few attributes that are
text, numbers or booleans, a status), and writing their wire format directly takes
about 8. In a chain of 100 steps (201 spans) that is the difference between sending
costing about 3 % of the run and about 1.5 % (``benchmarks/compare.py``, tracing).

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
    return b"".join(
        _pair(number, key, type(value).__name__, value) for key, value in attributes.items()
    )


@functools.lru_cache(maxsize=4096)
def _pair(number: int, key: str, kind: str, value: Any) -> bytes:
    """One ``KeyValue`` field; the same pairs come again and again (a run's ids, a tool's
    name, a status), so they are written once (``kind`` keeps ``True`` apart from ``1``)."""
    return _field(number, _text(1, key) + _field(2, _any_value(value)))


def encodable(spans: Sequence[ReadableSpan]) -> bool:
    """Whether every span is one this encoder writes whole."""
    for span in spans:
        if span.events or span.links or span.dropped_attributes:
            return False
        for value in (span.attributes or {}).values():
            if not isinstance(value, str | bool | int | float):
                return False
    return True


def _span(span: ReadableSpan) -> bytes:
    context = span.context
    assert context is not None
    out = _field(1, context.trace_id.to_bytes(16, "big")) + _field(
        2, context.span_id.to_bytes(8, "big")
    )
    trace_state = context.trace_state.to_header() if context.trace_state else ""
    if trace_state:
        out += _text(3, trace_state)
    if span.parent is not None:
        out += _field(4, span.parent.span_id.to_bytes(8, "big"))
    out += _text(5, span.name)
    out += b"\x30" + _varint(span.kind.value + 1)  # SpanKind: OTLP counts from 1
    out += b"\x39" + _FIXED64.pack(span.start_time or 0)
    out += b"\x41" + _FIXED64.pack(span.end_time or 0)
    out += _attributes(9, span.attributes or {})
    status = b""
    if span.status.description:
        status += _text(2, span.status.description)
    if span.status.status_code.value:
        status += b"\x18" + _varint(span.status.status_code.value)
    out += _field(15, status)
    flags = 0x100 | (0x200 if span.parent is not None and span.parent.is_remote else 0)
    out += b"\x85\x01" + struct.pack("<I", flags)
    return out


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
