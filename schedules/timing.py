"""When a schedule fires: pure functions of the schedule's rule and a given clock.

Fire times are *slots*: for a cron expression, its matches in the schedule's
timezone; for an interval, ``anchor + k * interval`` (the anchor is when the schedule
was created). A fire message maps to the newest slot at or before the moment it is
handled, so two beats that tick a little apart still name the same slot.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

from workflows.cron import cron_between, cron_latest

MAX_MISSED_RECORDED = 100  # missed slots logged one by one; older ones are counted


class Rule(Protocol):
    cron: str
    timezone: str
    interval_seconds: int | None
    created_at: datetime


def slot_latest(rule: Rule, now: datetime) -> datetime:
    """The newest fire time at or before ``now`` (in UTC)."""
    if rule.interval_seconds:
        step = rule.interval_seconds
        elapsed = (now - rule.created_at).total_seconds()
        return rule.created_at + timedelta(seconds=step * max(0, int(elapsed // step)))
    return cron_latest(rule.cron, rule.timezone, now).astimezone(UTC)


def slots_between(rule: Rule, after: datetime, until: datetime) -> tuple[list[datetime], bool]:
    """Fire times strictly between ``after`` and ``until``, oldest first, at most
    ``MAX_MISSED_RECORDED`` of them (the newest); ``True`` when more were left out."""
    if rule.interval_seconds:
        step = timedelta(seconds=rule.interval_seconds)
        newest = slot_latest(rule, until - timedelta(microseconds=1))
        found: list[datetime] = []
        while newest > after and len(found) <= MAX_MISSED_RECORDED:
            found.append(newest)
            newest -= step
        found.reverse()
    else:
        found = [
            t.astimezone(UTC)
            for t in cron_between(
                rule.cron, rule.timezone, after, until, limit=MAX_MISSED_RECORDED + 1
            )
        ]
    return found[-MAX_MISSED_RECORDED:], len(found) > MAX_MISSED_RECORDED
