"""workflows.cron: five-field cron expressions and IANA timezones checked, described and
searched in a schedule's wall time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workflows.cron import cron_between, cron_check, cron_describe, cron_latest, timezone_check


def test_an_expression_is_normalised_to_single_spaces():
    assert cron_check("  0   9 * *  1-5 ") == "0 9 * * 1-5"


def test_a_sixth_field_is_refused_as_seconds():
    with pytest.raises(ValueError, match=r"must have 5 fields .*got 6 \(a sixth field means"):
        cron_check("* * * * * *")


def test_too_few_fields_and_bad_values_are_refused():
    with pytest.raises(ValueError, match="got 4"):
        cron_check("0 9 * *")
    with pytest.raises(ValueError, match="is not valid"):
        cron_check("61 9 * * *")


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"])
def test_an_expression_that_matches_no_date_is_refused(expression):
    with pytest.raises(ValueError, match="never fires: no date matches"):
        cron_check(expression)


def test_a_rare_but_real_date_is_accepted():
    assert cron_check("0 0 29 2 *") == "0 0 29 2 *"  # every leap year


def test_timezones_are_iana_names():
    assert timezone_check("Europe/Paris") == "Europe/Paris"
    assert timezone_check("UTC") == "UTC"
    with pytest.raises(ValueError, match="unknown timezone 'Mars/Olympus'"):
        timezone_check("Mars/Olympus")


def test_a_description_is_in_words():
    assert cron_describe("0 9 * * 1-5") == "At 09:00 AM, Monday through Friday"


def test_the_latest_match_counts_a_match_at_now_itself_in_the_zones_wall_time():
    now = datetime(2026, 3, 2, 8, 0, 30, tzinfo=UTC)  # 09:00:30 in Paris (UTC+1)
    latest = cron_latest("0 9 * * *", "Europe/Paris", now)
    assert (latest.hour, latest.minute, latest.day) == (9, 0, 2)
    before = cron_latest("0 9 * * *", "Europe/Paris", datetime(2026, 3, 2, 7, 59, tzinfo=UTC))
    assert before.day == 1


def test_matches_between_two_times_are_bounded_ordered_and_exclusive():
    after = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    until = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    ticks = cron_between("*/15 * * * *", "UTC", after, until, limit=10)
    assert [t.minute for t in ticks] == [15, 30, 45]
    paris = cron_between("0 9 * * *", "Europe/Paris", after - timedelta(days=2), until, limit=5)
    assert [t.astimezone(UTC).hour for t in paris] == [8, 8]
    newest = cron_between("* * * * *", "UTC", after, until, limit=2)
    assert [t.minute for t in newest] == [58, 59]  # a long gap keeps its latest matches
