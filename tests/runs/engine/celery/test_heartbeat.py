"""Lease renewal for running Celery steps (``runs.engine.celery.heartbeat``)."""

from __future__ import annotations

import time

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


def test_a_failed_renewal_is_logged_and_the_next_beat_tries_again(echo_api, monkeypatch, caplog):
    pk, token = claimed_step(echo_api)
    real_filter = StepResult.objects.filter
    failures = []

    def flaky_filter(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise DatabaseError("connection lost")
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
