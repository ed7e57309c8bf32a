"""What a fire does: the single leader, the overlap policy, catch-up, jitter, pausing.

``schedule_fire`` handles one message from beat. Under the schedule's row lock it
maps the moment to its fire time (``timing.slot_latest``), ignores a time already
handled (a second beat's message), logs the missed times since the last fire, and
decides: start a run, buffer one, or skip. The fire row's unique (schedule, fire
time) constraint backs the lock up, so one fire time never starts two runs even on a
database without row locks. ``schedule_run_finished`` reacts to a scheduled run's
end: counts failures in a row (pausing at the limit) and starts a buffered fire.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, QuerySet

from runs.models import RunStatus, RunTrigger
from runs.services import run_create
from schedules.models import FireOutcome, Overlap, Schedule, ScheduleFire
from schedules.services import schedule_pause
from schedules.timing import slot_latest, slots_between
from tools.errors import FlowpilotError
from workflows.models import Workflow, WorkflowStatus

logger = logging.getLogger("flowpilot.schedules")

# queued: a concurrency limit; waiting: an approval step's decision
IN_FLIGHT = (RunStatus.QUEUED, RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING)
# Starts a fire's run after ``delay`` seconds (the Celery task, or a test's stand-in).
Starter = Callable[[int, float], None]


def schedule_fire(
    *, schedule_id: int, now: datetime, start: Starter, rng: random.Random
) -> ScheduleFire | None:
    """Handle one fire message; the fire row, or None when there was nothing to do."""
    try:
        with transaction.atomic():
            schedule = Schedule.objects.select_for_update().filter(pk=schedule_id).first()
            if schedule is None or schedule.paused:
                return None
            slot = slot_latest(schedule, now)
            if schedule.last_fire_time and slot <= schedule.last_fire_time:
                _suppressed(schedule_id, slot)
                return None
            _log_missed(schedule, slot, now)
            fire = _decide(schedule, slot, now, rng)
            Schedule.objects.filter(pk=schedule.pk).update(last_fire_time=slot)
    except IntegrityError:  # another beat's message won the (schedule, fire time) row
        _suppressed(schedule_id, None)
        return None
    if fire.run_id:
        run_id, delay = fire.run_id, fire.delay_seconds
        transaction.on_commit(lambda: start(run_id, delay))
    logger.info("schedule %s fire %s: %s", schedule_id, fire.fire_time, fire.outcome)
    return fire


def _suppressed(schedule_id: int, slot: datetime | None) -> None:
    Schedule.objects.filter(pk=schedule_id).update(
        duplicates_suppressed=F("duplicates_suppressed") + 1
    )
    logger.info("schedule %s: fire time %s already handled", schedule_id, slot)


def _log_missed(schedule: Schedule, slot: datetime, now: datetime) -> None:
    """Log the fire times between the last fire and ``slot`` nobody handled.

    Within the catch-up window they are folded into this fire (it runs once for
    them all); older ones are recorded as missed, one row each.
    """
    if schedule.last_fire_time is None:
        return
    missed, more = slots_between(schedule, schedule.last_fire_time, slot)
    window_start = now - timedelta(seconds=schedule.catchup_window_seconds)
    old = [t for t in missed if t < window_start]
    detail = "older than the catch-up window" + (" (earlier ones not listed)" if more else "")
    ScheduleFire.objects.bulk_create(
        ScheduleFire(schedule=schedule, fire_time=t, outcome=FireOutcome.MISSED, detail=detail)
        for t in old
    )


def _decide(schedule: Schedule, slot: datetime, now: datetime, rng: random.Random) -> ScheduleFire:
    fire = ScheduleFire(schedule=schedule, fire_time=slot)
    late = (now - slot).total_seconds()
    active = Workflow.objects.filter(
        name=schedule.workflow_name, status=WorkflowStatus.ACTIVE
    ).first()
    in_flight = _in_flight(schedule)
    if late > schedule.catchup_window_seconds:
        fire.outcome, fire.detail = FireOutcome.MISSED, f"handled {late:.0f} s late"
    elif active is None:
        fire.outcome = FireOutcome.SKIPPED_INACTIVE
        fire.detail = f"no active version of {schedule.workflow_name}"
    elif in_flight and schedule.overlap == Overlap.SKIP:
        fire.outcome, fire.detail = FireOutcome.SKIPPED_OVERLAP, f"run {in_flight} in flight"
    elif in_flight and schedule.overlap == Overlap.BUFFER_ONE:
        waiting = _buffered(schedule).exists()
        fire.outcome = FireOutcome.SKIPPED_OVERLAP if waiting else FireOutcome.BUFFERED
        fire.detail = f"run {in_flight} in flight" + (", one fire already buffered" * waiting)
    else:
        _start(fire, active, schedule, rng)
    fire.save()
    return fire


def _start(fire: ScheduleFire, active: Workflow, schedule: Schedule, rng: random.Random) -> None:
    """Create the fire's run (pending, so the next fire sees it in flight)."""
    fire.workflow_version = active.version
    try:
        fire.run = run_create(workflow=active, trigger=RunTrigger.SCHEDULE, inputs=schedule.inputs)
    except FlowpilotError as exc:
        fire.outcome, fire.detail = FireOutcome.NOT_STARTED, str(exc)[:2000]
        return
    fire.outcome = FireOutcome.STARTED
    fire.delay_seconds = round(rng.uniform(0, schedule.jitter_seconds), 3)


