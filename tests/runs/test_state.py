"""``runs.state``: the transition tables, the one conditional write, the error records."""

from __future__ import annotations

import pytest

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
    run_transition,
    step_transition,
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
