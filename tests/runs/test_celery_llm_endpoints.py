"""Named LLM endpoints and per-step model settings on real Celery workers: each worker
builds the step's endpoint client from its own environment."""

from __future__ import annotations

import pytest

from runs.models import Run, ToolCallRecording
from runs.replay.services import version_replay
from runs.services import run_create, run_enqueue
from tests.celery_support import start_cluster, wait_until
from tests.fakes.openai_server import FakeLLM, completion
from workflows.services import workflow_import

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers"),
]


@pytest.fixture(scope="module")
def fakes():
    with FakeLLM() as default, FakeLLM() as local:
        default.always(lambda request: completion("from default"))
        local.always(lambda request: completion("from local"))
        yield default, local


@pytest.fixture(scope="module")
def celery_cluster(fakes, django_db_setup, tmp_path_factory):
    """The workers start with both endpoints in their environment."""
    default, local = fakes
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", default.base_url)
        env.setenv("OPENAI_API_KEY", "sk-worker-default")
        env.setenv("FLOWPILOT_LLM_ENDPOINTS", "local")
        env.setenv("FLOWPILOT_LLM_LOCAL_BASE_URL", local.base_url)
        env.setenv("FLOWPILOT_LLM_LOCAL_API_KEY", "sk-worker-local")
        env.setenv("FLOWPILOT_LLM_LOCAL_MODEL", "worker-local-model")
        with start_cluster(tmp_path_factory.mktemp("celery-llm")) as cluster:
            yield cluster


TWO_ENDPOINTS = {
    "name": "two_endpoints",
    "inputs": {"city": {"type": "string"}},
    "steps": [
        {
            "id": "hosted",
            "kind": "llm",
            "prompt": "Weather in {{city}}?",
            "temperature": 0.3,
            "input_mapping": {"city": "$input.city"},
        },
        {
            "id": "nearby",
            "kind": "llm",
            "endpoint": "local",
            "seed": 11,
            "max_output_tokens": 64,
            "prompt": "Again: {{city}}",
            "input_mapping": {"city": "$input.city"},
        },
    ],
}


def finished(run: Run) -> Run:
    def done() -> bool:
        run.refresh_from_db()
        return run.status in {"succeeded", "failed"}

    wait_until(done, timeout=60, what=f"run {run.pk} to finish")
    return Run.objects.get(pk=run.pk)


def test_each_step_reaches_its_endpoint_with_its_settings_on_the_workers(fakes, settings):
    default, local = fakes
    settings.FLOWPILOT_LLM_ENDPOINTS = {"local": {"base_url": local.base_url}}
    workflow, _ = workflow_import(data=TWO_ENDPOINTS)
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"city": "Oslo"}))
    run = finished(run)
    assert run.status == "succeeded", run.error_summary
    outputs = {r.step_id: r.output for r in run.step_results.all()}
    assert outputs["hosted"]["result"] == "from default"
    assert outputs["nearby"]["result"] == "from local"
    (sent_default,) = [r for r in default.requests if "Oslo" in r.text]
    (sent_local,) = [r for r in local.requests if "Oslo" in r.text]
    assert sent_default.body["temperature"] == 0.3
    assert sent_default.headers["authorization"] == "Bearer sk-worker-default"
    assert (sent_local.body["seed"], sent_local.body["max_tokens"]) == (11, 64)
    assert sent_local.body["model"] == "worker-local-model"
    assert sent_local.headers["authorization"] == "Bearer sk-worker-local"


def test_a_validation_run_on_the_workers_records_each_model_call_for_an_offline_replay(
    fakes, settings
):
    default, local = fakes
    settings.FLOWPILOT_LLM_ENDPOINTS = {"local": {"base_url": local.base_url}}
    workflow, _ = workflow_import(data={**TWO_ENDPOINTS, "name": "two_endpoints_replayed"})
    run = run_create(workflow=workflow, trigger="validation", inputs={"city": "Bergen"})
    run = finished(run_enqueue(run=run))
    assert run.status == "succeeded", run.error_summary
    recorded = ToolCallRecording.objects.filter(step_result__run=run).order_by("tool")
    assert [(r.kind, r.tool, r.step_result.step_id) for r in recorded] == [
        ("llm", "default", "hosted"),
        ("llm", "local", "nearby"),
    ]
    assert recorded[1].url == "llm:local/worker-local-model"  # the worker's own model
    assert recorded[1].request["model"] is None  # the step names none
    asked = len(default.requests) + len(local.requests)

    report = version_replay(version=workflow, validation_run=run)  # here, offline

    assert report.matched, report.as_dict()
    assert len(default.requests) + len(local.requests) == asked
    replayed = {r.step_id: r.output["result"] for r in report.replay_run.step_results.all()}
    assert replayed == {"hosted": "from default", "nearby": "from local"}
