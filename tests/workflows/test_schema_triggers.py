"""workflows.schema_triggers: a workflow file's ``schedule`` and ``notifications`` blocks —
recipients, webhook URLs and cron rules checked where they are written, defaults filled."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workflows.schema_triggers import Notifications, ScheduleSpec


def test_notifications_default_to_failures_and_know_whether_they_can_send():
    quiet = Notifications()
    assert quiet.on == ["failed"]
    assert not quiet.has_channels()
    assert Notifications(email=["ops@example.com"]).has_channels()
    assert Notifications(webhook="https://hooks.example.com/x").has_channels()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"email": ["ops@example.com", "not an address"]}, "'not an address' is not an email"),
        ({"webhook": "ftp://example.com/x"}, "is not an http(s) URL"),
        ({"webhook_secret_env": "lower_case"}, "should match pattern"),
        ({"on": ["sometimes"]}, "Input should be 'failed', 'recovered' or 'succeeded'"),
    ],
)
def test_bad_notification_settings_are_refused_by_name(fields, message):
    with pytest.raises(ValidationError) as caught:
        Notifications(**fields)
    assert message in str(caught.value)


def test_a_schedule_is_normalised_and_defaults_to_utc_and_skip():
    schedule = ScheduleSpec(cron=" 0  9 * * 1-5")
    assert (schedule.cron, schedule.timezone, schedule.overlap) == ("0 9 * * 1-5", "UTC", "skip")
    assert schedule.catchup_window == 3600


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "* * * * * *"}, "a sixth field means seconds"),
        ({"cron": "0 0 30 2 *"}, "never fires: no date matches"),
        ({"cron": "0 9 * * *", "timezone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
        ({"cron": "0 9 * * *", "jitter": 3601}, "less than or equal to 3600"),
        ({"cron": "0 9 * * *", "pause_after_failures": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_schedules_are_refused_by_name(fields, message):
    with pytest.raises(ValidationError) as caught:
        ScheduleSpec(**fields)
    assert message in str(caught.value)
