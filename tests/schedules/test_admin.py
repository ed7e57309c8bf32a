"""The schedules in the admin: on the workflow page, the form's checks, actions, fire log,
retention's last pass; the deliveries list."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from notifications.models import Delivery
from runs.models import RunTrigger
from runs.services import run_create
from schedules.models import RetentionSweep, Schedule
from schedules.services import schedule_create, schedule_pause

pytestmark = pytest.mark.django_db


def test_the_workflow_page_lists_its_schedules(admin_client, active_flow):
    schedule = schedule_create(workflow_name="nightly", name="morning", cron="0 9 * * *")
    schedule_pause(schedule=schedule, reason="holiday")

    page = admin_client.get(reverse("admin:workflows_workflow_change", args=[active_flow.pk]))

    text = page.content.decode()
    assert reverse("admin:schedules_schedule_change", args=[schedule.pk]) in text
    assert "morning</a> — 0 9 * * * (UTC) — paused: holiday" in text
    assert "?workflow_name=nightly" in text


def test_the_schedule_page_shows_its_fire_log_in_words(admin_client, active_flow):
    schedule = schedule_create(workflow_name="nightly", name="morning", cron="0 9 * * 1-5")
    schedule_pause(schedule=schedule, reason="holiday")

    listing = admin_client.get(reverse("admin:schedules_schedule_changelist")).content.decode()
    page = admin_client.get(reverse("admin:schedules_schedule_change", args=[schedule.pk]))

    assert "At 09:00 AM, Monday through Friday" in listing
    assert "Schedule paused" in page.content.decode()
    fires = admin_client.get(reverse("admin:schedules_schedulefire_changelist"))
    assert "nightly/morning" in fires.content.decode()


def test_the_add_form_checks_the_rule_and_creates_the_beat_entry(admin_client, active_flow):
    add = reverse("admin:schedules_schedule_add")
    form = {
        "workflow_name": "nightly", "name": "hourly", "cron": "* * * * * *", "timezone": "UTC",
        "inputs": "{}", "overlap": "skip", "catchup_window_seconds": "60", "jitter_seconds": "0",
        "fires-TOTAL_FORMS": "0", "fires-INITIAL_FORMS": "0",
    }  # fmt: skip
    refused = admin_client.post(add, form)
    assert "a sixth field means seconds" in refused.content.decode()
    never = admin_client.post(add, {**form, "cron": "0 0 30 2 *"})
    assert "never fires: no date matches" in never.content.decode()
    absurd = admin_client.post(add, {**form, "cron": "", "interval_seconds": str(10**12)})
    assert "`interval` must be at most 31622400 seconds" in absurd.content.decode()
    unknown = admin_client.post(add, {**form, "cron": "0 * * * *", "workflow_name": "ghost"})
    assert "no stored workflow is named &#x27;ghost&#x27;" in unknown.content.decode()

    saved = admin_client.post(add, {**form, "cron": "0 * * * *"})
    assert saved.status_code == 302
    assert Schedule.objects.get().periodic_task.crontab.minute == "0"


def test_pause_and_resume_actions(admin_client, active_flow):
    schedule = schedule_create(workflow_name="nightly", name="s", interval=60)
    changelist = reverse("admin:schedules_schedule_changelist")
    for action, paused in (("pause", True), ("resume", False)):
        admin_client.post(changelist, {"action": action, "_selected_action": [schedule.pk]})
        schedule.refresh_from_db()
        assert schedule.paused is paused


def test_the_retention_list_says_when_it_last_ran(admin_client):
    url = reverse("admin:schedules_retentionsweep_changelist")
    assert "never ran yet" in admin_client.get(url).content.decode()
    RetentionSweep.objects.create(started_at=datetime(2026, 5, 4, 3, 0, tzinfo=UTC), total=7)
    assert "last ran 2026-05-04 03:00 UTC" in admin_client.get(url).content.decode()


def test_the_deliveries_list(admin_client, active_flow):
    run = run_create(workflow=active_flow, trigger=RunTrigger.CLI)
    Delivery.objects.create(run=run, channel="webhook", event="failed", target="http://x/hook")
    page = admin_client.get(reverse("admin:notifications_delivery_changelist"))
    assert "http://x/hook" in page.content.decode()
