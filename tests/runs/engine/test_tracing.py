"""Traces of runs (runs/engine/tracing.py), sent over OTLP/HTTP to a loopback collector:
one trace per run with the span tree the docs describe, nothing secret in it, and
nothing at all when tracing is off."""

from __future__ import annotations

import math
import random
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from runs.engine import tracing
from runs.engine.build import build_run_context
from runs.engine.otlp import EncodedSpan
from runs.engine.tracing import flush_traces, root_span_id_of, trace_url
from runs.services import run_create, run_execute
from tests.fakes import FakeAPI, FakeResponse
from tests.fakes.openai_server import FakeLLM, completion
from tests.fakes.otlp import FakeCollector
from tools.llm import LLMClient
from tools.loader import load_tool_text
from tools.registry import ToolRegistry
from tools.services import tool_upsert
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-trace-9c1d2e3f4a5b6c7d"

KEYED_TOOL = """
- name: keyed_echo
  kind: http
  description: Echo a tag behind an API key sent in the query (loopback fake).
  base_url: "{base}"
  request: {{method: GET, url: "/echo/{{{{tag}}}}"}}
  auth: {{type: api_key, in: query, name: key, value: "{{{{env.TRACE_API_KEY}}}}"}}
  inputs: {{type: object, properties: {{tag: {{type: string}}}}, required: [tag]}}
  retry: {{max_attempts: 3, initial_delay: 0.01, max_delay: 0.05, jitter: 0}}
"""

FLOW = {
    "name": "traced",
    "inputs": {"tag": {"type": "string"}},
    "steps": [
        {
            "id": "fetch",
            "kind": "tool",
            "tool": "keyed_echo",
            "input_mapping": {"tag": "$input.tag"},
        },
        {
            "id": "say",
            "kind": "llm",
            "prompt": "Say {{tag}}",
            "input_mapping": {"tag": "fetch.tag"},
        },
    ],
}


def keyed_api() -> FakeAPI:
    api = FakeAPI()

    def echo(request, match):  # careless: echoes the key it was given
        return FakeResponse.json({"tag": match["tag"], "key": request.arg("key")})

    api.route("echo", "GET", r"/echo/(?P<tag>[^/?]+)(\?.*)?", echo)
    return api


def load_keyed_tool(api: FakeAPI) -> None:
    for spec in load_tool_text(KEYED_TOOL.format(base=api.url), source="tests"):
        tool_upsert(spec=spec, source="tests")


@pytest.fixture
def collector(settings, monkeypatch):
    with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", collector.traces_url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "flowpilot-test")
        settings.FLOWPILOT_TRACING = True
        settings.FLOWPILOT_TRACE_EXPORTERS = ("otlp",)
        tracing.shutdown_tracing()  # a provider of this test's own, sending to it
        yield collector
        tracing.shutdown_tracing()


def run_in_process(flow: dict, llm: FakeLLM, env: dict[str, str]):
    workflow, _ = workflow_import(data=flow)
    registry = ToolRegistry.from_db()
    run = run_create(workflow=workflow, trigger="manual", inputs={"tag": "t1"}, registry=registry)
    with LLMClient(llm.base_url, "sk-llm", "step-model", 5.0, 0) as client:
        ctx = build_run_context(
            run_id=run.pk,
            run_uuid=str(run.uuid),
            spec=workflow_spec(workflow),
            registry=registry,
            env=env,
            llm=client,
            sleep=lambda s: None,
            rand=random.Random(0),
        )
        with ctx:
            return run_execute(run=run, context=ctx)


