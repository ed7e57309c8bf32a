"""Settling a Celery step task's try (``runs.engine.celery.settle``): a retry goes back to
``queued`` with the policy's countdown; out of attempts or fatal, the outcome is final.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.engine.celery import step as celery_step
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, results, started

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_retryable_failure_goes_back_to_queued_with_the_policy_countdown(echo_api):
    echo_api.fail("echo", status=503, times=2)
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)

    first = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )
    row = results(run)["s01"]
    assert (first.status, first.retry_in) == ("queued", 0.05)  # initial_delay, no jitter
    assert (row.status, row.attempts, row.claim_token) == ("queued", 1, "")
    assert row.attempt_log[0]["retry_in"] == 0.05
    assert row.attempt_log[0]["error"]["type"] == "http_error"
    assert row.lease_expires_at > timezone.now()

    second = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )
    assert second.retry_in == 0.1  # doubled
    bus(message.step_result_id, countdown=second.retry_in)
    bus.drain(worker=WORKER)

    row = results(run)["s01"]
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert row.attempts == 3
    assert [e["status"] for e in row.attempt_log] == ["failed", "failed", "succeeded"]
    assert [r.status for r in echo_api.requests("echo")] == [503, 503, 200]


def test_out_of_attempts_fails_the_step_and_the_run_and_starts_nothing_else(echo_api):
    echo_api.fail("echo", status=503)
    run, bus = started(fan_out_flow("fan", 1))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    rows = results(run)
    assert run.status == "failed"
    assert "step `s01` failed (http_error)" in run.error_summary
    assert (rows["s01"].status, rows["s01"].attempts) == ("failed", 3)
    assert rows["join"].status == "skipped"  # its only parent failed
    assert len(echo_api.requests("echo")) == 3


def test_a_fatal_error_is_not_retried(echo_api):
    echo_api.fail("echo", status=404)
    run, bus = started(fan_out_flow("fan", 1))

    verdicts = bus.drain(worker=WORKER)

    assert [v.status for v in verdicts] == ["failed"]
    assert results(run)["s01"].attempts == 1


def test_a_rate_limit_wait_is_requeued_without_using_up_the_policy(echo_api, settings):
    import time

    from tools.breaker.core import breaker_host
    from tools.models import RateLimitSlot
    from tools.ratelimit.db_store import DatabasePaceStore

    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "database"
    settings.FLOWPILOT_PACING_REFRESH = 0  # read the paused keys before every call
    key = f"host:{breaker_host(echo_api.url)}"
    DatabasePaceStore().pause(key, until=time.time() + 60)  # the API said: wait a minute
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)

    held = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )

    row = results(run)["s01"]
    assert held.status == "queued"
    assert 59 < held.retry_in <= 60  # the pause's end, past the policy's max_delay (0.2)
    entry = row.attempt_log[0]
    assert (entry["error"]["type"], entry["wait_reason"]) == ("rate_limit_wait", "rate_limit")
    assert "request" not in entry  # nothing was sent
    assert (row.attempts, row.attempt_limit) == (1, 4)  # the budget grew by the held try
    assert echo_api.requests("echo") == []
    RateLimitSlot.objects.all().delete()  # the pause ends
    bus(message.step_result_id, countdown=held.retry_in)
    bus.drain(worker=WORKER)
    assert results(run)["s01"].status == "succeeded"
