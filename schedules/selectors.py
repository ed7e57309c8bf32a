"""Schedule selectors (reads) for the admin, the command and the API."""

from __future__ import annotations

from django.db.models import QuerySet

from schedules.models import RetentionSweep, Schedule, ScheduleFire


def schedule_list(*, workflow_name: str | None = None) -> QuerySet[Schedule]:
    schedules = Schedule.objects.all()
    if workflow_name:
        schedules = schedules.filter(workflow_name=workflow_name)
    return schedules.order_by("workflow_name", "name")


def schedule_get(*, workflow_name: str, name: str) -> Schedule | None:
    return Schedule.objects.filter(workflow_name=workflow_name, name=name).first()


def schedule_fire_log(*, schedule: Schedule) -> QuerySet[ScheduleFire]:
    """The whole fire log of ``schedule``, newest fire time first (ids break ties)."""
    return schedule.fires.select_related("run").order_by("-fire_time", "-id")


def schedule_fires(*, schedule: Schedule, limit: int = 50) -> list[ScheduleFire]:
    return list(schedule_fire_log(schedule=schedule)[:limit])


def retention_last() -> RetentionSweep | None:
    return RetentionSweep.objects.order_by("-started_at", "-id").first()
