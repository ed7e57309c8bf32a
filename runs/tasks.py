"""Celery tasks: ids in, one service call. The logic is in ``runs.engine.celery``, whose
docstring walks a step's message through it. The task names never change (messages in
flight keep working across a deploy).

``execute_step`` is ``acks_late`` (a message is acknowledged only after the step was
settled, so a lost worker's step is redelivered) and safe to deliver twice: it claims
its StepResult first and does nothing when the claim is lost. A step's policy retry is
a Celery retry with the policy's countdown, so no worker sleeps while waiting. Only
infrastructure failures (the database went away) are retried blindly, with backoff.
"""

from __future__ import annotations

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

from runs import approvals, concurrency, hooks
from runs.engine.celery import children, step, sweep
from runs.engine.celery.broker import STEP_TASK
from runs.models import Run
from runs.replay.recorder import call_recorder_for

INFRASTRUCTURE_ERRORS = (OperationalError, InterfaceError)


@shared_task(
    bind=True,
    name=STEP_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=50,  # database and broker outages (the engine bounds its own re-queues)
)
def execute_step(self: Task, step_result_id: int) -> None:
    """Claim, try once, and settle the step; re-publish itself for a retry.

    A child the step made ready alone (a chain) runs next in this same task
    (``step.continue_chain``), which publishes that one's retries itself. A validation
    run records its tool and model calls (``call_recorder_for``: the replay's recorder,
    passed in, since ``runs.replay`` builds on the engine and the engine never imports it).
    """
    verdict = step.step_execute(
        step_result_id=step_result_id,
        worker=self.request.hostname or "unknown",
        taps_for=call_recorder_for,
    )
    if verdict.retry_in is not None:
        # The engine bounds its own re-queues (the step's retry policy; a rate limit's
        # wait, which costs no try), so Celery's count is not applied to them: 50 runs
        # queued behind one rate limit re-queue a step every ~0.1 s for seconds. Its
        # max_retries is for the infrastructure errors above (a lost task: the sweeper).
        raise self.retry(countdown=verdict.retry_in, max_retries=self.request.retries + 1)


@shared_task(
    name="runs.sweep_steps",
    acks_late=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=3,
)
def sweep_steps() -> dict[str, int]:
    """Take back steps lost with their worker (scheduled by Celery beat)."""
    return sweep.steps_sweep()


@shared_task(
    name="runs.start_run",
    acks_late=True,
    ignore_result=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=10,
)
def start_run(run_id: int) -> None:
    """Start a pending run on the workers (a `workflow` step's child run)."""
    children.child_run_start(run_id=run_id)


@shared_task(
    name=hooks.SETTLE_PARENT_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=10,
)
def settle_parent_step(child_run_id: int) -> None:
    """A child run finished: settle the `workflow` step parked on it, advance its run."""
    children.parent_step_settle(child_run_id=child_run_id)


@shared_task(
    name=hooks.FILL_SLOTS_TASK,
    acks_late=True,
    ignore_result=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=10,
)
def fill_slots(run_id: int) -> None:
    """A limited run ended: start the next queued runs of its pool (``runs.concurrency``)."""
    run = Run.objects.select_related("workflow").filter(pk=run_id).first()
    if run is not None:
        concurrency.run_slots_fill(run, start=concurrency.start_on_workers)


@shared_task(
    name="runs.sweep_queued_runs",
    acks_late=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=3,
)
def sweep_queued_runs() -> int:
    """Start queued runs whose pool has a free slot (scheduled by Celery beat): recovers
    a ``fill_slots`` message lost with its worker. Returns how many started."""
    return len(concurrency.queued_sweep(start=concurrency.start_on_workers))


@shared_task(
    name="runs.expire_approvals",
    acks_late=True,
    autoretry_for=INFRASTRUCTURE_ERRORS,
    retry_backoff=True,
    max_retries=3,
)
def expire_approvals() -> int:
    """Decide the approval requests whose time is up, as each step's ``on_timeout`` says
    (scheduled by Celery beat). Returns how many."""
    return approvals.approvals_expire()
