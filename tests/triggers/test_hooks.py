"""triggers.hooks: a finished run is queued as an event only when some trigger waits
for its workflow (and never for a validation run or a replay); activating a version
makes the trigger rows match it."""

from __future__ import annotations

import pytest

from runs.models import RunTrigger
from tests.factories import RunFactory
from triggers import hooks
from triggers.models import EventTrigger

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(hooks, "task_send", lambda task, run_id: sent.append(run_id))
    return sent


def test_a_run_is_queued_as_an_event_only_when_a_trigger_waits_for_its_workflow(
    queued, django_assert_num_queries, settings
):
    run = RunFactory(trigger=RunTrigger.CLI)
    name = run.workflow.name
    with django_assert_num_queries(1):  # the triggers, read once...
        hooks.run_finished(run_id=run.pk, trigger=RunTrigger.CLI, workflow=name)
    with django_assert_num_queries(0):  # ...then trusted for a while: no query per run
        hooks.run_finished(run_id=run.pk, trigger=RunTrigger.CLI, workflow=name)
    assert queued == []

    EventTrigger.objects.create(workflow_name="report", position=0, kind="on_workflow", source=name)
    hooks.run_finished(run_id=run.pk, trigger=RunTrigger.CLI, workflow=name)
    assert queued == []  # not seen yet: the sweep takes such an event (test_events)
    settings.FLOWPILOT_TRIGGER_SOURCES_SECONDS = 0
    hooks.run_finished(run_id=run.pk, trigger=RunTrigger.CLI, workflow=name)
    assert queued == [run.pk]
    with django_assert_num_queries(2):  # announced without the name: read with the rest
        hooks.run_finished(run_id=run.pk, trigger=RunTrigger.CLI)
    assert queued == [run.pk, run.pk]


@pytest.mark.parametrize("trigger", [RunTrigger.VALIDATION, RunTrigger.REPLAY])
def test_a_validation_run_or_a_replay_is_no_event(queued, trigger, django_assert_num_queries):
    run = RunFactory(trigger=trigger)
    EventTrigger.objects.create(
        workflow_name="report", position=0, kind="on_workflow", source=run.workflow.name
    )
    with django_assert_num_queries(0):
        hooks.run_finished(run_id=run.pk, trigger=trigger)
    assert queued == []


def test_activating_a_version_syncs_its_triggers():
    from tests.triggers.test_events import activate, report_flow

    version = activate(report_flow(waits_for="nightly"))
    EventTrigger.objects.all().delete()
    hooks.workflow_activated(workflow_id=version.pk)
    assert list(EventTrigger.objects.values_list("source", "statuses")) == [
        ("nightly", "succeeded")
    ]