def _in_flight(schedule: Schedule) -> int | None:
    return (
        ScheduleFire.objects.filter(schedule=schedule, run__status__in=IN_FLIGHT)
        .order_by("fire_time")
        .values_list("run_id", flat=True)
        .first()
    )


def _buffered(schedule: Schedule) -> QuerySet[ScheduleFire]:
    return ScheduleFire.objects.filter(
        schedule=schedule, outcome=FireOutcome.BUFFERED, run__isnull=True
    ).order_by("fire_time")


def schedule_run_finished(*, run_id: int, start: Starter, rng: random.Random) -> None:
    """A scheduled run ended: count failures in a row, pause at the limit, start the buffer."""
    fire = ScheduleFire.objects.filter(run_id=run_id).select_related("run").first()
    if fire is None or fire.run is None or fire.run.trigger != RunTrigger.SCHEDULE:
        return
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().get(pk=fire.schedule_id)
        failed = fire.run.status == RunStatus.FAILED
        schedule.consecutive_failures = schedule.consecutive_failures + 1 if failed else 0
        schedule.save(update_fields=["consecutive_failures", "updated_at"])
        limit = schedule.pause_after_failures
        if failed and limit and schedule.consecutive_failures >= limit:
            schedule_pause(
                schedule=schedule,
                reason=f"{schedule.consecutive_failures} scheduled runs failed in a row "
                f"(pause_after_failures: {limit}); the last was run {run_id}",
            )
            return
        buffered = None if _in_flight(schedule) else _buffered(schedule).first()
        if buffered is not None:
            _start_buffered(buffered, schedule, start, rng)


def _start_buffered(
    fire: ScheduleFire, schedule: Schedule, start: Starter, rng: random.Random
) -> None:
    active = Workflow.objects.filter(
        name=schedule.workflow_name, status=WorkflowStatus.ACTIVE
    ).first()
    if active is None:
        fire.detail += "; not started: no active version"
        fire.save(update_fields=["detail"])
        return
    _start(fire, active, schedule, rng)
    fire.outcome = FireOutcome.BUFFERED if fire.run_id else fire.outcome
    fire.detail += "; started when the run before it finished" if fire.run_id else ""
    fire.save()
    if fire.run_id:
        run_id, delay = fire.run_id, fire.delay_seconds
        transaction.on_commit(lambda: start(run_id, delay))
