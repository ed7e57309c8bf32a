"""Named LLM endpoints and per-step model settings on real Celery workers: each worker
builds the step's endpoint client from its own environment."""

from __future__ import annotations

import pytest

from runs.models import Run
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


def test_each_step_reaches_its_endpoint_with_its_settings_on_the_workers(fakes, settings):
    default, local = fakes
    settings.FLOWPILOT_LLM_ENDPOINTS = {"local": {"base_url": local.base_url}}
    workflow, _ = workflow_import(
        data={
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
    )
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"city": "Oslo"}))

    def done() -> bool:
        run.refresh_from_db()
        return run.status in {"succeeded", "failed"}

    wait_until(done, timeout=60, what=f"run {run.pk} to finish")
    run = Run.objects.get(pk=run.pk)
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
