"""Metrics counted by real Celery workers (prefork pool processes) in prometheus-client's
multiprocess mode, added up by ``/metrics`` from the directory they share."""

from __future__ import annotations

import pytest

from health.metrics import exposition
from runs.models import Run
from runs.services import run_create, run_enqueue
from tests.celery_support import (
    fan_out_flow,
    import_flow,
    load_echo_tools,
    start_cluster,
    wait_until,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers"),
]

WIDTH = 8


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("prometheus")


@pytest.fixture(scope="module")
def celery_cluster(shared_dir, django_db_setup, tmp_path_factory):
    env = {"FLOWPILOT_METRICS": "true", "PROMETHEUS_MULTIPROC_DIR": str(shared_dir)}
    with start_cluster(tmp_path_factory.mktemp("celery-metrics"), env=env) as cluster:
        yield cluster


def test_the_workers_counts_add_up_in_one_exposition(echo_fake, shared_dir, settings):
    load_echo_tools(echo_fake)
    workflow = import_flow(fan_out_flow("metered", WIDTH))
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"tag": "m"}))

    def finished() -> bool:
        run.refresh_from_db()
        return run.status in {"succeeded", "failed"}

    wait_until(finished, timeout=60, what=f"run {run.pk} to finish")
    assert Run.objects.get(pk=run.pk).status == "succeeded"

    # The directory is named, not set in this process's environment: prometheus-client
    # picks its way of keeping values when first imported, and this process keeps its own.
    settings.FLOWPILOT_METRICS = True
    text = exposition(str(shared_dir)).decode()

    assert (
        f'flowpilot_step_tries_total{{status="succeeded",tool="echo",workflow="metered"}} '
        f"{float(WIDTH)}"
    ) in text
    assert (
        'flowpilot_step_tries_total{status="succeeded",tool="transform",workflow="metered"} 1.0'
        in text
    )
    assert (
        'flowpilot_runs_finished_total{status="succeeded",trigger="api",workflow="metered"} 1.0'
        in text
    )
    assert f'flowpilot_http_responses_total{{status="200",tool="echo"}} {float(WIDTH)}' in text
    files = list(shared_dir.glob("*.db"))
    assert len(files) >= 2  # several worker processes wrote their own
