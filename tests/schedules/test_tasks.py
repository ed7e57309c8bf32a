"""The tasks, eagerly (no broker): beat's fire message to a finished run, and the hooks."""

import pytest

from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_cancel, run_create
from schedules.models import FireOutcome, Schedule
from schedules.services import Policy, schedule_create
from schedules.tasks import fire, start_later

pytestmark = pytest.mark.django_db


def test_a_fire_message_runs_the_active_version_to_the_end(
    active_flow, django_capture_on_commit_callbacks
):
    schedule = schedule_create(
        workflow_name="nightly", name="s", interval=3600, inputs={"n": 4},
        policy=Policy(pause_after_failures=1),
    )  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        fire(schedule.pk)

    (row,) = schedule.fires.all()
    assert row.outcome == FireOutcome.STARTED
    run = Run.objects.get()
    assert (run.status, run.trigger, run.outputs) == (
        RunStatus.SUCCEEDED, RunTrigger.SCHEDULE, {"double": 4},
    )  # fmt: skip
    schedule.refresh_from_db()
    assert (schedule.consecutive_failures, schedule.paused) == (0, False)


def test_start_later_waits_its_jitter_and_skips_a_run_no_longer_pending(active_flow):
    run = run_create(workflow=active_flow, trigger=RunTrigger.SCHEDULE)
    start_later(run.pk, 0.01)  # eager: the countdown is not waited for
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED

    cancelled = run_create(workflow=active_flow, trigger=RunTrigger.SCHEDULE)
    run_cancel(run=cancelled)
    start_later(cancelled.pk, 0)
    cancelled.refresh_from_db()
    assert cancelled.status == RunStatus.CANCELLED


def test_a_fire_for_a_removed_schedule_does_nothing(active_flow):
    schedule = schedule_create(workflow_name="nightly", name="s", interval=60)
    Schedule.objects.filter(pk=schedule.pk).delete()
    fire(schedule.pk)
    assert not Run.objects.exists()
