"""triggers.tasks: the event task takes the event; the start task starts a run an event
created only while it is still pending."""

from __future__ import annotations

import pytest

from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_cancel, run_create
from triggers import tasks
from triggers.models import TriggerEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_event_task_takes_the_event_and_starts_the_run_in_process():
    from tests.triggers.test_events import NIGHTLY, activate, finished, report_flow

    nightly = activate(NIGHTLY)
    activate(report_flow())
    source = finished(nightly, inputs={"n": 5})
    TriggerEvent.objects.all().delete()
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()

    tasks.workflow_finished(source.pk)

    (event,) = TriggerEvent.objects.all()
    event.run.refresh_from_db()
    assert event.run.status == RunStatus.SUCCEEDED
    assert event.run.inputs == {"total": 10, "note": ""}


def test_a_run_cancelled_before_it_started_is_not_started():
    from tests.triggers.test_events import activate, report_flow

    report = activate(report_flow())
    run = run_create(workflow=report, trigger=RunTrigger.EVENT, inputs={"total": 1})
    run_cancel(run=run)
    tasks.start_run(run.pk)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.started_at is None


def test_the_sweep_task_takes_a_missed_event_and_starts_its_run():
    from tests.triggers.test_events import NIGHTLY, activate, finished, report_flow

    nightly = activate(NIGHTLY)
    activate(report_flow())
    source = finished(nightly, inputs={"n": 3})
    TriggerEvent.objects.all().delete()
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()

    tasks.sweep()

    (event,) = TriggerEvent.objects.filter(source_run=source)
    event.run.refresh_from_db()
    assert (event.run.status, event.run.inputs["total"]) == (RunStatus.SUCCEEDED, 6)


def test_the_beat_tick_polls_a_due_trigger_and_its_runs_finish_in_process(monkeypatch):
    from django.conf import settings

    from tests.fakes import FakeAPI
    from tests.triggers.polls_support import TOKEN, Orders, activate, load_orders_tool, poll_flow

    assert settings.CELERY_BEAT_SCHEDULE["flowpilot-poll-triggers"]["task"] == "triggers.polls_due"
    monkeypatch.setenv("ORDERS_TOKEN", TOKEN)
    fake = FakeAPI().start()
    try:
        Orders(fake).add(2)
        load_orders_tool(fake.url)
        activate(poll_flow())
        tasks.polls_tick()  # due since activation: claimed, polled, its runs started
        tasks.polls_tick()  # claimed already: no second poll
    finally:
        fake.stop()
    assert len(fake.requests("orders")) == 1
    runs = Run.objects.filter(trigger=RunTrigger.EVENT).order_by("pk")
    assert [(r.status, r.inputs["order_id"]) for r in runs] == [
        (RunStatus.SUCCEEDED, 1),
        (RunStatus.SUCCEEDED, 2),
    ]
