"""``runs.state``: the transition tables, the one conditional write, the error records."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.models import Run, StepResult
from runs.state import (
    RUN_TRANSITIONS,
    STEP_IN_FLIGHT,
    STEP_TERMINAL,
    STEP_TRANSITIONS,
    InterruptedNonIdempotent,
    RunStatus,
    RunTrigger,
    StepStatus,
    StepUnstartable,
    WorkerLost,
    rows_write,
    run_transition,
    run_write,
    step_claim,
    step_claim_write,
    step_transition,
    step_write,
)
from tools.errors import ToolConfigError
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db


def test_every_status_has_a_row_in_its_transition_table():
    assert set(STEP_TRANSITIONS) == set(StepStatus.values)
    assert set(RUN_TRANSITIONS) == set(RunStatus.values)
    assert all(t in StepStatus.values for targets in STEP_TRANSITIONS.values() for t in targets)
    assert STEP_TRANSITIONS[StepStatus.SUCCEEDED] == frozenset()
    assert STEP_IN_FLIGHT.isdisjoint(STEP_TERMINAL)


@pytest.fixture
def run():
    workflow, _ = workflow_import(
        data={"name": "state_demo", "steps": [{"id": "a", "kind": "transform", "expression": "x"}]}
    )
    run = Run.objects.create(workflow=workflow, definition_hash="h", trigger=RunTrigger.CLI)
    StepResult.objects.create(run=run, step_id="a")
    return run


def test_the_database_accepts_every_trigger_and_refuses_others(run):
    from django.db import IntegrityError, transaction

    for trigger in ("webhook", "mcp", *RunTrigger.values):
        Run.objects.create(workflow=run.workflow, definition_hash="h", trigger=trigger)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(workflow=run.workflow, definition_hash="h", trigger="telepathy")
    assert set(Run.objects.values_list("trigger", flat=True)) == set(RunTrigger.values)


def test_a_step_moves_only_along_the_table_and_the_instance_follows(run):
    result = run.step_results.get()

    assert step_transition(result, StepStatus.SUCCEEDED, output=1) == 0  # pending: not allowed
    assert step_transition(result, StepStatus.RUNNING) == 1
    assert step_transition(result, StepStatus.SUCCEEDED, output={"v": 1}) == 1
    assert step_transition(result, StepStatus.RUNNING) == 0  # a succeeded step never runs again

    stored = StepResult.objects.get(pk=result.pk)
    assert (stored.status, stored.output) == (result.status, result.output)
    assert (stored.status, stored.output) == (StepStatus.SUCCEEDED, {"v": 1})


def test_the_callers_own_conditions_stay(run):
    rows = StepResult.objects.filter(run=run, claim_token="someone-else")

    assert step_transition(rows, StepStatus.RUNNING) == 0
    assert run.step_results.get().status == StepStatus.PENDING


def test_a_run_moves_only_along_the_table(run):
    assert run_transition(run, RunStatus.SUCCEEDED) == 0
    assert run_transition(run, RunStatus.RUNNING) == 1
    assert run_transition(run, RunStatus.SUCCEEDED, error_summary="") == 1
    assert run_transition(run, RunStatus.PENDING) == 0
    assert Run.objects.get(pk=run.pk).status == run.status == RunStatus.SUCCEEDED


def test_a_claim_needs_a_pending_step_of_a_running_run(run):
    result = run.step_results.get()
    now = timezone.now()

    assert step_claim(result, run_status=RunStatus.RUNNING, started_at=now) == 0  # run pending
    run_transition(run, RunStatus.RUNNING)
    step_transition(result, StepStatus.QUEUED)
    assert step_claim(result, run_status=RunStatus.RUNNING, started_at=now) == 0  # not pending
    step_transition(result, StepStatus.PENDING)
    assert step_claim(result, run_status=RunStatus.RUNNING, started_at=now, error=None) == 1

    stored = StepResult.objects.get(pk=result.pk)
    assert (stored.status, stored.started_at) == (StepStatus.RUNNING, now) == (
        result.status,
        result.started_at,
    )


def test_a_claim_with_an_expression_is_built_by_the_orm_and_keeps_its_conditions(run):
    result = run.step_results.get()

    assert step_claim(result, run_status=RunStatus.RUNNING, attempts=F("attempts") + 1) == 0
    run_transition(run, RunStatus.RUNNING)
    assert step_claim(result, run_status=RunStatus.RUNNING, attempts=F("attempts") + 1) == 1
    assert StepResult.objects.get(pk=result.pk).attempts == 1


def test_one_row_with_plain_values_is_stored_as_the_orm_stores_it(run):
    """The precompiled statement prepares values through the fields: JSON (NUL-free
    text, nested data), datetimes (aware, to the database's form), booleans, null."""
    result = run.step_results.get()
    now = timezone.now()
    step_transition(result, StepStatus.RUNNING)

    step_transition(
        result, StepStatus.SUCCEEDED,
        output={"a": [1, "ü", None, {"b": True}]}, output_truncated=True, error=None,
        finished_at=now, attempt_log=[{"attempt": 1}], updated_at=now,
    )  # fmt: skip

    stored = StepResult.objects.get(pk=result.pk)
    assert stored.output == {"a": [1, "ü", None, {"b": True}]}
    assert (stored.output_truncated, stored.error, stored.finished_at) == (True, None, now)
    assert stored.attempt_log == [{"attempt": 1}]
    assert StepResult.objects.filter(pk=result.pk, error__isnull=True).exists()


def test_an_unknown_target_is_refused(run):
    with pytest.raises(ValueError, match="unknown status 'done'"):
        step_transition(run.step_results.all(), "done")


def test_the_error_records_keep_their_stored_form():
    assert InterruptedNonIdempotent("post").record() == {
        "type": "interrupted_non_idempotent",
        "message": "step `post` was interrupted during a non-idempotent call; it was not "
        "repeated. Check the target system, then restart from this step.",
        "retryable": False,
    }
    assert WorkerLost("gone").record() == {
        "type": "worker_lost",
        "message": "gone",
        "retryable": True,
    }
    assert WorkerLost("gone", retryable=False).record()["retryable"] is False
    assert StepUnstartable(ToolConfigError("x" * 5000)).record() == {
        "type": "tool_config_invalid",
        "message": "x" * 4000,
        "retryable": False,
    }


@pytest.fixture
def two_steps(run):
    """The run, running, with step ``a`` running and a pending step ``b``."""
    run_transition(run, RunStatus.RUNNING)
    a = run.step_results.get()
    step_transition(a, StepStatus.RUNNING)
    b = StepResult.objects.create(run=run, step_id="b")
    return a, b


def test_a_batch_of_row_writes_lands_whole_and_the_instances_follow(two_steps):
    a, b = two_steps
    now = timezone.now()
    writes = [
        step_write(a, StepStatus.SUCCEEDED, output={"v": [1, "ü"]}, finished_at=now),
        step_claim_write(b, run_status=RunStatus.RUNNING, started_at=now),
    ]

    with CaptureQueriesContext(connection) as sent:
        assert rows_write(writes, required=1) == [1, 1]

    if connection.vendor == "postgresql":  # one statement: a CTE per write
        assert [q["sql"].split()[0] for q in sent.captured_queries if "UPDATE" in q["sql"]] == [
            "WITH"
        ]
    assert (a.status, a.output) == ("succeeded", {"v": [1, "ü"]})
    assert (b.status, b.started_at) == ("running", now)
    stored = {r.step_id: r for r in StepResult.objects.all()}
    assert (stored["a"].status, stored["a"].output) == ("succeeded", {"v": [1, "ü"]})
    assert (stored["b"].status, stored["b"].started_at) == ("running", now)


def test_the_writes_decided_from_an_outcome_wait_for_it_to_land(two_steps):
    """An outcome that changed no row (another writer moved the step) takes the writes
    after it along: none of them lands."""
    a, b = two_steps
    StepResult.objects.filter(pk=a.pk).update(status=StepStatus.PENDING)
    writes = [
        step_write(a, StepStatus.SUCCEEDED, output=1),
        step_claim_write(b, run_status=RunStatus.RUNNING),
    ]

    assert rows_write(writes, required=1) == [0, 0]

    assert (a.status, b.status) == ("running", "pending")  # the instances did not move
    assert sorted(StepResult.objects.values_list("step_id", "status")) == [
        ("a", "pending"),
        ("b", "pending"),
    ]


def test_writes_not_decided_from_others_land_on_their_own(two_steps):
    a, b = two_steps
    run_transition(a.run, RunStatus.CANCELLED)  # no claim in a run that is not running
    writes = [
        step_write(a, StepStatus.SUCCEEDED, output=1),
        step_claim_write(b, run_status=RunStatus.RUNNING),
    ]

    assert rows_write(writes) == [1, 0]

    assert sorted(StepResult.objects.values_list("step_id", "status")) == [
        ("a", "succeeded"),
        ("b", "pending"),
    ]


def test_a_runs_start_and_its_first_claim_land_together_or_not_at_all(run):
    """``run_write`` of the run's start, ahead of a claim that stands on it (no look at
    the run's status of its own): both land, or — the run not pending any more — none."""
    step = run.step_results.get()
    now = timezone.now()
    start = run_write(run, RunStatus.RUNNING, replay="started_at", started_at=now)
    claim = step_claim_write(step, run_status=None, started_at=now, updated_at=now)

    assert rows_write([start, claim], required=1) == [1, 1]

    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.started_at) == ("running", now)
    assert (run.status, step.status) == ("running", "running")
    assert StepResult.objects.get(pk=step.pk).status == "running"

    other = Run.objects.create(workflow=run.workflow, definition_hash="h", trigger="cli")
    pending = StepResult.objects.create(run=other, step_id="a")
    run_transition(other, RunStatus.CANCELLED)
    late = timezone.now()
    writes = [
        run_write(other, RunStatus.RUNNING, replay="started_at", started_at=late),
        step_claim_write(pending, run_status=None, started_at=late, updated_at=late),
    ]
    assert rows_write(writes, required=1) == [0, 0]
    assert StepResult.objects.get(pk=pending.pk).status == "pending"
    assert Run.objects.get(pk=other.pk).status == "cancelled"


def test_a_run_write_sent_again_after_it_landed_counts_as_written(run):
    """The same prepared write, sent again (its acknowledgement lost): the run already
    holds its target with exactly the replay field's value — written, not refused; a
    write of the same move with another value is refused."""
    run_transition(run, RunStatus.RUNNING, started_at=timezone.now())
    now = timezone.now()
    finish = run_write(run, RunStatus.SUCCEEDED, replay="finished_at", finished_at=now, outputs={})

    assert rows_write([finish]) == [1]
    assert rows_write([finish]) == [1]  # sent again
    other = run_write(run, RunStatus.SUCCEEDED, replay="finished_at", finished_at=timezone.now())
    assert rows_write([other]) == [0]
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.finished_at, stored.outputs) == ("succeeded", now, {})


def test_a_run_write_names_a_replay_field_it_writes(run):
    with pytest.raises(ValueError, match="'finished_at' is not among the fields written"):
        run_write(run, RunStatus.SUCCEEDED, replay="finished_at", outputs={})
