"""Metrics of runs (runs/engine/metrics.py): what a run in process counts, in
prometheus-client's registry and over OTLP to a loopback collector; nothing when off."""

from __future__ import annotations

import pytest

from runs.engine.metrics import forget_process_metrics, process_metrics
from tests.fakes.openai_server import FakeLLM, completion
from tests.fakes.otlp import FakeCollector
from tests.runs.engine.test_tracing import FLOW, SECRET, keyed_api, load_keyed_tool, run_in_process

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fresh():
    forget_process_metrics()
    yield
    forget_process_metrics()


def a_run_with_a_429_then_an_answer(llm_usage=None):
    """The FLOW of the tracing tests: `fetch` answered 429 once, then 200; `say` asks the
    model once."""
    with keyed_api() as api, FakeLLM() as llm:
        api.fail("echo", status=429, times=1, headers={"Retry-After": "0"})
        llm.always(lambda request: completion("said", usage=llm_usage))
        load_keyed_tool(api)
        run = run_in_process(FLOW, llm, {"TRACE_API_KEY": SECRET})
    assert run.status == "succeeded", run.error_summary
    return run


def value(name: str, **labels: str) -> float:
    metrics = process_metrics()
    assert metrics is not None
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_a_run_in_process_is_counted_for_prometheus(settings, fresh):
    settings.FLOWPILOT_METRICS = True
    settings.FLOWPILOT_LLM_PRICES = {}
    a_run_with_a_429_then_an_answer()

    workflow = {"workflow": "traced"}
    assert value("flowpilot_step_tries_total", **workflow, tool="keyed_echo", status="failed") == 1
    assert (
        value("flowpilot_step_tries_total", **workflow, tool="keyed_echo", status="succeeded") == 1
    )
    assert value("flowpilot_step_retries_total", **workflow, tool="keyed_echo") == 1
    assert value("flowpilot_step_tries_total", **workflow, tool="llm", status="succeeded") == 1
    assert value("flowpilot_step_try_duration_seconds_count", **workflow, tool="keyed_echo") == 2
    assert value("flowpilot_http_responses_total", tool="keyed_echo", status="429") == 1
    assert value("flowpilot_http_responses_total", tool="keyed_echo", status="200") == 1
    assert value("flowpilot_tool_calls_total", tool="keyed_echo", kind="http", outcome="ok") == 1
    assert (
        value("flowpilot_runs_finished_total", **workflow, status="succeeded", trigger="manual")
        == 1
    )
    assert value("flowpilot_run_duration_seconds_count", **workflow, status="succeeded") == 1
    llm = {**workflow, "model": "step-model"}
    assert (
        value("flowpilot_llm_calls_total", **workflow, endpoint="default", model="step-model") == 1
    )
    assert value("flowpilot_llm_tokens_total", **llm, type="prompt") == 10
    assert value("flowpilot_llm_tokens_total", **llm, type="completion") == 5
    assert value("flowpilot_llm_cost_usd_total", **llm) == 0  # no price: tokens only


def test_the_same_counters_go_over_otlp(settings, monkeypatch, fresh):
    with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", collector.metrics_url)
        settings.FLOWPILOT_METRICS = False
        settings.FLOWPILOT_METRIC_EXPORTERS = ("otlp",)
        a_run_with_a_429_then_an_answer()
        metrics = process_metrics()
        assert metrics is not None
        assert metrics.registry is None  # Prometheus is off: OTLP only
        metrics.flush()
        points = collector.metric_points()

    def total(name: str, **labels: str) -> float:
        return sum(v for n, attrs, v in points if n == name and labels.items() <= attrs.items())

    assert total("flowpilot_step_tries", tool="keyed_echo") == 2
    assert total("flowpilot_http_responses", status="429") == 1
    assert total("flowpilot_runs_finished", status="succeeded") == 1
    assert total("flowpilot_step_try_duration_seconds", tool="llm") == 1  # a histogram's count
    assert SECRET not in repr(points)


def test_off_counts_nothing(settings, fresh):
    settings.FLOWPILOT_METRICS = False
    settings.FLOWPILOT_METRIC_EXPORTERS = ()
    a_run_with_a_429_then_an_answer()
    assert process_metrics() is None


def test_a_count_that_fails_loses_the_count_not_the_run(settings, fresh, caplog):
    settings.FLOWPILOT_METRICS = True
    metrics = process_metrics()
    assert metrics is not None

    class Broken:
        def labels(self, **labels):
            raise FileNotFoundError("counter_123.db")

    metrics.prometheus = {name: Broken() for name in metrics.prometheus}
    run = a_run_with_a_429_then_an_answer()

    assert run.status == "succeeded"
    assert metrics.failures > 1
    lost = [r for r in caplog.records if "a count was lost" in r.getMessage()]
    assert len(lost) == 1  # said once per process
