"""Fires across both daylight-saving changes of the year, in several zones, through
``schedule_fire``: beat's messages every 15 minutes for a day either side of the change,
and the fire log must follow the rule of ``docs/schedules.md`` ("Daylight-saving
changes") with no ``missed`` row. The workflow is archived, so each fire is a cheap
``skipped_inactive`` row that still records its fire time."""

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest

from schedules.firing import schedule_fire
from schedules.models import FireOutcome, ScheduleFire
from schedules.services import Policy, schedule_create
from workflows.models import WorkflowStatus
from workflows.services import workflow_transition

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = [pytest.mark.django_db, pytest.mark.one_database]

# (zone, the instant the clocks change, the daily cron on the change's hour, the UTC
# instant that daily cron fires on the day of the change)
CHANGES = [
    # spring: 02:30 does not exist; it fires when the clock jumps (03:00 local)
    ("Europe/Paris", datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "30 2 * * *",
     datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
    # autumn: 02:30 happens twice; it fires once, at the first (02:30 CEST)
    ("Europe/Paris", datetime(2026, 10, 25, 1, 0, tzinfo=UTC), "30 2 * * *",
     datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 3, 8, 7, 0, tzinfo=UTC), "30 2 * * *",
     datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, 0, tzinfo=UTC), "30 1 * * *",
     datetime(2026, 11, 1, 5, 30, tzinfo=UTC)),
    ("Australia/Sydney", datetime(2026, 4, 4, 16, 0, tzinfo=UTC), "30 2 * * *",
     datetime(2026, 4, 4, 15, 30, tzinfo=UTC)),
    ("Australia/Sydney", datetime(2026, 10, 3, 16, 0, tzinfo=UTC), "30 2 * * *",
     datetime(2026, 10, 3, 16, 0, tzinfo=UTC)),
]  # fmt: skip
IDS = [f"{zone}-{change:%m-%d}" for zone, change, _, _ in CHANGES]


def fire_log(active_flow, rng, *, cron: str, zone: str, change: datetime) -> list[ScheduleFire]:
    """Beat's messages every 15 minutes from 26 h before ``change`` to 26 h after."""
    policy = Policy(overlap="allow_all", catchup_window=86400)
    schedule = schedule_create(workflow_name="nightly", name="s", cron=cron, tz=zone, policy=policy)
    workflow_transition(workflow=active_flow, to=WorkflowStatus.ARCHIVED)
    now = change - timedelta(hours=26)
    while now <= change + timedelta(hours=26):
        schedule_fire(schedule_id=schedule.pk, now=now, start=lambda *_: None, rng=rng)
        now += timedelta(minutes=15)
    return list(ScheduleFire.objects.filter(schedule=schedule).order_by("fire_time"))


@pytest.mark.parametrize(("zone", "change", "daily", "expected"), CHANGES, ids=IDS)
def test_an_hourly_schedule_fires_every_elapsed_hour_across_the_change(
    active_flow, rng, zone, change, daily, expected
):
    fires = fire_log(active_flow, rng, cron="0 * * * *", zone=zone, change=change)

    assert {f.outcome for f in fires} == {FireOutcome.SKIPPED_INACTIVE}  # none missed
    gaps = {b.fire_time - a.fire_time for a, b in pairwise(fires)}
    assert gaps == {timedelta(hours=1)}  # the repeated hour twice, the skipped one not at all
    assert len(fires) == 53  # every whole hour of the 52 h, both ends included


@pytest.mark.parametrize(("zone", "change", "daily", "expected"), CHANGES, ids=IDS)
def test_a_daily_schedule_fires_once_a_day_across_the_change(
    active_flow, rng, zone, change, daily, expected
):
    fires = fire_log(active_flow, rng, cron=daily, zone=zone, change=change)

    assert {f.outcome for f in fires} == {FireOutcome.SKIPPED_INACTIVE}  # no false `missed`
    assert expected in [f.fire_time for f in fires]
    local_days = [f.fire_time.astimezone(ZoneInfo(zone)).date() for f in fires]
    assert len(local_days) == len(set(local_days)) >= 2
