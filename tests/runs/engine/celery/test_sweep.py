"""The sweeper (``runs.engine.celery.sweep``): steps whose lease ran out are published
again, queued again, or failed for review; in-process steps are never swept.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.engine.celery import claim as celery_claim
from runs.engine.celery import settle as celery_settle
from runs.engine.celery import sweep
from runs.services import run_create, run_enqueue
from tests.celery_support import fan_out_flow, import_flow
from tests.runs.engine.celery.conftest import WORKER, results, started

pytestmark = pytest.mark.django_db(transaction=True)


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def test_the_sweeper_publishes_again_a_queued_step_whose_message_was_lost(echo_api, settings):
    run, bus = started(fan_out_flow("fan", 1))
    bus.messages.clear()  # the broker lost it

    assert sweep.steps_sweep(now=later(5), publish=bus) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }
    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_QUEUED_LEASE + 1), publish=bus)
    assert counts["republished"] == 1
    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert len(echo_api.requests("echo")) == 1


def test_when_the_broker_forgot_queued_steps_are_published_again_before_their_lease(echo_api):
    run, bus = started(fan_out_flow("fan", 2))
    bus.messages.clear()  # Redis restarted without persistence, or was flushed

    assert sweep.steps_sweep(now=later(5), publish=bus, broker_lost=lambda: False) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }
    counts = sweep.steps_sweep(now=later(5), publish=bus, broker_lost=lambda: True)
    assert counts["republished"] == 2
    bus.drain(worker=WORKER)
    bus.drain(worker=WORKER)  # a duplicate message, had one survived, loses its claim

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert len(echo_api.requests("echo")) == 2  # nothing ran twice


def test_a_step_lost_with_its_worker_runs_again_and_the_late_result_is_ignored(echo_api, settings):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)
    dead_token = celery_claim.claim_step(message.step_result_id, worker="dead@local")

    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)
    assert counts["requeued"] == 1
    row = results(run)["s01"]
    assert (row.status, row.attempts, row.attempt_limit) == ("queued", 1, 4)
    assert row.attempt_log[0]["status"] == "lost"
    assert row.attempt_log[0]["error"]["type"] == "worker_lost"
    assert row.attempt_log[0]["worker"] == "dead@local"

    bus.drain(worker=WORKER)
    stale = celery_settle.settle_not_started(row, dead_token)  # the dead worker wakes up

    run.refresh_from_db()
    row = results(run)["s01"]
    assert stale.claimed is True
    assert run.status == "succeeded"
    assert row.status == "succeeded"
    assert [e["worker"] for e in row.attempt_log] == ["dead@local", WORKER]


def test_a_step_lost_too_often_is_failed(echo_api, settings):
    settings.FLOWPILOT_MAX_LOST_ATTEMPTS = 2
    run, bus = started(fan_out_flow("fan", 1))
    step_result_id = bus.messages.pop(0).step_result_id
    for _ in range(2):
        bus.messages.clear()
        celery_claim.claim_step(step_result_id, worker="dead@local")
        sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)

    row = results(run)["s01"]
    assert row.status == "failed"
    assert row.error["type"] == "worker_lost"
    assert "lost 2 times" in row.error["message"]
    assert echo_api.requests() == []


def test_a_lost_non_idempotent_step_is_failed_for_review_not_repeated(echo_api, settings):
    flow = {
        "name": "post_once",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {"id": "post", "kind": "tool", "tool": "sink", "input_mapping": {"tag": "$input.tag"}}
        ],
    }
    run, bus = started(flow)
    celery_claim.claim_step(bus.messages.pop(0).step_result_id, worker="dead@local")

    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)

    run.refresh_from_db()
    row = results(run)["post"]
    assert counts["failed"] == 1
    assert bus.messages == []
    assert row.status == "failed"
    assert row.error["type"] == "interrupted_non_idempotent"
    assert run.status == "failed"
    assert "interrupted_non_idempotent" in run.error_summary


def test_in_process_steps_are_never_swept(echo_api):
    from tests.conftest import EXAMPLES_DIR
    from workflows.files import read_workflow_file

    workflow = import_flow(read_workflow_file(EXAMPLES_DIR / "sales_report.yaml"))
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={}))

    assert run.status == "succeeded"  # no broker: it ran here, as before
    assert sweep.steps_sweep(now=later(10**6)) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }
