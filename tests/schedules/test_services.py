"""Schedule services: hostile input, the beat entry, pause/resume/remove, the file's schedule."""

import json

import pytest
from django_celery_beat.models import PeriodicTask
from pydantic import ValidationError

from schedules.models import FireOutcome, Schedule, ScheduleSource
from schedules.services import (
    Policy,
    ScheduleInvalid,
    schedule_create,
    schedule_pause,
    schedule_remove,
    schedule_resume,
    schedule_update,
)
from tests.schedules.conftest import QUICK_FLOW
from workflows.schema import WorkflowSpec
from workflows.services import workflow_activate_trusted, workflow_import

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"cron": "banana"}, "`cron`: cron expression 'banana' must have 5 fields"),
        ({"cron": "61 * * * *"}, "`cron`: cron expression '61 * * * *' is not valid"),
        ({"cron": "* * * * * *"}, "a sixth field means seconds"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "`timezone`: unknown timezone"),
        ({"interval": 0}, "`interval` must be at least 1 second, got 0"),
        ({"cron": "0 9 * * *", "interval": 5}, "exactly one of `cron` and `interval`"),
        ({}, "exactly one of `cron` and `interval`"),
        ({"interval": 5, "policy": Policy(overlap="queue")}, "`overlap` must be one of"),
        ({"interval": 5, "policy": Policy(jitter=-1)}, "`jitter` must be 0 or more"),
        ({"interval": 5, "policy": Policy(pause_after_failures=0)}, "`pause_after_failures`"),
    ],
)
def test_hostile_schedule_input_is_a_clear_error(active_flow, given, message):
    with pytest.raises(ScheduleInvalid) as caught:
        schedule_create(workflow_name="nightly", name="s", **given)
    assert message in str(caught.value)
    assert not Schedule.objects.exists()


def test_a_schedule_needs_a_stored_workflow_and_a_unique_slug(active_flow):
    with pytest.raises(ScheduleInvalid, match="no stored workflow is named 'nope'"):
        schedule_create(workflow_name="nope", name="s", interval=5)
    with pytest.raises(ScheduleInvalid, match="`name` 'Bad Name'"):
        schedule_create(workflow_name="nightly", name="Bad Name", interval=5)
    schedule_create(workflow_name="nightly", name="s", interval=5)
    with pytest.raises(ScheduleInvalid, match="already has a schedule 's'"):
        schedule_create(workflow_name="nightly", name="s", interval=5)


@pytest.mark.parametrize(
    ("schedule", "where"),
    [
        ("banana", "schedule"),
        ("* * * * * *", "schedule"),
        ({"cron": "0 9 * * *", "timezone": "Nowhere/Land"}, "schedule.ScheduleSpec.timezone"),
        ({"cron": "0 9 * * *", "overlap": "queue"}, "schedule.ScheduleSpec.overlap"),
    ],
)
def test_the_file_schedule_is_validated_naming_the_field(schedule, where):
    with pytest.raises(ValidationError) as caught:
        WorkflowSpec.model_validate({**QUICK_FLOW, "schedule": schedule})
    locations = [".".join(str(p) for p in e["loc"]) for e in caught.value.errors()]
    assert any(loc.startswith(where) for loc in locations), locations


def test_a_schedule_is_a_beat_entry_that_pausing_disables(active_flow):
    schedule = schedule_create(
        workflow_name="nightly", name="morning", cron="0 9 * * 1-5", tz="Europe/Paris",
        inputs={"n": 2},
    )  # fmt: skip
    task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert task.task == "schedules.fire"
    assert json.loads(task.kwargs) == {"schedule_id": schedule.pk}
    assert (task.crontab.hour, task.crontab.day_of_week) == ("9", "1-5")
    assert str(task.crontab.timezone) == "Europe/Paris"
    assert task.enabled

    assert schedule_pause(schedule=schedule, reason="holiday")
    assert not schedule_pause(schedule=schedule)
    task.refresh_from_db()
    assert not task.enabled
    assert schedule.fires.get().outcome == FireOutcome.PAUSED

    assert schedule_resume(schedule=schedule)
    assert not schedule_resume(schedule=schedule)
    task.refresh_from_db()
    assert task.enabled
    assert [f.outcome for f in schedule.fires.order_by("id")] == ["paused", "resumed"]

    schedule_update(schedule=schedule, interval=30)
    task.refresh_from_db()
    assert (task.interval.every, task.crontab) == (30, None)

    schedule_remove(schedule=schedule)
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()


def test_activating_a_version_creates_updates_and_removes_the_file_schedule(
    django_capture_on_commit_callbacks,
):
    declared = {"cron": "30 6 * * *", "timezone": "Asia/Tokyo", "overlap": "buffer_one"}
    first, _ = workflow_import(data={**QUICK_FLOW, "schedule": declared})
    with django_capture_on_commit_callbacks(execute=True):
        workflow_activate_trusted(workflow=first)
    schedule = Schedule.objects.get(workflow_name="nightly")
    assert (schedule.source, schedule.name) == (ScheduleSource.DECLARED, "file")
    assert (schedule.cron, schedule.timezone, schedule.overlap) == (
        "30 6 * * *", "Asia/Tokyo", "buffer_one",
    )  # fmt: skip

    second, _ = workflow_import(data={**QUICK_FLOW, "schedule": "0 7 * * *"})
    with django_capture_on_commit_callbacks(execute=True):
        workflow_activate_trusted(workflow=second)
    schedule.refresh_from_db()
    assert (schedule.cron, schedule.timezone, schedule.overlap) == ("0 7 * * *", "UTC", "skip")

    operator = schedule_create(workflow_name="nightly", name="extra", interval=60)
    third, _ = workflow_import(data={**QUICK_FLOW, "description": "no schedule"})
    with django_capture_on_commit_callbacks(execute=True):
        workflow_activate_trusted(workflow=third)
    assert list(Schedule.objects.values_list("pk", flat=True)) == [operator.pk]
