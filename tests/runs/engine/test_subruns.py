"""Child runs of `workflow` steps seen from their parent's cancel and resume
(``runs.engine.subruns``), under the Celery driver, in process.

A ``Bus`` stands in for the broker and ``Tasks`` (``conftest.py``) for the tasks a
sub-workflow sends by name; ``settle`` delivers everything the way workers would.
Settling a parked step: ``celery/test_children.py``.
"""

from __future__ import annotations

import pytest

from runs.engine.celery.run import run_context, run_start
from runs.engine.kinds import workflow as workflow_kind
from runs.models import Run, StepResult
from runs.services import run_cancel, run_prepare_resume
from tests.conftest import statuses
from tests.runs.engine.conftest import settle, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_api")]


def test_a_failed_child_fails_the_parked_step_and_resume_resumes_the_same_child(tasks, echo_api):
    echo_api.fail("echo", status=404, times=1)
    run, bus = start("f1")
    settle(bus, tasks)

    run.refresh_from_db()
    child = Run.objects.get(parent_run=run)
    assert (run.status, child.status) == ("failed", "failed")
    error = run.step_results.get(step_id="sub").error
    assert error["type"] == "subworkflow_failed"
    assert "failed: step `say` failed (http_error)" in error["message"]

    run = run_prepare_resume(run=run)
    child.refresh_from_db()
    assert child.status == "pending"  # prepared with its parent
    run_start(run=run, publish=bus)
    settle(bus, tasks)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert list(Run.objects.filter(parent_run=run)) == [child]


def test_cancelling_the_parent_fails_its_parked_step_and_cancels_the_child(tasks):
    run, bus = start("c1")
    bus.drain()  # parked; the child is not started yet
    child = Run.objects.get(parent_run=run)

    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True

    child.refresh_from_db()
    sub = run.step_results.get(step_id="sub")
    assert child.status == "cancelled"
    assert (sub.status, sub.claim_token) == ("failed", "")
    assert sub.error["message"] == (
        "the run was cancelled while this step waited for its child run"
    )
    settle(bus, tasks)  # the start message finds the child cancelled: nothing runs
    assert statuses(child) == {"say": "skipped", "shout": "skipped"}


def test_a_child_that_succeeded_already_is_read_not_run_again(tasks):
    """A parent step delivered again after its child succeeded (a forced resume)."""
    run, bus = start("r1")
    settle(bus, tasks)
    run.refresh_from_db()
    child = Run.objects.get(parent_run=run)
    sub = run.step_results.get(step_id="sub")
    StepResult.objects.filter(pk=sub.pk).update(status="running", claim_token="")
    with run_context(run) as ctx:
        step = ctx.spec.step("sub")
        attempt = workflow_kind.execute_workflow_step(ctx, step, {"tag": "r1", "name": "ann"})
    assert attempt.output == {"tag": "r1", "loud": "r1!ann"}
    assert Run.objects.filter(parent_run=run).count() == 1
    assert Run.objects.get(parent_run=run) == child
