"""Sub-workflows on real Celery workers: the `workflow` step parks on its child run.

Two ``celery worker`` subprocesses on Redis and the shared PostgreSQL test database;
the child's steps call the loopback echo server of this process. The parent step
holds no worker while its child runs (its claim is handed to the child), and the
child's run-finished hook settles it.
"""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.services import run_cancel, run_create, run_enqueue, run_resume
from tests.celery_support import wait_until
from tests.conftest import statuses
from tests.runs.subflows import activate, caller_flow, child_flow, parent_flow

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers", "echo_tools"),
]

TIMEOUT = 60


def enqueue(workflow, tag: str) -> Run:
    return run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"tag": tag}))


def at_rest(run: Run, cluster, *, timeout: float = TIMEOUT) -> Run:
    """Wait until ``run`` and every run under it finished with no step in flight."""

    def done() -> bool:
        family = Run.objects.filter(pk=run.pk) | Run.objects.filter(parent_run=run)
        family = family | Run.objects.filter(parent_run__parent_run=run)
        finished = all(r.status in {"succeeded", "failed", "cancelled"} for r in family)
        busy = any(r.step_results.filter(status__in=["queued", "running"]).exists() for r in family)
        return finished and not busy

    try:
        wait_until(done, timeout=timeout, what=f"run {run.pk} and its children to finish")
    except AssertionError:
        run.refresh_from_db()
        detail = f"run {run.pk} is {run.status}: {statuses(run)}\n{cluster.logs()}"
        raise AssertionError(detail) from None
    run.refresh_from_db()
    return run


def test_a_nested_run_on_the_workers_succeeds_and_the_parent_step_parked(workers):
    activate(child_flow(delay=0.5))
    parent = activate(parent_flow())

    run = at_rest(enqueue(parent, "w1"), workers)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"said": "w1!ann", "tag": "w1"}
    child = Run.objects.get(parent_run=run)
    assert child.status == "succeeded"
    sub = run.step_results.get(step_id="sub")
    assert child.parent_step == sub
    # settled by the child's finish, not by a worker that waited for it
    assert [(e["status"], e["worker"]) for e in sub.attempt_log] == [
        ("succeeded", f"child run {child.pk}")
    ]
    assert sub.claim_token == f"child:{child.pk}"
    assert sub.lease_expires_at is None
    assert sub.output == {"tag": "w1", "loud": "w1!ann"}


def test_two_levels_of_children_on_the_workers(workers):
    activate(child_flow())
    activate(caller_flow("middle", "greet"))
    top = activate(caller_flow("top", "middle"))

    run = at_rest(enqueue(top, "deep"), workers)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"tag": "deep"}
    middle = Run.objects.get(parent_run=run)
    assert Run.objects.get(parent_run=middle).workflow.name == "greet"


def test_a_failed_child_fails_the_parent_step_naming_its_step_then_resume_resumes_it(
    workers, echo_tools
):
    activate(child_flow())
    parent = activate(parent_flow())
    echo_tools.fail("echo", status=404, times=1)

    run = at_rest(enqueue(parent, "f1"), workers)

    assert run.status == "failed"
    child = Run.objects.get(parent_run=run)
    assert child.status == "failed"
    error = run.step_results.get(step_id="sub").error
    assert error["type"] == "subworkflow_failed"
    assert f"workflow `greet` (child run {child.pk}) failed: step `say` failed" in error["message"]
    assert statuses(run) == {"after": "skipped", "sub": "failed"}

    run = at_rest(run_resume(run=run), workers)

    assert run.status == "succeeded", run.error_summary
    assert list(Run.objects.filter(parent_run=run)) == [child]  # the same child, resumed
    child.refresh_from_db()
    assert child.status == "succeeded"
    assert child.step_results.get(step_id="say").attempts == 2


def test_cancelling_the_parent_cancels_the_child_on_the_workers_and_resume_finishes(
    workers, echo_tools
):
    activate(child_flow(delay=2.0))
    parent = activate(parent_flow())
    run = enqueue(parent, "c1")
    wait_until(lambda: echo_tools.requests("echo"), timeout=TIMEOUT, what="the child's call")

    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True

    run = at_rest(run, workers)
    child = Run.objects.get(parent_run=run)
    assert (run.status, child.status) == ("cancelled", "cancelled")
    sub = run.step_results.get(step_id="sub")
    assert sub.status == "failed"
    assert sub.error["type"] == "subworkflow_failed"
    assert statuses(run) == {"after": "skipped", "sub": "failed"}

    echo_tools.heal()
    run = at_rest(run_resume(run=run), workers)
    assert run.status == "succeeded", run.error_summary
    assert list(Run.objects.filter(parent_run=run)) == [child]
    child.refresh_from_db()
    assert child.status == "succeeded"


def test_cancelling_only_the_child_fails_the_parked_step_and_the_parent(workers, echo_tools):
    activate(child_flow(delay=2.0))
    parent = activate(parent_flow())
    run = enqueue(parent, "c2")
    wait_until(lambda: echo_tools.requests("echo"), timeout=TIMEOUT, what="the child's call")
    child = Run.objects.get(parent_run=run)

    assert run_cancel(run=child) is True

    run = at_rest(run, workers)
    assert run.status == "failed"
    assert run.step_results.get(step_id="sub").error["message"] == (
        f"workflow `greet` (child run {child.pk}) was cancelled"
    )
