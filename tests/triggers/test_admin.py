"""triggers.admin: the triggers and their events are listed, read-only (a trigger is
part of a workflow's approved definition; an event is a record)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runs.models import RunTrigger
from tests.factories import RunFactory, UserFactory
from triggers.models import EventTrigger, TriggerEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    client.force_login(UserFactory(username="root", superuser=True))
    return client


def test_the_events_list_shows_the_finished_run_the_run_it_started_and_refusals(staff):
    source = RunFactory()
    started = RunFactory(trigger=RunTrigger.EVENT)
    TriggerEvent.objects.create(
        workflow_name="report", position=0, event_key="run:a", outcome="started",
        source_run=source, run=started,
    )  # fmt: skip
    TriggerEvent.objects.create(
        workflow_name="report", position=0, event_key="run:b", outcome="refused",
        source_run=source, message="inputs invalid: `total` must be an integer",
    )  # fmt: skip
    page = staff.get(reverse("admin:triggers_triggerevent_changelist")).content.decode()
    assert f"run {started.pk}" in page or str(started) in page
    assert "Refused" in page


def test_triggers_and_events_cannot_be_added_changed_or_deleted_here(staff):
    trigger = EventTrigger.objects.create(
        workflow_name="report", position=0, kind="on_workflow", source="nightly"
    )
    assert staff.get(reverse("admin:triggers_eventtrigger_add")).status_code == 403
    change = staff.post(
        reverse("admin:triggers_eventtrigger_change", args=[trigger.pk]), {"source": "other"}
    )
    assert change.status_code == 403
    trigger.refresh_from_db()
    assert trigger.source == "nightly"
    delete = staff.post(reverse("admin:triggers_eventtrigger_delete", args=[trigger.pk]))
    assert delete.status_code == 403