def assert_one_trace_per_run(spans, run, *, tries_of_fetch: int) -> None:
    trace_id = run.uuid.hex
    assert {s.trace_id for s in spans} == {trace_id}
    (root,) = [s for s in spans if s.parent_id == ""]
    assert root.name == "run traced"
    assert root.span_id == f"{root_span_id_of(str(run.uuid)):016x}"
    assert root.attributes["flowpilot.run_id"] == run.pk
    assert root.attributes["flowpilot.status"] == "succeeded"
    assert root.attributes["flowpilot.version_hash"] == run.workflow.definition_hash
    assert root.status == 1
    assert root.service == "flowpilot-test"

    fetch_tries = sorted(
        (s for s in spans if s.name == "step fetch"),
        key=lambda s: s.attributes["flowpilot.attempt"],
    )
    assert [s.attributes["flowpilot.attempt"] for s in fetch_tries] == list(
        range(1, tries_of_fetch + 1)
    )
    assert all(s.parent_id == root.span_id for s in fetch_tries)
    assert fetch_tries[-1].attributes["flowpilot.status"] == "succeeded"
    for failed in fetch_tries[:-1]:
        assert failed.status == 2
        assert failed.attributes["flowpilot.error.type"] == "http_error"
    (say,) = [s for s in spans if s.name == "step say"]
    assert say.parent_id == root.span_id

    calls = [s for s in spans if s.name == "tool keyed_echo"]
    assert len(calls) == tries_of_fetch
    assert {c.parent_id for c in calls} == {t.span_id for t in fetch_tries}
    last = max(calls, key=lambda c: c.start_ns)
    assert last.attributes["http.request.method"] == "GET"
    assert last.attributes["http.response.status_code"] == 200
    assert last.attributes["url.full"].endswith("/echo/t1?key=***")
    (model,) = [s for s in spans if s.name == "llm default"]
    assert model.parent_id == say.span_id
    assert model.attributes["gen_ai.usage.input_tokens"] == 10
    assert model.attributes["gen_ai.response.model"] == "fake-model"
    for span in spans:
        assert span.start_ns <= span.end_ns
        assert root.start_ns <= span.start_ns


def test_a_run_in_process_is_one_trace_with_its_tries_and_calls_and_no_secret(collector):
    with keyed_api() as api, FakeLLM() as llm:
        api.fail("echo", status=503, times=1)
        llm.always(lambda request: completion("said"))
        load_keyed_tool(api)
        run = run_in_process(FLOW, llm, {"TRACE_API_KEY": SECRET})
        assert run.status == "succeeded", run.error_summary
        assert api.requests()[-1].arg("key") == SECRET  # the secret was sent, and echoed
        assert flush_traces()
        spans = collector.wait_for(lambda found: any(s.parent_id == "" for s in found))

    assert_one_trace_per_run(spans, run, tries_of_fetch=2)
    assert SECRET.encode() not in collector.raw()


def test_tracing_off_imports_and_sends_nothing(settings):
    settings.FLOWPILOT_TRACING = False
    with keyed_api() as api, FakeLLM() as llm, FakeCollector() as collector:
        llm.always(lambda request: completion("said"))
        load_keyed_tool(api)
        run = run_in_process(FLOW, llm, {"TRACE_API_KEY": SECRET})
        assert run.status == "succeeded"
        assert flush_traces()
        assert collector.raw() == b""


def test_the_trace_link_is_the_template_with_the_runs_trace_id(settings):
    settings.FLOWPILOT_TRACE_URL = "http://jaeger.local:16686/trace/{trace_id}"
    run_uuid = "6f1c2a9e-0b7d-4c55-9a61-2d3e4f5a6b7c"
    assert trace_url(run_uuid) == "http://jaeger.local:16686/trace/6f1c2a9e0b7d4c559a612d3e4f5a6b7c"
    settings.FLOWPILOT_TRACE_URL = ""
    assert trace_url(run_uuid) == ""


EACH_FLOW = {
    "name": "traced_each",
    "inputs": {"tags": {"type": "array"}},
    "steps": [
        {
            "id": "each",
            "kind": "foreach",
            "tool": "keyed_echo",
            "input_mapping": {"items": "$input.tags"},
            "item_mapping": {"tag": "$item"},
        }
    ],
}


def test_a_foreach_items_tries_are_children_of_its_steps_try(collector):
    with keyed_api() as api:
        load_keyed_tool(api)
        workflow, _ = workflow_import(data=EACH_FLOW)
        registry = ToolRegistry.from_db()
        inputs = {"tags": ["a", "b", "c"]}
        run = run_create(workflow=workflow, trigger="manual", inputs=inputs, registry=registry)
        ctx = build_run_context(
            run_id=run.pk, run_uuid=str(run.uuid), spec=workflow_spec(workflow),
            registry=registry, env={"TRACE_API_KEY": SECRET},
        )  # fmt: skip
        with ctx:
            run = run_execute(run=run, context=ctx)
        assert run.status == "succeeded", run.error_summary
        assert flush_traces()
        spans = collector.wait_for(lambda found: any(s.parent_id == "" for s in found))

    (step,) = [s for s in spans if s.name == "step each"]
    items = [s for s in spans if s.name.startswith("step each item ")]
    assert sorted(s.attributes["flowpilot.item"] for s in items) == [0, 1, 2]
    assert {s.parent_id for s in items} == {step.span_id}
    calls = [s for s in spans if s.name == "tool keyed_echo"]
    assert {c.parent_id for c in calls} == {s.span_id for s in items}
    assert SECRET.encode() not in collector.raw()


