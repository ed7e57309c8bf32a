"""Schedule services (writes): create, update, pause, resume, remove, and the file's schedule.

Commands, the admin and (once it exists) the REST API call these. Every change is
mirrored to the schedule's django-celery-beat ``PeriodicTask`` in the same
transaction, so beat (``DatabaseScheduler``) fires exactly what the table says.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from schedules.models import FireOutcome, Overlap, Schedule, ScheduleFire, ScheduleSource
from workflows.cron import cron_check, timezone_check
from workflows.models import Workflow
from workflows.schema_triggers import (
    MAX_CATCHUP_SECONDS,
    MAX_INTERVAL_SECONDS,
    MAX_JITTER_SECONDS,
    MAX_PAUSE_AFTER_FAILURES,
)
from workflows.services import workflow_spec

FIRE_TASK = "schedules.fire"
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,99}$"
DECLARED_NAME = "file"  # the schedule a workflow file declares


class ScheduleInvalid(ValueError):
    """Bad schedule input; the message names the field."""


@dataclass(frozen=True)
class Policy:
    """A schedule's policies, as given to ``schedule_create`` / ``schedule_update``."""

    overlap: str = Overlap.SKIP
    catchup_window: int = 3600
    pause_after_failures: int | None = None
    jitter: int = 0


def schedule_check(
    *, cron: str = "", tz: str = "UTC", interval: int | None = None, policy: Policy = Policy()
) -> tuple[str, str, int | None]:
    """The normalised (cron, timezone, interval); ``ScheduleInvalid`` naming the field.

    A schedule that can never fire (a cron naming no date) or would fire absurdly
    (numbers past ``workflows.schema_triggers``' bounds, the file's own) is refused here,
    so the command, the API and the admin refuse it with the same reason.
    """
    if bool(cron) == (interval is not None):
        raise ScheduleInvalid("give exactly one of `cron` and `interval`")
    if interval is not None and interval < 1:
        raise ScheduleInvalid(f"`interval` must be at least 1 second, got {interval}")
    if interval is not None and interval > MAX_INTERVAL_SECONDS:
        raise ScheduleInvalid(
            f"`interval` must be at most {MAX_INTERVAL_SECONDS} seconds (366 days), got "
            f"{interval}; a rarer schedule is a cron expression"
        )
    try:
        cron = cron_check(cron) if cron else ""
    except ValueError as exc:
        raise ScheduleInvalid(f"`cron`: {exc}") from None
    try:
        tz = timezone_check(tz)
    except ValueError as exc:
        raise ScheduleInvalid(f"`timezone`: {exc}") from None
    _policy_check(policy)
    return cron, tz, interval


def _policy_check(policy: Policy) -> None:
    """``ScheduleInvalid`` naming the first policy value out of its bounds."""
    if policy.overlap not in Overlap.values:
        raise ScheduleInvalid(f"`overlap` must be one of {', '.join(Overlap.values)}")
    for field, value, most in (
        ("catchup_window", policy.catchup_window, MAX_CATCHUP_SECONDS),
        ("jitter", policy.jitter, MAX_JITTER_SECONDS),
    ):
        if value < 0:
            raise ScheduleInvalid(f"`{field}` must be 0 or more seconds, got {value}")
        if value > most:
            raise ScheduleInvalid(f"`{field}` must be at most {most} seconds, got {value}")
    failures = policy.pause_after_failures
    if failures is not None and not 1 <= failures <= MAX_PAUSE_AFTER_FAILURES:
        raise ScheduleInvalid(
            f"`pause_after_failures` must be between 1 and {MAX_PAUSE_AFTER_FAILURES} "
            f"(omit it to never pause), got {failures}"
        )


def schedule_create(
    *,
    workflow_name: str,
    name: str,
    cron: str = "",
    tz: str = "UTC",
    interval: int | None = None,
    inputs: dict[str, Any] | None = None,
    policy: Policy = Policy(),
    source: str = ScheduleSource.OPERATOR,
) -> Schedule:
    """Add a schedule to a stored workflow; beat picks it up on its next sync."""
    cron, tz, interval = schedule_check(cron=cron, tz=tz, interval=interval, policy=policy)
    if not re.match(NAME_PATTERN, name):
        raise ScheduleInvalid(f"`name` {name!r} must match {NAME_PATTERN}")
    if not Workflow.objects.filter(name=workflow_name).exists():
        raise ScheduleInvalid(f"`workflow`: no stored workflow is named {workflow_name!r}")
    if Schedule.objects.filter(workflow_name=workflow_name, name=name).exists():
        raise ScheduleInvalid(f"`name`: {workflow_name} already has a schedule {name!r}")
    with transaction.atomic():
        schedule = Schedule.objects.create(
            workflow_name=workflow_name,
            name=name,
            source=source,
            cron=cron,
            timezone=tz,
            interval_seconds=interval,
            inputs=dict(inputs or {}),
            **_policy_fields(policy),
        )
        schedule_beat_sync(schedule=schedule)
    return schedule


