"""Lease renewal for running Celery steps (``runs.engine.celery.heartbeat``).

Real time on a real thread: the beats are due on ``time.monotonic``, and the lease they
write is dated by the clock the step task passes (``now``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone

from runs.engine.celery import claim as celery_claim
from runs.engine.celery import heartbeat
from runs.models import StepResult
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, started

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_step(echo_api) -> tuple[int, str]:
    _, bus = started(fan_out_flow("beating", 1))
    pk = bus.messages[0].step_result_id
    token = celery_claim.claim_step(pk, worker=WORKER)
    assert token
    return pk, token


def test_an_attempt_shorter_than_a_second_never_renews_its_lease(echo_api):
    pk, token = claimed_step(echo_api)
    before = StepResult.objects.get(pk=pk).lease_expires_at
    renewals = heartbeat.HEARTBEATS.renewals

    with heartbeat.heartbeat(pk, token, lease=30):
        time.sleep(0.2)

    assert heartbeat.HEARTBEATS.renewals == renewals
    assert StepResult.objects.get(pk=pk).lease_expires_at == before


def test_a_long_attempt_has_its_lease_renewed_every_third_of_it(echo_api):
    pk, token = claimed_step(echo_api)
    StepResult.objects.filter(pk=pk).update(lease_expires_at=timezone.now())
    renewals = heartbeat.HEARTBEATS.renewals

    with heartbeat.heartbeat(pk, token, lease=0.6):  # beats at 0.2 s, then every 0.2 s
        time.sleep(0.9)

    assert heartbeat.HEARTBEATS.renewals - renewals >= 3
    assert StepResult.objects.get(pk=pk).lease_expires_at > timezone.now()


def test_the_heartbeat_leaves_a_step_the_sweeper_took_back_alone(echo_api):
    pk, token = claimed_step(echo_api)
    StepResult.objects.filter(pk=pk).update(claim_token="someone-else")
    before = StepResult.objects.get(pk=pk).lease_expires_at

    with heartbeat.heartbeat(pk, token, lease=0.3):
        time.sleep(0.4)

    assert StepResult.objects.get(pk=pk).lease_expires_at == before


# A database error, and anything else (a bug, a driver's odd exception): the thread lives.
@pytest.mark.parametrize("error", [DatabaseError("connection lost"), RuntimeError("odd")])
def test_a_failed_renewal_is_logged_and_the_next_beat_tries_again(
    echo_api, monkeypatch, caplog, error
):
    pk, token = claimed_step(echo_api)
    real_filter = StepResult.objects.filter
    failures = []

    def flaky_filter(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise error
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(StepResult.objects, "filter", flaky_filter)
    renewals = heartbeat.HEARTBEATS.renewals

    with (
        caplog.at_level("WARNING", logger="flowpilot.engine"),
        heartbeat.heartbeat(pk, token, lease=0.3),
    ):
        time.sleep(0.5)

    assert failures == [1]
    assert heartbeat.HEARTBEATS.renewals > renewals  # the beats after the failure landed
    assert f"heartbeat of step result {pk} failed" in caplog.text


def test_a_try_outliving_a_second_renews_its_lease_once_from_the_tasks_clock(echo_api):
    pk, token = claimed_step(echo_api)
    at = datetime(2031, 5, 4, 12, 0, tzinfo=UTC)  # the task's clock: far from the real one
    renewals = heartbeat.HEARTBEATS.renewals

    # A 30 s lease: the first beat is due after FIRST_BEAT (1 s), the next 10 s later.
    started_at = time.monotonic()  # before the claim registers: its beat is due later
    with heartbeat.heartbeat(pk, token, lease=30, now=lambda: at):
        while heartbeat.HEARTBEATS.renewals == renewals and time.monotonic() - started_at < 5:
            time.sleep(0.05)
        beat_after = time.monotonic() - started_at
        time.sleep(0.3)  # no second beat follows at once

    assert heartbeat.FIRST_BEAT <= beat_after < 5
    assert heartbeat.HEARTBEATS.renewals - renewals == 1
    assert StepResult.objects.get(pk=pk).lease_expires_at == at + timedelta(seconds=30)


class _NoThread(heartbeat.Heartbeats):
    """The registry without its renewing thread: when a claim's first beat is due."""

    def _ensure_thread(self) -> None:
        pass


def test_the_first_beat_is_due_a_third_of_the_lease_after_the_claim_if_that_comes_first():
    beats = _NoThread()
    at = time.monotonic()

    beats.add(1, "fresh", lease=30, now=timezone.now, leased_at=at)  # just claimed
    beats.add(2, "late", lease=30, now=timezone.now, leased_at=at - 9.5)  # claimed long ago
    beats.add(3, "short", lease=0.6, now=timezone.now, leased_at=at - 0.1)

    due = {pk: claim.due - at for pk, claim in beats._claims.items()}
    assert heartbeat.FIRST_BEAT <= due[1] < heartbeat.FIRST_BEAT + 1  # the try's first second
    assert due[2] <= 0.5  # the lease it wrote 9.5 s ago is renewed at 10 s, not 10.5 s
    assert due[3] <= 0.1 + 1e-6


def test_a_heartbeat_nested_in_one_of_the_same_claim_leaves_it_registered(echo_api):
    pk, token = claimed_step(echo_api)

    with heartbeat.heartbeat(pk, token, lease=30):
        first = heartbeat.HEARTBEATS._claims[pk]
        with heartbeat.heartbeat(pk, token, lease=30):
            assert heartbeat.HEARTBEATS._claims[pk] is first  # not replaced
        assert heartbeat.HEARTBEATS._claims.get(pk) is first  # still renewed
    assert pk not in heartbeat.HEARTBEATS._claims


def test_a_failed_renewal_is_tried_again_at_once_not_a_beat_later(echo_api, monkeypatch):
    pk, token = claimed_step(echo_api)
    real_filter = StepResult.objects.filter
    failures = []

    def cut_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise DatabaseError("terminating connection due to administrator command")
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(StepResult.objects, "filter", cut_once)
    renewals = heartbeat.HEARTBEATS.renewals
    at = timezone.now()

    # A 30 s lease written 10 s ago: renewed at once, then every 10 s. The renewal that
    # finds the connection cut is tried again RETRY_BEAT later, long before the next beat.
    with heartbeat.heartbeat(pk, token, lease=30, leased_at=time.monotonic() - 10, now=lambda: at):
        deadline = time.monotonic() + 8
        while heartbeat.HEARTBEATS.renewals == renewals and time.monotonic() < deadline:
            time.sleep(0.02)

    assert failures == [1]
    assert heartbeat.HEARTBEATS.renewals - renewals == 1
    assert StepResult.objects.get(pk=pk).lease_expires_at == at + timedelta(seconds=30)