def test_a_sampler_ratio_decides_the_same_for_a_run_everywhere(settings):
    settings.FLOWPILOT_TRACE_RATIO = 0.5
    uuids = [str(uuid.UUID(int=(i << 64) | (i * 0x9E3779B97F4A7C15 % 2**64))) for i in range(400)]
    decisions = [tracing.sampled(u) for u in uuids]
    assert 120 < sum(decisions) < 280  # about half
    assert decisions == [tracing.sampled(u) for u in uuids]  # the same every time
    settings.FLOWPILOT_TRACE_RATIO = 0.0
    assert not any(tracing.sampled(u) for u in uuids)
    settings.FLOWPILOT_TRACE_RATIO = 1.0
    assert all(tracing.sampled(u) for u in uuids)


def test_a_resumed_run_ends_in_a_span_of_its_own_under_the_root(collector):
    run_uuid = "6f1c2a9e-0b7d-4c55-9a61-2d3e4f5a6b7c"
    moment = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    common = {
        "run_id": 7, "run_uuid": run_uuid, "workflow": "w", "version": 2,
        "version_hash": "h", "trigger": "manual", "started": moment, "error_summary": "",
        "approved_by": 4, "approved_at": "2026-11-20T09:00:00+00:00",
        "extra": {"flowpilot.approval_id": 9},
    }  # fmt: skip
    tracing.emit_run_span(**common, status="failed", finished=moment + timedelta(seconds=5))
    tracing.emit_run_span(
        **common,
        status="succeeded",
        finished=moment + timedelta(seconds=60),
        resumed_at=moment + timedelta(seconds=50),
    )
    assert flush_traces()
    spans = collector.wait_for(lambda found: len(found) >= 2)

    root_id = f"{root_span_id_of(run_uuid):016x}"
    (root,) = [s for s in spans if s.parent_id == ""]
    (resumed,) = [s for s in spans if s.parent_id == root_id]
    assert (root.span_id, root.name, root.status) == (root_id, "run w", 2)
    assert (resumed.name, resumed.status) == ("run w (resumed)", 1)
    assert resumed.span_id != root_id
    assert resumed.start_ns == int((moment + timedelta(seconds=50)).timestamp() * 10**9)
    assert root.attributes["flowpilot.approved_by"] == 4
    assert root.attributes["flowpilot.approved_at"] == "2026-11-20T09:00:00+00:00"
    assert root.attributes["flowpilot.approval_id"] == 9


class _Kept:
    """A span processor that keeps what it is handed."""

    def __init__(self) -> None:
        self.spans: list = []

    def on_end(self, span) -> None:
        self.spans.append(span)


@dataclass(frozen=True)
class Written:
    name: str
    attributes: dict
    status: str  # OK, ERROR
    message: str


def written(kept: _Kept) -> list[Written]:
    """What the processor was handed, either way: the runs' own bundles decoded from
    their bytes, or the SDK's spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.sdk.resources import Resource

    from runs.engine.otlp import encode_request, resource_field
    from tests.fakes.otlp import _value

    out = []
    for item in kept.spans:
        if not hasattr(item, "otlp"):  # the SDK's span
            status = item.status
            out.append(
                Written(item.name, dict(item.attributes), status.status_code.name,
                        status.description or "")
            )  # fmt: skip
            continue
        request = ExportTraceServiceRequest()
        request.ParseFromString(encode_request(resource_field(Resource({})), "t", item.otlp()))
        for span in request.resource_spans[0].scope_spans[0].spans:
            code = {1: "OK", 2: "ERROR"}.get(span.status.code, "UNSET")
            attributes = {a.key: _value(a.value) for a in span.attributes}
            out.append(Written(span.name, attributes, code, span.status.message))
    return out


PATHS = ["encoded", "readable"]


def _tracer(settings, path: str = "encoded", bundle: int = 512) -> tuple[tracing.RunTracer, _Kept]:
    """A run's tracer writing to a processor of the test's own: as the OTLP exporter's
    processors take spans (``encoded``: bundles), or as the console's (``readable``)."""
    from opentelemetry.sdk.resources import Resource

    from tools.redaction import Redactor

    settings.FLOWPILOT_TRACING = True
    kept = _Kept()
    process = tracing._Process.__new__(tracing._Process)
    process.resource = Resource({"service.name": "t"})
    process.encoded, process.readable = ([kept], []) if path == "encoded" else ([], [kept])
    process.bundle_size = bundle
    process.queue_limit, process._waiting, process._waiting_lock = 10**6, 0, threading.Lock()
    process._dropped, process._warned_at, process._early = 0, -math.inf, threading.Event()
    tracer = tracing.RunTracer(
        run_id=1, run_uuid=str(uuid.uuid4()), workflow="w", version_hash="h",
        redactor=Redactor(["sk-never-in-a-span-0001"]), process=process,
    )  # fmt: skip
    return tracer, kept


