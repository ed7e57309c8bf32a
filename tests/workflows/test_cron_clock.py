"""workflows.cron_clock: the one daylight-saving rule — repeated and skipped wall times
for expressions that count elapsed time and for those that name times of day."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from workflows.cron import cron_between, cron_latest
from workflows.cron_clock import counts_elapsed_time, wall_instants

PARIS = ZoneInfo("Europe/Paris")


def test_the_hour_field_decides_elapsed_time_or_time_of_day():
    assert counts_elapsed_time("0 * * * *")
    assert counts_elapsed_time("0 */2 * * *")
    assert not counts_elapsed_time("30 2 * * *")
    assert not counts_elapsed_time("0 1-3 * * *")


def test_a_repeated_wall_time_fires_twice_by_elapsed_time_once_as_a_time_of_day():
    wall = datetime(2026, 10, 25, 2, 30)  # 02:30 CEST, then 02:30 CET
    first, second = (
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
    )
    assert wall_instants(wall, PARIS, elapsed=True) == [first, second]
    assert wall_instants(wall, PARIS, elapsed=False) == [first]


def test_a_skipped_wall_time_fires_not_at_all_or_when_the_clock_jumps():
    wall = datetime(2026, 3, 29, 2, 30)  # the clock goes 01:59 CET → 03:00 CEST
    assert wall_instants(wall, PARIS, elapsed=True) == []
    assert wall_instants(wall, PARIS, elapsed=False) == [datetime(2026, 3, 29, 1, 0, tzinfo=UTC)]


def test_latest_and_between_name_the_same_fire_times():
    # Compared in UTC: an aware time in a repeated hour never equals one of another zone.
    now = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # the second 02:10 in Paris
    hourly_latest = cron_latest("0 * * * *", "Europe/Paris", now).astimezone(UTC)
    assert hourly_latest == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # the second 02:00
    daily_latest = cron_latest("0 2 * * *", "Europe/Paris", now).astimezone(UTC)
    assert daily_latest == datetime(2026, 10, 25, 0, 0, tzinfo=UTC)  # the first 02:00
    after = datetime(2026, 10, 24, 22, 30, tzinfo=UTC)
    hourly = cron_between("0 * * * *", "Europe/Paris", after, now, limit=10)
    assert [t.astimezone(UTC).hour for t in hourly] == [23, 0, 1]
    daily = cron_between("0 2 * * *", "Europe/Paris", after, now, limit=10)
    assert [t.astimezone(UTC) for t in daily] == [datetime(2026, 10, 25, 0, 0, tzinfo=UTC)]
