"""Child runs of `workflow` and `loop` steps on Celery: a parked step settled when its
child ends (a `loop` step's succeeded iteration queues the step again instead).

The step itself is ``runs.engine.kinds.workflow``. On Celery a step parks on its child
(claim token ``child:<run id>``) and its child is started by the ``runs.start_run``
task (``child_run_start``). When the child finishes, the run-finished hook
(``runs.hooks.run_finished``) queues ``runs.settle_parent_step``, whose body is
``parent_step_settle``: the child's outputs (or its failure) are the step's try,
settled like a step task's (``settle.settle``: ``tries.next_try`` decides whether it
is tried again), under the claim, and the parent advances under its row lock. In
process the step waits for its child itself, and none of this applies (the claim is
never ``child:…``, so ``parent_step_settle`` finds nothing to do).
"""

from __future__ import annotations

import logging
from typing import cast

from django.conf import settings
from django.db import transaction

from runs.engine.celery.broker import Publish, lease_until, publish_step, step_queue
from runs.engine.celery.run import run_context, run_log_fields, run_start
from runs.engine.celery.settle import settle
from runs.engine.context import RunContext
from runs.engine.kinds.base import Attempt
from runs.engine.kinds.loop import finished_iterations, iteration_failure
from runs.engine.kinds.workflow import CHILD_CLAIM_PREFIX, SubworkflowFailed, child_output
from runs.engine.tries import AttemptRecord, Tried, error_record
from runs.models import Run, StepResult
from runs.state import RUN_TERMINAL, RunStatus, StepStatus, step_transition
from tools.errors import FlowpilotError
from workflows.schema import LoopStep, WorkflowStep

logger = logging.getLogger("flowpilot.engine")


def parent_step_settle(*, child_run_id: int, publish: Publish = publish_step) -> bool:
    """Settle the step parked on finished child run ``child_run_id`` and advance its run
    (or, when ``next_try`` retries it, publish it again after the wait). False when no
    step waits on it (in process, settled already, or the parent was cancelled
    meanwhile)."""
    child = Run.objects.get(pk=child_run_id)
    if child.parent_step_id is None or child.status not in RUN_TERMINAL:
        return False
    token = f"{CHILD_CLAIM_PREFIX}{child.pk}"
    result = StepResult.objects.select_related("run").get(pk=child.parent_step_id)
    if result.status != StepStatus.RUNNING or result.claim_token != token:
        return False
    with run_log_fields(result.run, step_id=result.step_id), run_context(result.run) as ctx:
        step = cast(WorkflowStep | LoopStep, ctx.spec.step(result.step_id))  # the claim says so
        if isinstance(step, LoopStep) and child.status == RunStatus.SUCCEEDED:
            return _next_iteration(ctx, result, step, child, token, publish=publish)
        verdict = settle(ctx, result, token, _child_try(ctx, result, step, child), publish=publish)
        queue = step_queue(ctx, step)
    if verdict.retry_in is not None:
        publish(result.pk, countdown=verdict.retry_in, queue=queue)
    logger.info(
        "run %s step %s: child run %s %s", result.run_id, step.id, child.pk, child.status,
        extra={"run_id": result.run_id, "step_id": step.id},
    )  # fmt: skip
    return verdict.status is not None


def _next_iteration(
    ctx: RunContext, result: StepResult, step: LoopStep, child: Run, token: str, *, publish: Publish
) -> bool:
    """A `loop` step's iteration succeeded: queue the step again (no try is used up), so
    its next task finishes the loop or starts the next iteration. False when the claim
    is no longer the child's (the run was cancelled meanwhile)."""
    now = ctx.now()
    with transaction.atomic():
        Run.objects.select_for_update().get(pk=result.run_id)  # as a settle does
        queued = step_transition(
            StepResult.objects.filter(pk=result.pk, status=StepStatus.RUNNING, claim_token=token),
            StepStatus.QUEUED,
            claim_token="",
            lease_expires_at=lease_until(settings.FLOWPILOT_QUEUED_LEASE, now),
            updated_at=now,
        )
    if queued:
        publish(result.pk, queue=step_queue(ctx, step))
        logger.info("run %s step %s: iteration run %s succeeded", result.run_id, step.id, child.pk)
    return bool(queued)


def _child_try(
    ctx: RunContext, result: StepResult, step: WorkflowStep | LoopStep, child: Run
) -> Tried[Attempt]:
    """The parked step's try, as its finished child ended it: from the step's start
    to now, made by the child run."""
    now = ctx.now()
    started = result.started_at or now
    took = round((now - started).total_seconds() * 1000, 2)
    number, worker = result.attempts + 1, f"child run {child.pk}"
    try:
        if isinstance(step, LoopStep):  # an iteration failed (a success queues the step)
            number = len(finished_iterations(step, result)) + 1
            raise SubworkflowFailed(iteration_failure(step, number, child))
        attempt = Attempt(output=child_output(step, child))
    except FlowpilotError as exc:
        failed = AttemptRecord(
            number, started, took, StepStatus.FAILED, worker, error_record(ctx, exc)
        )
        return Tried(failed, None, exc)
    return Tried(AttemptRecord(number, started, took, StepStatus.SUCCEEDED, worker), attempt)


def child_run_start(*, run_id: int, publish: Publish = publish_step) -> Run | None:
    """Start a pending child run on the workers (``runs.start_run``); a duplicate
    message finds it started already and does nothing."""
    run = Run.objects.get(pk=run_id)
    if run.status != RunStatus.PENDING:
        return None
    return run_start(run=run, publish=publish)
