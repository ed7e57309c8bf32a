"""A schedule's next fire, in its own timezone and in words, and why nothing would fire."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from celery import current_app
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from schedules.models import Schedule
from schedules.next_fire import cron_next, firing_warning, in_words, schedule_next_fire
from schedules.services import schedule_create
from tests.factories import WorkflowFactory
from workflows.models import WorkflowStatus

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 28, 22, 10, tzinfo=UTC)  # the evening before Paris moves its clock


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "due now"),
        (45, "in 45 s"),
        (600, "in 10 min"),
        (3 * 3600 + 20 * 60, "in 3 h 20 min"),
        (7200, "in 2 h"),
        (86400, "in 1 day"),
        (2 * 86400 + 4 * 3600 + 59, "in 2 days 4 h"),
    ],
)
def test_a_wait_reads_in_words(seconds, words):
    assert in_words(timedelta(seconds=seconds)) == words


def test_the_next_fire_is_in_the_schedules_own_timezone():
    at = cron_next("30 9 * * *", "Europe/Paris", NOW)
    assert at.isoformat() == "2026-03-29T09:30:00+02:00"  # summer time from 02:00 that night
    assert at.astimezone(UTC).isoformat() == "2026-03-29T07:30:00+00:00"


def test_a_skipped_wall_time_fires_when_the_clock_jumps_past_it():
    """02:30 does not exist in Paris on 29 March 2026: it fires at the jump (03:00 CEST)."""
    at = cron_next("30 2 * * *", "Europe/Paris", NOW)
    assert at.isoformat() == "2026-03-29T03:00:00+02:00"


def _schedule(**fields) -> Schedule:
    workflow = WorkflowFactory(status=WorkflowStatus.ACTIVE)
    schedule = schedule_create(
        workflow_name=workflow.name, name="nightly", cron="0 6 * * *", tz="Europe/Paris"
    )
    Schedule.objects.filter(pk=schedule.pk).update(**fields)
    schedule.refresh_from_db()
    return schedule


def test_a_schedule_names_its_next_fire_and_a_paused_one_none():
    schedule = _schedule()
    upcoming = schedule_next_fire(schedule=schedule, now=NOW)
    assert upcoming.local == "2026-03-29 06:00 Europe/Paris"
    assert upcoming.words == "in 5 h 50 min"  # 23:10 → 06:00 across the lost hour

    paused = schedule_next_fire(schedule=_paused(schedule), now=NOW)
    assert (paused.at, paused.words, paused.local) == (None, "paused", "-")


def _paused(schedule: Schedule) -> Schedule:
    schedule.paused = True
    return schedule


def test_an_interval_fires_its_interval_after_the_last_fire():
    schedule = _schedule()
    schedule.cron, schedule.interval_seconds = "", 900
    schedule.last_fire_time = NOW - timedelta(minutes=5)
    upcoming = schedule_next_fire(schedule=schedule, now=NOW)
    assert upcoming.words == "in 10 min"
    assert upcoming.local == "2026-03-28 23:20 Europe/Paris"


@pytest.fixture
def broker(settings):
    saved = {k: current_app.conf[k] for k in ("broker_url", "task_always_eager")}
    current_app.conf.update(broker_url="redis://127.0.0.1:1/0", task_always_eager=False)
    settings.FLOWPILOT_HEALTH_BEAT_MAX_AGE = 120
    yield
    current_app.conf.update(saved)


def test_without_a_broker_nothing_fires_and_the_warning_says_so(settings):
    saved = {k: current_app.conf[k] for k in ("broker_url", "task_always_eager")}
    current_app.conf.update(broker_url="", task_always_eager=True)
    try:
        assert firing_warning().startswith("No broker is configured (CELERY_BROKER_URL)")
    finally:
        current_app.conf.update(saved)


def test_beat_never_ticked_or_stale_is_a_warning_and_a_fresh_tick_none(broker):
    _schedule()  # its beat task has never run
    assert firing_warning().startswith("Beat has never sent a task")
    now = timezone.now()
    PeriodicTask.objects.update(last_run_at=now - timedelta(seconds=600))
    assert "Beat's last tick was 600 s ago (more than 120 s)" in firing_warning(now=now)
    PeriodicTask.objects.update(last_run_at=now - timedelta(seconds=30))
    assert firing_warning(now=now) == ""
