"""schedules.timing: a schedule's fire slots from its rule and a given clock — interval
slots counted from the anchor, cron slots in the schedule's timezone, missed slots capped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schedules.timing import MAX_MISSED_RECORDED, slot_latest, slots_between

ANCHOR = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


@dataclass
class Rule:
    cron: str = ""
    timezone: str = "UTC"
    interval_seconds: int | None = None
    created_at: datetime = ANCHOR


def test_an_interval_slot_is_the_newest_multiple_of_the_interval_from_the_anchor():
    every_minute = Rule(interval_seconds=60)
    assert slot_latest(every_minute, ANCHOR + timedelta(seconds=150)) == ANCHOR + timedelta(
        seconds=120
    )
    assert slot_latest(every_minute, ANCHOR + timedelta(seconds=120)) == ANCHOR + timedelta(
        seconds=120
    )
    assert slot_latest(every_minute, ANCHOR - timedelta(seconds=30)) == ANCHOR  # never before


def test_two_beats_a_little_apart_name_the_same_slot():
    rule = Rule(cron="*/5 * * * *")
    one = slot_latest(rule, datetime(2026, 3, 2, 9, 5, 1, tzinfo=UTC))
    other = slot_latest(rule, datetime(2026, 3, 2, 9, 9, 59, tzinfo=UTC))
    assert one == other == datetime(2026, 3, 2, 9, 5, tzinfo=UTC)


def test_a_cron_slot_is_in_the_schedules_timezone_returned_in_utc():
    rule = Rule(cron="0 9 * * *", timezone="Europe/Paris")
    latest = slot_latest(rule, datetime(2026, 3, 2, 12, 0, tzinfo=UTC))
    assert latest == datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    assert latest.tzinfo == UTC


def test_missed_slots_are_strictly_between_oldest_first():
    rule = Rule(interval_seconds=60)
    slots, more = slots_between(rule, ANCHOR, ANCHOR + timedelta(minutes=3))
    assert slots == [ANCHOR + timedelta(minutes=1), ANCHOR + timedelta(minutes=2)]
    assert not more
    cron_slots, _ = slots_between(Rule(cron="0 * * * *"), ANCHOR, ANCHOR + timedelta(hours=3))
    assert [s.hour for s in cron_slots] == [10, 11]


def test_only_the_newest_missed_slots_are_kept_and_the_rest_are_flagged():
    for rule in (Rule(interval_seconds=60), Rule(cron="* * * * *")):
        until = ANCHOR + timedelta(minutes=MAX_MISSED_RECORDED + 50)
        slots, more = slots_between(rule, ANCHOR, until)
        assert more
        assert len(slots) == MAX_MISSED_RECORDED
        assert slots[-1] == until - timedelta(minutes=1)