@pytest.mark.parametrize("path", PATHS)
def test_a_block_left_by_an_exception_nothing_recorded_is_an_error_span(settings, path):
    tracer, kept = _tracer(settings, path)
    with pytest.raises(KeyboardInterrupt), tracer.step_try("s", 1):
        raise KeyboardInterrupt
    with tracer.step_try("t", 1) as span:
        tracer.try_ended(span, "succeeded", None)

    def recorded_then_raised() -> None:
        with tracer.call("tool x", {}) as call:
            tracer.call_ended(
                call, error={"type": "http_error", "message": "503 for sk-never-in-a-span-0001"}
            )
            raise RuntimeError("after the record")

    with pytest.raises(RuntimeError):
        recorded_then_raised()

    interrupted, fine, recorded = written(kept)
    assert interrupted.status == "ERROR"
    assert interrupted.attributes["flowpilot.error.type"] == "KeyboardInterrupt"
    assert fine.status == "OK"
    assert fine.attributes["flowpilot.run_id"] == 1  # a try's span carries the run's ids
    assert "flowpilot.ok" not in fine.attributes  # the status, not an attribute
    assert recorded.attributes["flowpilot.error.type"] == "http_error"  # its record's
    assert (recorded.status, recorded.message) == ("ERROR", "503 for ***")
    assert "flowpilot.run_id" not in recorded.attributes  # a call's span: its try has them
    assert tracing._CURRENT.get() is None  # every block gave the context back


@pytest.mark.parametrize("path", PATHS)
def test_attributes_are_masked_and_a_number_past_64_bits_is_sent_as_text(settings, path):
    tracer, kept = _tracer(settings, path)
    with tracer.call("tool x", {"a": "key sk-never-in-a-span-0001", "n": 2**64 + 5, "m": -7}):
        pass
    (span,) = written(kept)
    assert span.attributes["a"] == "key ***"
    assert span.attributes["n"] == str(2**64 + 5)
    assert span.attributes["m"] == -7


def test_a_secret_learned_before_the_spans_are_sent_is_masked_in_them(settings):
    """The bytes are written when the spans are sent: a secret the run's redactor
    learns in between (a token fetched by a later step) is masked in them too."""
    tracer, kept = _tracer(settings)
    with tracer.call("tool x", {"a": "token tok-learned-later-0002"}):
        pass
    tracer.redactor.add_secret("tok-learned-later-0002")
    (span,) = written(kept)
    assert span.attributes["a"] == "token ***"


def test_a_runs_spans_wait_as_one_item_until_the_exporter_takes_them(settings):
    """The run's first span hands the batch processor one item, its later spans join
    it; once the exporter has taken them, the next span starts a new item; an item
    holds at most an export batch."""
    tracer, kept = _tracer(settings, bundle=3)

    def a_try(number: int) -> None:
        with tracer.step_try("s", number) as span:
            tracer.try_ended(span, "succeeded", None)

    a_try(1), a_try(2)
    (first,) = kept.spans
    assert first.count == 2
    assert len(first.otlp()) == 2  # the exporter takes them...
    assert (first.count, first.taken) == (0, True)
    a_try(3)
    assert len(kept.spans) == 2  # ...so the next span started another item
    a_try(4), a_try(5), a_try(6)
    assert [item.count for item in kept.spans] == [0, 3, 1]  # a batch at most
    attempts = [s.attributes["flowpilot.attempt"] for s in written(kept)]
    assert attempts == [3, 4, 5, 6]


