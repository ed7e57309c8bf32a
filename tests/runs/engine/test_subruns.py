"""`workflow` steps under the Celery driver, in process: the step parks on its child.

A ``Bus`` stands in for the broker (step tasks) and ``Tasks`` for the two other
tasks a sub-workflow sends by name (``runs.start_run``, ``runs.settle_parent_step``);
``settle`` delivers everything the way workers would. Real workers:
``tests/runs/test_celery_subworkflows.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from runs import hooks
from runs import tasks as runs_tasks
from runs.engine.celery import children, sweep
from runs.engine.celery.run import run_context, run_start
from runs.engine.kinds import workflow as workflow_kind
from runs.models import Run, StepResult
from runs.services import run_cancel, run_create, run_prepare_resume
from tests.celery_support import Bus
from tests.conftest import statuses
from tests.runs.subflows import activate, child_flow, parent_flow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("echo_api")]


@dataclass
class Tasks:
    """Records tasks sent by name: ``(name, args)``."""

    sent: list[tuple[str, list]] = field(default_factory=list)

    def send_task(self, name: str, args: list) -> None:
        self.sent.append((name, list(args)))


@pytest.fixture
def tasks(monkeypatch):
    recorder = Tasks()
    monkeypatch.setattr(workflow_kind, "current_app", recorder)
    monkeypatch.setattr(hooks, "current_app", recorder)
    # Only the hook's view: patching ``broker.in_process`` itself would leak into
    # modules that import it by name while the patch is on (``runs.dispatch``).
    monkeypatch.setattr(hooks, "broker", SimpleNamespace(in_process=lambda: False))
    return recorder


def settle(bus: Bus, tasks: Tasks, *, limit: int = 50) -> None:
    """Deliver step messages and named tasks until nothing is left."""
    for _ in range(limit):
        bus.drain()
        if not tasks.sent:
            return
        name, args = tasks.sent.pop(0)
        if name == workflow_kind.START_TASK:
            children.child_run_start(run_id=args[0], publish=bus)
        else:
            assert name == hooks.SETTLE_PARENT_TASK
            children.parent_step_settle(child_run_id=args[0], publish=bus)
    raise AssertionError("still busy")


def start(tag: str = "t") -> tuple[Run, Bus]:
    activate(child_flow())
    parent = activate(parent_flow())
    bus = Bus()
    run = run_create(workflow=parent, trigger="api", inputs={"tag": tag})
    run_start(run=run, publish=bus)
    return run, bus


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
