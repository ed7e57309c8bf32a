"""schedules.hooks: a finished run counts against its schedule only when a schedule
started it; activating a version makes its declared schedule match the file."""

from __future__ import annotations

import pytest

from runs.models import RunStatus, RunTrigger
from schedules.hooks import run_finished, workflow_activated
from schedules.models import FireOutcome, Schedule, ScheduleFire
from schedules.services import Policy, schedule_create
from tests.factories import RunFactory
from tests.schedules.conftest import QUICK_FLOW
from workflows.services import workflow_activate_trusted, workflow_import

pytestmark = pytest.mark.django_db


def fired_run(schedule: Schedule, trigger: str, minute: int):
    run = RunFactory(workflow__data=QUICK_FLOW, trigger=trigger, status=RunStatus.FAILED)
    ScheduleFire.objects.create(
        schedule=schedule,
        fire_time=f"2026-03-02T09:{minute:02}:00Z",
        outcome=FireOutcome.STARTED,
        run=run,
    )
    return run


def test_a_failed_scheduled_run_counts_and_pauses_at_the_limit(active_flow):
    schedule = schedule_create(
        workflow_name="nightly", name="s", interval=60, policy=Policy(pause_after_failures=2)
    )
    for minute in (1, 2):
        run = fired_run(schedule, RunTrigger.SCHEDULE, minute)
        run_finished(run_id=run.pk, trigger=RunTrigger.SCHEDULE)
    schedule.refresh_from_db()
    assert schedule.consecutive_failures == 2
    assert schedule.paused
    assert "2 scheduled runs failed in a row" in schedule.paused_reason


def test_a_run_a_schedule_did_not_start_is_ignored(active_flow):
    schedule = schedule_create(workflow_name="nightly", name="s", interval=60)
    run = fired_run(schedule, RunTrigger.CLI, 1)
    run_finished(run_id=run.pk, trigger=RunTrigger.CLI)
    schedule.refresh_from_db()
    assert schedule.consecutive_failures == 0


def test_activating_a_version_creates_updates_and_removes_its_declared_schedule(settings):
    settings.FLOWPILOT_WORKFLOW_ACTIVATED_HOOKS = []  # only the explicit calls below
    declared = {**QUICK_FLOW, "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Paris"}}
    first = workflow_activate_trusted(workflow=workflow_import(data=declared)[0])
    workflow_activated(workflow_id=first.pk)
    schedule = Schedule.objects.get(workflow_name="nightly")
    assert (schedule.cron, schedule.timezone) == ("0 9 * * *", "Europe/Paris")

    changed = {**declared, "schedule": {"cron": "30 6 * * 1-5"}}
    workflow_activated(
        workflow_id=workflow_activate_trusted(workflow=workflow_import(data=changed)[0]).pk
    )
    assert Schedule.objects.get(workflow_name="nightly").cron == "30 6 * * 1-5"

    workflow_activated(
        workflow_id=workflow_activate_trusted(workflow=workflow_import(data=QUICK_FLOW)[0]).pk
    )
    assert not Schedule.objects.filter(workflow_name="nightly").exists()
