"""runs/engine/otlp.py: the spans' own encoder writes the very message the SDK's encoder
writes of the equivalent SDK spans, and the exporter sends it to an OTLP receiver."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs.engine.otlp import (
    EncodedSpan,
    attribute_pair,
    encode_request,
    encode_span,
    resource_field,
    span_exporter,
    trace_id_field,
)
from tests.fakes.otlp import FakeCollector

RESOURCE = Resource.create({"service.name": "flowpilot", "deployment": "test"})
FLAGS = TraceFlags(TraceFlags.SAMPLED)
TRACE = 0xABCDEF0123456789ABCDEF0123456789
START, END = 1_700_000_000_123_456_789, 1_700_000_000_223_456_789


def ours(name="step a", *, span_id=0x1122334455667788, parent=0x1234, attributes=None, error=None):
    pairs = [attribute_pair(k, v) for k, v in (attributes or {"flowpilot.step_id": "a"}).items()]
    return encode_span(trace_id_field(TRACE), span_id, parent, name, START, END, pairs, error)


def theirs(
    name="step a", *, span_id=0x1122334455667788, parent=0x1234, attributes=None, error=None
):
    return ReadableSpan(
        name=name,
        context=SpanContext(TRACE, span_id, False, FLAGS),
        parent=None if parent is None else SpanContext(TRACE, parent, False, FLAGS),
        resource=RESOURCE,
        attributes=attributes or {"flowpilot.step_id": "a"},
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.OK) if error is None else Status(StatusCode.ERROR, error),
        start_time=START,
        end_time=END,
        instrumentation_scope=InstrumentationScope("flowpilot"),
    )


def parsed(data: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(data)
    return request


SHAPES = [
    [{}],
    [{"parent": None, "name": "run w"}],
    [{"error": "GET http://x/?key=*** returned HTTP 503: é ✓"}],
    [{"error": ""}],
    [
        {
            "attributes": {
                "s": "text",
                "i": 200,
                "neg": -5,
                "big": 2**63 - 1,
                "small": -(2**63),
                "b": True,
                "f": False,
                "x": 0.25,
                "url.full": "http://127.0.0.1:1/echo/t1?key=***",
                "empty": "",
                "long": "ü" * 300,
            }
        }
    ],
    [{}, {"name": "tool t", "span_id": 7}, {"name": "step b", "span_id": 2**64 - 1}],
    # Equal values of three types, each written as its own type (the pairs' cache).
    [{"attributes": {"v": 1}}, {"attributes": {"v": True}}, {"attributes": {"v": 1.0}}],
    [{"attributes": {"v": 0}}, {"attributes": {"v": False}}, {"attributes": {"v": 0.0}}],
    # Equal floats of two signs: each its own (a cache keyed by value would mix them).
    [{"attributes": {"v": -0.0}}, {"attributes": {"v": 0.0}}, {"attributes": {"v": -0.0}}],
]


@pytest.mark.parametrize("shape", SHAPES)
def test_the_bytes_are_the_sdks_message(shape):
    mine = encode_request(resource_field(RESOURCE), "flowpilot", [ours(**s).data for s in shape])
    assert parsed(mine) == sdk_encode([theirs(**s) for s in shape])


def test_the_exporter_sends_its_own_spans_and_the_sdks_to_a_receiver(monkeypatch):
    with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.traces_url)
        exporter = span_exporter(RESOURCE, "flowpilot")
        sdk_span = theirs(name="tool t")
        sdk_span._events = (Event("kept"),)  # what the own encoder never writes
        result = exporter.export([ours(), sdk_span, ours(name="step b")])
        exporter.shutdown()
        received = collector.spans()
    assert result.name == "SUCCESS"
    assert sorted(s.name for s in received) == ["step a", "step b", "tool t"]
    assert {s.service for s in received} == {"flowpilot"}


class _Client:
    """Stands in for the exporter's HTTP client: keeps the bodies it is given."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def export(self, body: bytes):
        self.bodies.append(body)
        return type("Result", (), {"success": True})()


def test_a_batch_over_the_request_size_limit_is_sent_in_parts_and_a_lone_giant_is_dropped(
    monkeypatch, caplog
):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    exporter = span_exporter(RESOURCE, "flowpilot")
    client = exporter._client = _Client()
    head = resource_field(RESOURCE)
    one = len(encode_request(head, "flowpilot", [ours().data]))
    two = len(encode_request(head, "flowpilot", [ours(span_id=1).data, ours(span_id=2).data]))
    exporter._max_request_size = two  # two spans fit, not three
    assert exporter.export([ours(span_id=n) for n in range(1, 6)]).name == "SUCCESS"
    sent = [parsed(body).resource_spans[0].scope_spans[0].spans for body in client.bodies]
    assert all(0 < len(spans) <= 2 for spans in sent)
    assert sorted(int.from_bytes(s.span_id, "big") for part in sent for s in part) == [
        1,
        2,
        3,
        4,
        5,
    ]

    exporter._max_request_size = one - 1
    client.bodies.clear()
    assert exporter.export([ours()]).name == "FAILURE"
    assert client.bodies == []
    assert "over the exporter's max_request_size" in caplog.text


def test_a_span_whose_bytes_cannot_be_written_is_lost_alone(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    exporter = span_exporter(RESOURCE, "flowpilot")
    client = exporter._client = _Client()

    class Broken(EncodedSpan):
        def otlp(self) -> list[bytes]:
            raise ValueError("no bytes")

    assert exporter.export([ours(), Broken(b""), ours(name="step b")]).name == "SUCCESS"
    (body,) = client.bodies
    assert [s.name for s in parsed(body).resource_spans[0].scope_spans[0].spans] == [
        "step a",
        "step b",
    ]
    assert "spans were lost (ValueError: no bytes)" in caplog.text


def test_items_are_sent_in_requests_of_at_most_a_batch_and_counted_off_the_queue(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    taken: list[int] = []
    exporter = span_exporter(RESOURCE, "flowpilot", batch=4, sent=taken.append)
    client = exporter._client = _Client()

    class Bundle:
        """Three spans as one item (as a run's spans wait to be sent)."""

        def __init__(self, first: int) -> None:
            self.first = first

        def otlp(self) -> list[bytes]:
            return [ours(span_id=self.first + n).data for n in range(3)]

    assert exporter.export([Bundle(1), Bundle(4), ours(span_id=7)]).name == "SUCCESS"
    sizes = [len(parsed(b).resource_spans[0].scope_spans[0].spans) for b in client.bodies]
    assert sizes == [4, 3]  # a request holds at most 4 spans
    assert taken == [7]