def test_spans_past_the_queue_limit_are_dropped_with_a_warning_until_some_are_sent(
    settings, caplog
):
    tracer, kept = _tracer(settings)
    tracer.process.queue_limit = 4

    def a_try(number: int) -> None:
        with tracer.step_try("s", number) as span:
            tracer.try_ended(span, "succeeded", None)

    for number in range(1, 7):
        a_try(number)
    assert "tracing: 1 spans dropped: 4 wait to be sent already" in caplog.text
    assert caplog.text.count("spans dropped") == 1  # one warning, not one per span
    tracer.process.sent(2)  # the exporter took two off the queue
    a_try(7)
    assert [s.attributes["flowpilot.attempt"] for s in written(kept)] == [1, 2, 3, 4, 7]


def test_spans_written_from_many_threads_while_the_exporter_takes_them_are_each_sent_once(
    settings,
):
    tracer, kept = _tracer(settings, bundle=7)
    taken: list[bytes] = []
    writing = True

    def tries(step: str) -> None:
        for number in range(1, 301):
            with tracer.step_try(step, number) as span:
                tracer.try_ended(span, "succeeded", None)

    def exporter() -> None:
        while writing:
            for item in list(kept.spans):
                taken.extend(item.otlp())

    threads = [threading.Thread(target=tries, args=(f"s{n}",)) for n in range(4)]
    taker = threading.Thread(target=exporter)
    taker.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writing = False
    taker.join()
    for item in kept.spans:
        taken.extend(item.otlp())
    kept.spans = [EncodedSpan(data) for data in taken]
    seen = [
        (s.attributes["flowpilot.step_id"], s.attributes["flowpilot.attempt"])
        for s in written(kept)
    ]
    assert len(seen) == len(set(seen)) == 1200


def test_the_root_span_keeps_its_own_attributes_and_skips_unsampled_runs(
    settings, django_assert_num_queries
):
    from runs.engine import finish
    from tests.factories import RunFactory

    settings.FLOWPILOT_TRACING = True
    kept = _Kept()
    process = tracing.process_tracing()
    sending, process.encoded = process.encoded, [kept]
    try:
        settings.FLOWPILOT_RUN_SPAN_PROVIDERS = [f"{__name__}.overriding_provider"]
        run = RunFactory()
        finish._root_span(run)
        (root,) = written(kept)
        assert root.attributes["flowpilot.run_id"] == run.pk  # not the provider's 1
        assert root.attributes["flowpilot.extra_id"] == 5

        settings.FLOWPILOT_TRACE_RATIO = 0.0
        kept.spans.clear()
        with django_assert_num_queries(0):  # the provider is not asked for a span not made
            finish._root_span(run)
        assert kept.spans == []
    finally:
        process.encoded = sending


def overriding_provider(*, run):
    return {"flowpilot.run_id": 1, "flowpilot.extra_id": 5}


def test_an_export_batch_of_waiting_spans_is_sent_at_once_not_at_the_next_delay(settings):
    """The batch processor counts items (one per run), so it would not wake for a run's
    many spans: once an export batch of spans waits, the process's own thread flushes."""
    tracer, _ = _tracer(settings, bundle=3)
    early = tracer.process._early
    with tracer.step_try("s", 1) as span:
        tracer.try_ended(span, "succeeded", None)
    with tracer.call("tool t", {}):
        pass
    assert not early.is_set()
    with tracer.call("tool u", {}):
        pass
    assert early.is_set()


def test_the_process_thread_flushes_the_processors_when_woken(settings, monkeypatch):
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    settings.FLOWPILOT_TRACING = True
    settings.FLOWPILOT_TRACE_EXPORTERS = ("otlp",)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    tracing.shutdown_tracing()
    try:
        process = tracing.process_tracing()
        flushed = threading.Event()
        processor = process.encoded[0]
        monkeypatch.setattr(processor, "force_flush", lambda *a, **k: flushed.set() or True)
        assert process.admit(1)
        assert not flushed.wait(0.2)
        assert process.admit(1)  # two wait: an export batch
        assert flushed.wait(5)
    finally:
        tracing.shutdown_tracing()
