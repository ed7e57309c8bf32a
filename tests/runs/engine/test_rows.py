"""Writing a new run's rows (``runs.engine.rows.run_rows_create``): the Run and its
StepResults, all or none, with the values and ids ``save()``/``bulk_create()`` give; on
PostgreSQL in one statement."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from runs.engine.rows import run_rows_create
from runs.models import Run, StepResult
from runs.state import RunStatus, RunTrigger, StepStatus
from workflows.models import Workflow
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workflow() -> Workflow:
    steps = [{"id": sid, "kind": "transform", "expression": "x"} for sid in ("b", "a", "c")]
    workflow, _ = workflow_import(data={"name": "rows_demo", "steps": steps})
    return workflow


def new_rows(workflow: Workflow, step_ids: list[str]) -> tuple[Run, list[StepResult]]:
    run = Run(
        workflow=workflow, definition_hash="h", trigger=RunTrigger.CLI, inputs={"k": ["v", 1]}
    )
    return run, [StepResult(run=run, step_id=sid) for sid in step_ids]


def test_the_run_and_its_steps_are_stored_as_the_orm_stores_them(workflow):
    run, steps = new_rows(workflow, ["b", "a", "c"])

    with CaptureQueriesContext(connection) as sent:
        run_rows_create(run, steps)

    if connection.vendor == "postgresql":
        assert [q["sql"].split()[0] for q in sent.captured_queries] == ["WITH"]
    stored = Run.objects.get(pk=run.pk)
    assert (stored.uuid, stored.status, stored.inputs) == (run.uuid, RunStatus.PENDING, run.inputs)
    assert stored.created_at == run.created_at is not None
    by_id = {r.step_id: r for r in stored.step_results.all()}
    assert {s.step_id: s.pk for s in steps} == {sid: r.pk for sid, r in by_id.items()}
    for step in steps:
        row = by_id[step.step_id]
        assert (step.run_id, step.run) == (run.pk, run)
        assert (row.status, row.attempts, row.attempt_log) == (StepStatus.PENDING, 0, [])
        assert row.updated_at == step.updated_at
        assert (step._state.adding, step._state.db) == (False, "default")
    assert not run._state.adding
    # The instances behave as saved ones: a later save updates, not inserts.
    steps[0].attempts = 2
    steps[0].save(update_fields=["attempts"])
    assert StepResult.objects.get(pk=steps[0].pk).attempts == 2


def test_nothing_is_stored_when_a_step_row_is_refused(workflow):
    run, steps = new_rows(workflow, ["a", "a"])  # one step id twice: the unique constraint

    with pytest.raises(IntegrityError):
        run_rows_create(run, steps)

    assert not Run.objects.filter(uuid=run.uuid).exists()
    assert not StepResult.objects.exists()


def test_every_column_of_mixed_step_rows_reads_back_as_written(workflow):
    """Rows unlike each other (a restart's reused steps carry outputs, errors and times;
    new ones carry none) and hostile text: each column, stored per step, reads back as
    the instance held it — on PostgreSQL through one array per column."""
    at = datetime(2026, 11, 27, 9, 30, 1, 123456, tzinfo=UTC)
    # (NUL itself never reaches a row: the checkpoint escapes it, tools.jsondata)
    hostile = "x'); DROP TABLE runs_run; -- \\ \" {\"a\": [1]} $1 %s ␀0 é"
    run, _ = new_rows(workflow, [])
    steps = [
        StepResult(run=run, step_id="new"),
        StepResult(
            run=run,
            step_id="o'neil \"quoted\"",
            status=StepStatus.SUCCEEDED,
            attempts=3,
            attempt_log=[{"status": "failed", "error": {"message": hostile}}, {"n": 2.5}],
            inputs={"q": hostile, "list": [None, True, 1, "s"]},
            output={"nested": {"deep": [hostile, {"k": None}]}, "n": 10**15},
            output_truncated=True,
            output_bytes=2**40,
            error=None,
            started_at=at,
            finished_at=at,
            reused=True,
            attempt_limit=7,
        ),
        StepResult(
            run=run,
            step_id="failed",
            status=StepStatus.FAILED,
            error={"type": "tool_error", "message": hostile, "retryable": False},
            output=[],
            inputs="just a string",
            lease_expires_at=at,
            claim_token="t" * 32,
            worker="w" * 255,
        ),
    ]

    run_rows_create(run, steps)

    columns = [f.attname for f in StepResult._meta.concrete_fields]
    for step in steps:
        stored = StepResult.objects.get(pk=step.pk)
        for name in columns:
            assert getattr(stored, name) == getattr(step, name), (step.step_id, name)
