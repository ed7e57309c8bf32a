"""Claiming a step for a Celery task (``runs.engine.celery.claim``): of two deliveries one
wins, in one round trip that reads back the counters and the run's status.
"""

from __future__ import annotations

import pytest
from django.db import connection

from runs.engine.celery import claim as celery_claim
from runs.engine.celery import step as celery_step
from runs.models import StepResult
from runs.state import step_transition_returning
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, results, started

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_duplicate_message_loses_the_claim_and_calls_nothing(echo_api):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages[0]

    bus.drain(worker=WORKER)
    again = celery_step.step_execute(
        step_result_id=message.step_result_id, worker="late@local", publish=bus
    )

    assert again.claimed is False
    assert len(echo_api.requests("echo")) == 1
    assert results(run)["s01"].attempt_log[0]["worker"] == WORKER


def test_the_claim_reads_back_the_attempt_counters_and_the_run_status(echo_api):
    run, bus = started(fan_out_flow("claimed", 1))
    pk = bus.messages[0].step_result_id

    won = celery_claim.claim(pk, worker=WORKER, inputs={"a": 1})
    lost = celery_claim.claim(pk, worker="late@local")

    assert lost is None
    assert won is not None
    assert (won.result.step_id, won.result.run_id, won.run_status) == ("s01", run.pk, "running")
    assert (won.result.attempts, won.result.attempt_limit, won.result.attempt_log) == (0, 3, [])
    row = StepResult.objects.get(pk=pk)
    assert (row.status, row.claim_token, row.worker, row.inputs) == (
        "running",
        won.token,
        WORKER,
        {"a": 1},
    )
    assert row.started_at is not None


def test_without_returning_the_claim_updates_then_selects_in_one_transaction(echo_api, monkeypatch):
    _, bus = started(fan_out_flow("claimed_old", 1))
    pk = bus.messages[0].step_result_id
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", False)

    won = celery_claim.claim(pk, worker=WORKER)
    lost = celery_claim.claim(pk, worker="late@local")

    assert lost is None
    assert won is not None
    assert (won.result.step_id, won.run_status, won.result.attempt_limit) == ("s01", "running", 3)
    assert StepResult.objects.get(pk=pk).claim_token == won.token


def test_a_claim_cannot_be_asked_for_a_move_the_state_table_forbids():
    with pytest.raises(ValueError, match="cannot move from 'succeeded' to 'running'"):
        step_transition_returning(StepResult, 1, "running", status="succeeded", fields={})
