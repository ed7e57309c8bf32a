"""runs/engine/otlp.py: the spans' own encoder writes the very message the SDK's encoder
writes, and the exporter sends it to an OTLP receiver."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs.engine.otlp import encodable, encode_spans, span_exporter
from tests.fakes.otlp import FakeCollector

RESOURCE = Resource.create({"service.name": "flowpilot", "deployment": "test"})
SCOPE = InstrumentationScope("flowpilot")
FLAGS = TraceFlags(TraceFlags.SAMPLED)
TRACE = 0xABCDEF0123456789ABCDEF0123456789


def span(name="step a", *, parent=0x1234, remote=False, attributes=None, status=None, **kw):
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE, 0x1122334455667788, False, FLAGS),
        parent=None
        if parent is None
        else SpanContext(0xABCDEF0123456789ABCDEF0123456789, parent, remote, FLAGS),
        resource=kw.pop("resource", RESOURCE),
        attributes=attributes if attributes is not None else {"flowpilot.step_id": "a"},
        status=status or Status(StatusCode.UNSET),
        start_time=1_700_000_000_123_456_789,
        end_time=1_700_000_000_223_456_789,
        instrumentation_scope=kw.pop("scope", SCOPE),
        **kw,
    )


def parsed(data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(data)
    return request


SHAPES = [
    [span()],
    [span(parent=None, name="run w", status=Status(StatusCode.OK))],
    [span(status=Status(StatusCode.ERROR, "GET http://x/?key=*** returned HTTP 503: é ✓"))],
    [span(remote=True)],
    [span(kind=SpanKind.CLIENT)],
    [
        span(
            attributes={
                "s": "text",
                "i": 200,
                "neg": -5,
                "big": 2**63 - 1,
                "b": True,
                "f": False,
                "x": 0.25,
                "url.full": "http://127.0.0.1:1/echo/t1?key=***",
                "empty": "",
            }
        )
    ],
    [span(), span(name="tool t"), span(resource=Resource.create({"service.name": "other"}))],
    [span(scope=InstrumentationScope("flowpilot", "1.2")), span()],
    # Equal values of three types, each written as its own type (the pairs' cache).
    [span(attributes={"v": 1}), span(attributes={"v": True}), span(attributes={"v": 1.0})],
    [span(attributes={"v": 0}), span(attributes={"v": False}), span(attributes={"v": 0.0})],
    # Equal floats of two signs: each its own (a cache keyed by value would mix them).
    [span(attributes={"v": -0.0}), span(attributes={"v": 0.0}), span(attributes={"v": -0.0})],
]


@pytest.mark.parametrize("spans", SHAPES)
def test_the_bytes_are_the_sdks_message(spans):
    assert encodable(spans)
    assert parsed(encode_spans(spans)) == sdk_encode(spans)


def test_a_span_it_does_not_write_whole_goes_to_the_sdks_encoder():
    assert not encodable([span(events=[Event("e")])])
    assert not encodable([span(attributes={"list": ("a", "b")})])


def test_the_exporter_sends_them_to_a_receiver(monkeypatch):
    with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.traces_url)
        exporter = span_exporter()
        result = exporter.export([span(), span(name="tool t", events=[Event("kept")])])
        exporter.shutdown()
        received = collector.spans()
    assert result.name == "SUCCESS"
    assert sorted(s.name for s in received) == ["step a", "tool t"]
