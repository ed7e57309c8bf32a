"""triggers.events: another workflow's finished run starts a run of the waiting one,
with its inputs mapped from the run, once per event — whatever delivers the event
twice — and a chain of workflows triggering each other ends."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_create, run_execute
from triggers.events import event_of, on_workflow_finished, triggers_sync_declared, waited_for
from triggers.models import EventOutcome, EventTrigger, TriggerEvent
from workflows.models import Workflow
from workflows.services import workflow_activate_trusted, workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

NIGHTLY = {
    "name": "nightly",
    "inputs": {"n": {"type": "integer", "default": 1}},
    "steps": [
        {
            "id": "double",
            "kind": "transform",
            "expression": "sum([n, n])",
            "input_mapping": {"n": "$input.n"},
        }
    ],
}


def report_flow(*, status=("succeeded",), inputs=None, name="report", waits_for="nightly") -> dict:
    return {
        "name": name,
        "inputs": {"total": {"type": "integer"}, "note": {"type": "string", "default": ""}},
        "steps": [
            {
                "id": "echo",
                "kind": "transform",
                "expression": "total",
                "input_mapping": {"total": "$input.total"},
            }
        ],
        "triggers": [
            {
                "on_workflow": {"name": waits_for, "status": list(status)},
                "inputs": inputs if inputs is not None else {"total": "$event.outputs.double"},
            }
        ],
    }


def activate(data: dict):
    workflow, _ = workflow_import(data=data)
    return workflow_activate_trusted(workflow=workflow)


class Starts:
    """Records the runs the events started, instead of queuing them."""

    def __init__(self) -> None:
        self.run_ids: list[int] = []

    def __call__(self, run_id: int) -> None:
        self.run_ids.append(run_id)


def finished(workflow, *, inputs=None, status: str | None = None) -> Run:
    run = run_execute(run=run_create(workflow=workflow, trigger=RunTrigger.CLI, inputs=inputs))
    if status is not None:  # as if it had ended so (its outputs kept)
        Run.objects.filter(pk=run.pk).update(status=status, error_summary="step `x` failed")
        run.refresh_from_db()
    return run


def test_a_finished_run_starts_the_waiting_workflow_with_its_outputs_as_inputs():
    nightly = activate(NIGHTLY)
    activate(report_flow(inputs={"total": "$event.outputs.double", "note": "$event.workflow"}))
    assert waited_for(workflow_name="nightly")

    source = run_execute(run=run_create(workflow=nightly, trigger=RunTrigger.CLI, inputs={"n": 21}))

    (event,) = TriggerEvent.objects.all()  # the hook took the event when the run finished
    assert (event.outcome, event.source_run_id, event.chain) == (EventOutcome.STARTED, source.pk, 1)
    started = event.run
    assert started.trigger == RunTrigger.EVENT
    assert started.inputs == {"total": 42, "note": "nightly"}
    assert started.workflow.name == "report"
    started.refresh_from_db()
    assert started.status == RunStatus.SUCCEEDED  # started on commit (in process here)
    assert started.outputs == {"echo": 42}


def test_an_event_delivered_twice_or_at_once_by_two_workers_starts_one_run():
    nightly = activate(NIGHTLY)
    activate(report_flow())
    source = finished(nightly, inputs={"n": 2})
    TriggerEvent.objects.all().delete()
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()

    starts = Starts()
    first = on_workflow_finished(run_id=source.pk, start=starts)
    again = on_workflow_finished(run_id=source.pk, start=starts)

    assert len(first) == 1
    assert again == []
    assert Run.objects.filter(trigger=RunTrigger.EVENT).count() == 1
    assert starts.run_ids == [first[0].run_id]


@pytest.mark.postgres
def test_two_workers_taking_the_same_event_at_once_start_one_run():
    if connection.vendor != "postgresql":
        pytest.skip("the race between connections is PostgreSQL's")
    nightly = activate(NIGHTLY)
    activate(report_flow())
    source = finished(nightly)
    TriggerEvent.objects.all().delete()
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []
    starts = Starts()

    def take() -> None:
        try:
            barrier.wait()
            on_workflow_finished(run_id=source.pk, start=starts)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert Run.objects.filter(trigger=RunTrigger.EVENT).count() == 1
    assert TriggerEvent.objects.count() == 1
    assert len(starts.run_ids) == 1


def test_only_the_ends_the_trigger_names_start_a_run():
    nightly = activate(NIGHTLY)
    activate(report_flow(status=["failed"], inputs={"total": 0, "note": "$event.error"}))
    starts = Starts()

    ok = finished(nightly)
    assert on_workflow_finished(run_id=ok.pk, start=starts) == []

    failed = finished(nightly, status=RunStatus.FAILED)
    (event,) = on_workflow_finished(run_id=failed.pk, start=starts)
    assert event.run.inputs == {"total": 0, "note": "step `x` failed"}


def test_inputs_the_workflow_refuses_record_the_event_refused_and_start_nothing():
    nightly = activate(NIGHTLY)
    activate(report_flow(inputs={"total": "$event.workflow"}))  # text for an integer

    source = finished(nightly)  # the hook takes the event as the run finishes

    (event,) = TriggerEvent.objects.all()
    assert (event.outcome, event.run, event.source_run_id) == (
        EventOutcome.REFUSED,
        None,
        source.pk,
    )
    assert "total" in event.message
    assert not Run.objects.filter(trigger=RunTrigger.EVENT).exists()
    assert on_workflow_finished(run_id=source.pk, start=Starts()) == []  # taken: once


def test_two_workflows_triggering_each_other_stop_at_the_chain_limit(settings):
    settings.FLOWPILOT_TRIGGER_MAX_CHAIN = 3
    ping = {**report_flow(name="ping", waits_for="pong", inputs={"total": 1})}
    pong = {**report_flow(name="pong", waits_for="ping", inputs={"total": 2})}
    activate(ping)
    pong_version = activate(pong)

    run_execute(run=run_create(workflow=pong_version, trigger=RunTrigger.CLI, inputs={"total": 0}))

    events = list(TriggerEvent.objects.order_by("id"))
    assert [e.chain for e in events] == [1, 2, 3, 4]
    assert [e.outcome for e in events] == [EventOutcome.STARTED] * 3 + [EventOutcome.REFUSED]
    assert "FLOWPILOT_TRIGGER_MAX_CHAIN" in events[-1].message
    assert Run.objects.filter(trigger=RunTrigger.EVENT).count() == 3


def test_validation_runs_replays_and_workflows_no_longer_active_start_nothing():
    nightly = activate(NIGHTLY)
    report = activate(report_flow())
    starts = Starts()
    validation = finished(nightly)
    Run.objects.filter(pk=validation.pk).update(trigger=RunTrigger.VALIDATION)
    TriggerEvent.objects.all().delete()
    assert on_workflow_finished(run_id=validation.pk, start=starts) == []

    report.status = "archived"
    report.save(update_fields=["status"])
    assert on_workflow_finished(run_id=finished(nightly).pk, start=starts) == []


def test_activating_a_version_makes_the_trigger_rows_match_it():
    activate(report_flow())
    assert list(EventTrigger.objects.values_list("workflow_name", "position", "source")) == [
        ("report", 0, "nightly")
    ]
    first = EventTrigger.objects.get()
    activate({**report_flow(), "description": "the same trigger"})
    assert EventTrigger.objects.get().pk == first.pk  # kept, with the time it waits since
    newer = activate({**report_flow(waits_for="other"), "description": "v2"})
    assert list(EventTrigger.objects.values_list("source", flat=True)) == ["other"]
    pending, _ = workflow_import(data={**report_flow(), "description": "not active"})
    triggers_sync_declared(workflow=pending)  # the active version's triggers, not this one's
    assert list(EventTrigger.objects.values_list("source", flat=True)) == ["other"]
    activate({**report_flow(), "triggers": [], "description": "v3"})
    assert not EventTrigger.objects.exists()
    activate({**report_flow(), "description": "v4"})
    newer.refresh_from_db()
    Workflow.objects.filter(name="report").update(status="archived")
    triggers_sync_declared(workflow=newer)  # no version active: nothing waits
    assert not EventTrigger.objects.exists()


def test_the_event_a_trigger_reads():
    nightly = activate(NIGHTLY)
    run = finished(nightly, inputs={"n": 3})
    event = event_of(run)
    assert event["outputs"] == {"double": 6}
    assert (event["run_id"], event["workflow"], event["status"]) == (run.pk, "nightly", "succeeded")
    assert event["run_uuid"] == str(run.uuid)
    assert event["finished_at"] == run.finished_at.isoformat()


def test_the_sweep_takes_an_event_the_hook_missed_once_and_leaves_older_runs_alone():
    from datetime import timedelta

    from django.utils import timezone

    from triggers.events import triggers_sweep

    nightly = activate(NIGHTLY)
    before = finished(nightly)  # finished before any trigger waited: never an event
    activate(report_flow())
    missed = finished(nightly, inputs={"n": 4})
    TriggerEvent.objects.all().delete()  # as if its process died before the hook
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()
    starts = Starts()

    (event,) = triggers_sweep(now=timezone.now(), start=starts)
    assert (event.source_run_id, event.run.inputs["total"]) == (missed.pk, 8)
    assert starts.run_ids == [event.run_id]
    assert triggers_sweep(now=timezone.now(), start=starts) == []  # taken: once
    later = timezone.now() + timedelta(minutes=61)
    TriggerEvent.objects.all().delete()
    assert triggers_sweep(now=later, start=starts) == []  # out of the window
    assert before.pk not in {e.source_run_id for e in TriggerEvent.objects.all()}


def test_a_workflow_waiting_for_one_it_runs_as_a_step_stops_at_the_chain_limit(settings):
    """L runs `nightly` as a step and waits for `nightly`'s runs: each L run's child
    ends, which starts another L. The child counts as its top-level run, so the chain
    grows and ends at the limit."""
    settings.FLOWPILOT_TRIGGER_MAX_CHAIN = 3
    activate(NIGHTLY)
    looping = {
        "name": "looping",
        "inputs": {"total": {"type": "integer", "default": 1}},
        "steps": [
            {"id": "inner", "kind": "workflow", "workflow": "nightly",
             "input_mapping": {"n": "$input.total"}},
        ],
        "triggers": [
            {"on_workflow": {"name": "nightly"}, "inputs": {"total": "$event.outputs.double"}}
        ],
    }  # fmt: skip
    version = activate(looping)

    run_execute(run=run_create(workflow=version, trigger=RunTrigger.CLI))

    events = list(TriggerEvent.objects.order_by("id"))
    assert [e.chain for e in events] == [1, 2, 3, 4]
    assert events[-1].outcome == EventOutcome.REFUSED
    assert Run.objects.filter(trigger=RunTrigger.EVENT).count() == 3


def test_the_sweep_starts_an_events_run_whose_start_was_lost():
    from datetime import timedelta

    from django.utils import timezone

    from triggers.events import START_GRACE_SECONDS, triggers_sweep

    nightly = activate(NIGHTLY)
    activate(report_flow())

    def lost(run_id: int) -> None:
        raise ConnectionError("the broker is unreachable")

    source = finished(nightly)
    TriggerEvent.objects.all().delete()
    Run.objects.filter(trigger=RunTrigger.EVENT).delete()
    (event,) = on_workflow_finished(run_id=source.pk, start=lost)  # logged, not raised
    assert Run.objects.get(pk=event.run_id).status == RunStatus.PENDING

    starts = Starts()
    assert triggers_sweep(now=timezone.now(), start=starts) == []
    assert starts.run_ids == []  # within the grace: its start may still come
    later = timezone.now() + timedelta(seconds=START_GRACE_SECONDS + 1)
    triggers_sweep(now=later, start=starts)
    assert starts.run_ids == [event.run_id]
