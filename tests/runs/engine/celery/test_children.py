"""Child runs of `workflow` steps on Celery (``runs.engine.celery.children``), in process:
the step parks on its child, the child is started by ``runs.start_run`` and its finish
settles the parked step (``runs.settle_parent_step``).

A ``Bus`` stands in for the broker (step tasks) and ``Tasks`` (``tests/runs/engine/
conftest.py``) for the two tasks sent by name; ``settle`` delivers everything the way
workers would. Real workers: ``tests/runs/test_celery_subworkflows.py``.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from runs import hooks
from runs import tasks as runs_tasks
from runs.engine.celery import children, sweep
from runs.engine.celery.run import run_context
from runs.engine.kinds import workflow as workflow_kind
from runs.models import Run, StepResult
from tests.runs.engine.conftest import settle, start

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_api")]


def test_the_step_parks_on_its_child_and_the_childs_finish_settles_it(tasks):
    run, bus = start("p1")
    bus.drain()  # the parent's `sub` task: creates the child and parks

    sub = run.step_results.get(step_id="sub")
    child = Run.objects.get(parent_run=run)
    assert (sub.status, sub.claim_token, sub.lease_expires_at) == (
        "running",
        f"child:{child.pk}",
        None,
    )
    assert sub.output is None  # the parking task's own result was discarded
    assert child.status == "pending"
    assert tasks.sent == [(workflow_kind.START_TASK, [child.pk])]

    # the sweeper never takes back a parked step, however late it is
    far = timezone.now() + timedelta(days=1)
    sweep.steps_sweep(now=far, publish=bus)
    assert run.step_results.get(step_id="sub").status == "running"

    settle(bus, tasks)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"said": "p1!ann", "tag": "p1"}
    sub.refresh_from_db()
    assert [(e["status"], e["worker"]) for e in sub.attempt_log] == [
        ("succeeded", f"child run {child.pk}")
    ]
    # duplicates of both messages do nothing
    assert children.child_run_start(run_id=child.pk, publish=bus) is None
    assert children.parent_step_settle(child_run_id=child.pk, publish=bus) is False


def test_a_step_whose_run_was_cancelled_before_it_parked_starts_no_child(tasks):
    run, _ = start("x1")
    sub = run.step_results.get(step_id="sub")
    StepResult.objects.filter(pk=sub.pk).update(status="running")  # claimed by a task…
    Run.objects.filter(pk=run.pk).update(status="cancelled")  # …when the run was cancelled

    refused = pytest.raises(workflow_kind.SubworkflowFailed, match="the run ended before")
    with run_context(run) as ctx, refused:
        workflow_kind.execute_workflow_step(ctx, ctx.spec.step("sub"), {"tag": "x1"})

    assert not Run.objects.filter(parent_run=run).exists()  # rolled back with the park
    assert tasks.sent == []


def test_the_tasks_do_nothing_for_a_run_that_is_no_pending_child(tasks):
    run, bus = start("n1")
    bus.drain()  # parked: the child is pending
    child = Run.objects.get(parent_run=run)

    assert children.parent_step_settle(child_run_id=child.pk, publish=bus) is False  # unfinished
    assert children.parent_step_settle(child_run_id=run.pk, publish=bus) is False  # no parent
    assert runs_tasks.start_run.run(run.pk) is None  # running already: nothing is sent
    assert runs_tasks.settle_parent_step.run(run.pk) is None
    assert Run.objects.get(pk=child.pk).status == "pending"


def test_the_hook_sends_nothing_for_a_top_level_run_or_in_process(tasks, monkeypatch):
    run, _ = start("h1")
    hooks.run_finished(run_id=run.pk)
    assert tasks.sent == []
    monkeypatch.setattr(hooks, "broker", SimpleNamespace(in_process=lambda: True))
    child = Run.objects.create(
        workflow=run.workflow, definition_hash="x", trigger="workflow", parent_run=run,
        parent_step=StepResult.objects.get(run=run, step_id="sub"),
    )  # fmt: skip
    hooks.run_finished(run_id=child.pk)
    assert tasks.sent == []
