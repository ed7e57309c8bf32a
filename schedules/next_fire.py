"""When a schedule fires next, and whether anything will fire it at all.

``schedule_next_fire`` names the next fire time in the schedule's own timezone and in
words ("in 3 h 20 min"), by the same daylight-saving rule beat's fires are mapped by
(``workflows.cron_clock``). ``firing_warning`` says why nothing will fire: no broker
(so no worker and no beat), or beat's last tick is older than it may be. The admin's
schedules page, the home page and ``manage.py schedules add|list`` show both.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from celery import current_app
from croniter import croniter
from django.conf import settings
from django.db.models import Max
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from schedules.models import Schedule
from workflows.cron import cron_between
from workflows.cron_clock import MAX_SETBACK


@dataclass(frozen=True)
class NextFire:
    at: datetime | None  # in the schedule's timezone; None when paused
    words: str  # "in 3 h 20 min", "paused", "due now"

    @property
    def local(self) -> str:
        """``2026-11-27 09:00 Europe/Paris`` (``-`` when it does not fire)."""
        if self.at is None:
            return "-"
        return f"{self.at:%Y-%m-%d %H:%M} {self.at.tzinfo}"


def in_words(delta: timedelta) -> str:
    """A time to wait in words: ``in 45 s``, ``in 3 h 20 min``, ``in 2 days 4 h``."""
    seconds = int(delta.total_seconds())
    if seconds <= 0:
        return "due now"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        parts = [f"{days} day{'s' if days != 1 else ''}", f"{hours} h" if hours else ""]
    elif hours:
        parts = [f"{hours} h", f"{minutes} min" if minutes else ""]
    elif minutes:
        parts = [f"{minutes} min"]
    else:
        parts = [f"{secs} s"]
    return "in " + " ".join(p for p in parts if p)


def cron_next(expression: str, tz: str, now: datetime) -> datetime:
    """The first fire time strictly after ``now``, in ``tz``: croniter's first wall-time
    match is a bound; ``cron_between`` (the rule beat's fires follow) names the fire."""
    zone = ZoneInfo(tz)
    start = now.astimezone(zone)
    wall = croniter(expression, start.replace(tzinfo=None)).get_next(datetime)
    until = wall.replace(tzinfo=zone) + MAX_SETBACK + timedelta(minutes=1)
    found = cron_between(expression, tz, now, until, limit=10_000)
    return found[0] if found else wall.replace(tzinfo=zone)


def schedule_next_fire(*, schedule: Schedule, now: datetime | None = None) -> NextFire:
    now = now or timezone.now()
    if schedule.paused:
        return NextFire(None, "paused")
    zone = ZoneInfo(schedule.timezone or "UTC")
    if schedule.interval_seconds:
        last = schedule.last_fire_time
        step = timedelta(seconds=schedule.interval_seconds)
        at = last + step if last is not None else now
        if at < now:  # a missed interval fires at the next tick
            at = now
        return NextFire(at.astimezone(zone), in_words(at - now))
    at = cron_next(schedule.cron, schedule.timezone, now)
    return NextFire(at, in_words(at - now))


def beat_max_age() -> float:
    """How old beat's last tick may be: ``FLOWPILOT_HEALTH_BEAT_MAX_AGE``, else three
    sweeper intervals (at least 90 s)."""
    configured = getattr(settings, "FLOWPILOT_HEALTH_BEAT_MAX_AGE", None)
    if configured:
        return float(configured)
    return max(90.0, 3.0 * float(settings.FLOWPILOT_SWEEP_INTERVAL))


def firing_warning(*, now: datetime | None = None) -> str:
    """Why no schedule will fire ("" when beat ticks): no broker, or beat is silent."""
    conf = current_app.conf
    if not conf.broker_url or conf.task_always_eager:
        return (
            "No broker is configured (CELERY_BROKER_URL): no beat and no worker run, so no "
            "schedule will fire. Set a broker and start `celery -A config beat` and a worker."
        )
    now = now or timezone.now()
    last = PeriodicTask.objects.filter(enabled=True).aggregate(last=Max("last_run_at"))["last"]
    if last is None:
        return "Beat has never sent a task: no schedule fires until `celery -A config beat` runs."
    age = (now - last).total_seconds()
    if age > beat_max_age():
        return (
            f"Beat's last tick was {age:.0f} s ago (more than {beat_max_age():.0f} s): "
            "is `celery -A config beat` running? Schedules do not fire while it is down."
        )
    return ""
