"""Traces of a run on real Celery workers (runs/engine/tracing.py): every try, wherever
it ran, and the root written by whichever process finished the run, land in one trace
at a loopback OTLP collector, with nothing secret in any span."""

from __future__ import annotations

import pytest

from runs.engine.tracing import root_span_id_of
from runs.models import Run
from runs.services import run_create, run_enqueue
from tests.celery_support import start_cluster, wait_until
from tests.fakes.openai_server import FakeLLM, completion
from tests.fakes.otlp import FakeCollector
from tests.runs.engine.test_tracing import (
    FLOW,
    SECRET,
    assert_one_trace_per_run,
    keyed_api,
    load_keyed_tool,
)
from tools.registry import ToolRegistry
from workflows.services import workflow_import

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers"),
]


@pytest.fixture(scope="module")
def fakes():
    with FakeCollector() as collector, keyed_api() as api, FakeLLM() as llm:
        llm.always(lambda request: completion("said"))
        yield collector, api, llm


@pytest.fixture(scope="module")
def celery_cluster(fakes, django_db_setup, tmp_path_factory):
    """The workers send their spans to the collector and hold the tool's key."""
    collector, _, llm = fakes
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.traces_url,
        "OTEL_SERVICE_NAME": "flowpilot-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "TRACE_API_KEY": SECRET,
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "sk-worker",
    }
    with start_cluster(tmp_path_factory.mktemp("celery-tracing"), env=env) as cluster:
        yield cluster


def test_a_run_on_the_workers_is_one_trace_with_nothing_secret(fakes):
    collector, api, _ = fakes
    api.fail("echo", status=503, times=1)
    load_keyed_tool(api)
    workflow, _ = workflow_import(data=FLOW)
    run = run_create(
        workflow=workflow, trigger="manual", inputs={"tag": "t1"}, registry=ToolRegistry.from_db()
    )
    run_enqueue(run=run)

    def finished() -> bool:
        run.refresh_from_db()
        return run.status in {"succeeded", "failed"}

    wait_until(finished, timeout=60, what=f"run {run.pk} to finish")
    run = Run.objects.get(pk=run.pk)
    assert run.status == "succeeded", run.error_summary
    assert api.requests()[-1].arg("key") == SECRET

    root_id = f"{root_span_id_of(str(run.uuid)):016x}"

    def complete(spans) -> bool:
        mine = [s for s in spans if s.trace_id == run.uuid.hex]
        return any(s.span_id == root_id for s in mine) and any(
            s.name == "llm default" for s in mine
        )

    spans = [s for s in collector.wait_for(complete) if s.trace_id == run.uuid.hex]
    assert_one_trace_per_run(spans, run, tries_of_fetch=2)
    workers = {s.attributes.get("flowpilot.worker") for s in spans if s.name.startswith("step ")}
    assert workers  # the tries name the worker that made them
    assert SECRET.encode() not in collector.raw()