def schedule_update(
    *,
    schedule: Schedule,
    cron: str = "",
    tz: str = "UTC",
    interval: int | None = None,
    inputs: dict[str, Any] | None = None,
    policy: Policy = Policy(),
) -> Schedule:
    """Replace a schedule's rule, inputs and policies (its fire log stays)."""
    cron, tz, interval = schedule_check(cron=cron, tz=tz, interval=interval, policy=policy)
    with transaction.atomic():
        schedule.cron, schedule.timezone, schedule.interval_seconds = cron, tz, interval
        schedule.inputs = dict(inputs or {})
        for field, value in _policy_fields(policy).items():
            setattr(schedule, field, value)
        schedule.save()
        schedule_beat_sync(schedule=schedule)
    return schedule


def schedule_pause(*, schedule: Schedule, reason: str = "paused by an operator") -> bool:
    """Stop firing; recorded in the fire log. False when it was already paused."""
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        if locked.paused:
            return False
        locked.paused, locked.paused_reason = True, reason[:300]
        locked.save(update_fields=["paused", "paused_reason", "updated_at"])
        _log_event(locked, FireOutcome.PAUSED, reason)
        schedule_beat_sync(schedule=locked)
    schedule.refresh_from_db()
    return True


def schedule_resume(*, schedule: Schedule) -> bool:
    """Fire again from the next fire time on (missed ones follow the catch-up window)."""
    with transaction.atomic():
        locked = Schedule.objects.select_for_update().get(pk=schedule.pk)
        if not locked.paused:
            return False
        locked.paused, locked.paused_reason, locked.consecutive_failures = False, "", 0
        locked.save(
            update_fields=["paused", "paused_reason", "consecutive_failures", "updated_at"]
        )
        _log_event(locked, FireOutcome.RESUMED, "resumed")
        schedule_beat_sync(schedule=locked)
    schedule.refresh_from_db()
    return True


def schedule_remove(*, schedule: Schedule) -> None:
    """Delete the schedule, its beat entry and its fire log (runs stay)."""
    with transaction.atomic():
        if schedule.periodic_task_id:
            PeriodicTask.objects.filter(pk=schedule.periodic_task_id).delete()
        schedule.delete()


def schedule_sync_declared(*, workflow: Workflow) -> Schedule | None:
    """Make the ``file`` schedule match what the activated ``workflow`` declares.

    A version without ``schedule:`` removes the declared one; schedules added by an
    operator are never touched. Returns the declared schedule, if any.
    """
    declared = workflow_spec(workflow).declared_schedule()
    existing = Schedule.objects.filter(
        workflow_name=workflow.name, source=ScheduleSource.DECLARED
    ).first()
    if declared is None:
        if existing is not None:
            schedule_remove(schedule=existing)
        return None
    policy = Policy(
        overlap=declared.overlap,
        catchup_window=declared.catchup_window,
        pause_after_failures=declared.pause_after_failures,
        jitter=declared.jitter,
    )
    cron, tz, inputs = declared.cron, declared.timezone, declared.inputs
    if existing is not None:
        return schedule_update(schedule=existing, cron=cron, tz=tz, inputs=inputs, policy=policy)
    return schedule_create(
        workflow_name=workflow.name,
        name=DECLARED_NAME,
        source=ScheduleSource.DECLARED,
        cron=cron,
        tz=tz,
        inputs=inputs,
        policy=policy,
    )


def _policy_fields(policy: Policy) -> dict[str, Any]:
    return {
        "overlap": policy.overlap,
        "catchup_window_seconds": policy.catchup_window,
        "pause_after_failures": policy.pause_after_failures,
        "jitter_seconds": policy.jitter,
    }


def _log_event(schedule: Schedule, outcome: str, detail: str) -> ScheduleFire:
    return ScheduleFire.objects.create(
        schedule=schedule, fire_time=timezone.now(), outcome=outcome, detail=detail
    )


def schedule_beat_sync(*, schedule: Schedule) -> PeriodicTask:
    """Create or update the ``PeriodicTask`` beat fires for ``schedule``."""
    fields: dict[str, Any] = {
        "task": FIRE_TASK,
        "kwargs": json.dumps({"schedule_id": schedule.pk}),
        "enabled": not schedule.paused,
        "description": f"flowpilot schedule {schedule} ({schedule.when})",
        "interval": None,
        "crontab": None,
    }
    if schedule.interval_seconds:
        fields["interval"], _ = IntervalSchedule.objects.get_or_create(
            every=schedule.interval_seconds, period=IntervalSchedule.SECONDS
        )
    else:
        minute, hour, day, month, weekday = schedule.cron.split()
        fields["crontab"], _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day,
            month_of_year=month,
            day_of_week=weekday,
            timezone=schedule.timezone,
        )
    task, _ = PeriodicTask.objects.update_or_create(
        name=f"flowpilot-schedule-{schedule.pk}", defaults=fields
    )
    if schedule.periodic_task_id != task.pk:
        schedule.periodic_task = task
        schedule.save(update_fields=["periodic_task", "updated_at"])
    return task
