"""Cron expressions and timezones: checked with croniter and zoneinfo, never a hand parser.

A schedule fires at most once a minute: exactly five fields (minute, hour, day of
month, month, day of week). croniter also reads a sixth "seconds" field; that form is
refused here, because a schedule that fires every second would pile up runs faster
than anyone can read them (use an interval schedule for sub-minute tests). An
expression whose fields are each valid but name no calendar date (``0 0 30 2 *``,
February 30) is refused too: it would be listed active and never fire.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from cron_descriptor import get_description
from croniter import CroniterBadDateError, croniter

from workflows.cron_clock import fires_before

CRON_FIELDS = 5
# Searching from a leap year's first day finds every date the calendar has (29 February
# included) within croniter's search span, so "no next match" means "no such date".
_SEARCH_FROM = datetime(2000, 1, 1)  # a calendar question: no zone involved


def cron_check(expression: str) -> str:
    """The expression, normalised (single spaces); ``ValueError`` saying what is wrong."""
    fields = expression.split()
    if len(fields) != CRON_FIELDS:
        extra = " (a sixth field means seconds: schedules fire at most once a minute)"
        raise ValueError(
            f"cron expression {expression!r} must have {CRON_FIELDS} fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
            + (extra if len(fields) == CRON_FIELDS + 1 else "")
        )
    normalised = " ".join(fields)
    if not croniter.is_valid(normalised):
        raise ValueError(f"cron expression {expression!r} is not valid")
    try:
        croniter(normalised, _SEARCH_FROM).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(
            f"cron expression {expression!r} never fires: no date matches its day of month "
            "and month (such as February 30)"
        ) from None
    return normalised


def timezone_check(name: str) -> str:
    """An IANA timezone name (``Europe/Paris``, ``UTC``); ``ValueError`` otherwise."""
    if name not in available_timezones() | {"UTC"}:
        raise ValueError(f"unknown timezone {name!r} (an IANA name such as Europe/Paris or UTC)")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown timezone {name!r}") from exc
    return name


def cron_describe(expression: str) -> str:
    """A human description (``At 09:00 AM, Monday through Friday``)."""
    return get_description(expression)


def cron_latest(expression: str, tz: str, now: datetime) -> datetime:
    """The latest fire time at or before ``now``'s minute, in ``tz`` (the rule: module
    ``workflows.cron_clock``)."""
    until = now.replace(second=0, microsecond=0) + timedelta(seconds=1)
    zone = ZoneInfo(tz)
    return next(fires_before(expression, zone, until)).astimezone(zone)


def cron_between(
    expression: str, tz: str, after: datetime, until: datetime, *, limit: int
) -> list[datetime]:
    """The newest ``limit`` fire times strictly after ``after`` and before ``until``,
    oldest first, in ``tz`` (searched back from ``until``: a long gap keeps its latest);
    the same fire times ``cron_latest`` names, one rule for both."""
    zone = ZoneInfo(tz)
    found: list[datetime] = []
    for instant in fires_before(expression, zone, until):
        if instant <= after or len(found) >= limit:
            break
        found.append(instant.astimezone(zone))
    return found[::-1]
