"""Child runs of `workflow` steps, seen from their parent: settle, cancel, resume.

The step itself is ``runs.engine.kinds.workflow``. On Celery a step parks on its child
(claim token ``child:<run id>``); when the child finishes, the run-finished hook
(``runs.hooks.run_finished``) queues ``runs.settle_parent_step``, whose body is
``parent_step_settle``: the child's outputs (or its failure) become the step's outcome,
written under the claim like any step task's, and the parent advances under its row
lock. In process the step waits for its child itself, and none of this applies (the
claim is never ``child:…``, so ``parent_step_settle`` finds nothing to do).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from django.utils import timezone

from runs.engine.attempt import StepOutcome, error_record
from runs.engine.celery_settle import settle_outcome
from runs.engine.distributed import Publish, publish_step, run_context
from runs.engine.distributed import run_start as start_run
from runs.engine.kinds.workflow import (
    CHILD_CLAIM_PREFIX,
    SubworkflowFailed,
    child_output,
    current_child,
)
from runs.models import Run, StepResult
from runs.state import RUN_TERMINAL, RunStatus, StepStatus, step_transition
from tools.errors import FlowpilotError
from workflows.schema import WorkflowStep

logger = logging.getLogger("flowpilot.engine")


def parent_step_settle(*, child_run_id: int, publish: Publish = publish_step) -> bool:
    """Write the outcome of the step parked on finished child run ``child_run_id`` and
    advance its run. False when no step waits on it (in process, settled already, or
    the parent was cancelled meanwhile)."""
    child = Run.objects.get(pk=child_run_id)
    if child.parent_step_id is None or child.status not in RUN_TERMINAL:
        return False
    token = f"{CHILD_CLAIM_PREFIX}{child.pk}"
    result = StepResult.objects.select_related("run").get(pk=child.parent_step_id)
    if result.status != StepStatus.RUNNING or result.claim_token != token:
        return False
    with run_context(result.run) as ctx:
        step = cast(WorkflowStep, ctx.spec.step(result.step_id))  # the claim says so
        entry: dict[str, Any] = {
            "attempt": result.attempts + 1,
            "started_at": (result.started_at or ctx.now()).isoformat(),
            "worker": f"child run {child.pk}",
            "duration_ms": _ms_since(result.started_at, ctx.now()),
        }
        try:
            outcome = StepOutcome(StepStatus.SUCCEEDED, output=child_output(step, child))
            entry["status"] = StepStatus.SUCCEEDED
        except FlowpilotError as exc:
            entry.update(status=StepStatus.FAILED, error=error_record(ctx, exc))
            outcome = StepOutcome(StepStatus.FAILED, error=entry["error"])
        outcome.attempts = [entry]
        verdict = settle_outcome(ctx, result, token, outcome, publish=publish)
    logger.info("run %s step %s: child run %s %s", result.run_id, step.id, child.pk, child.status)
    return verdict.status is not None


def _ms_since(start: datetime | None, now: datetime) -> float:
    return round((now - start).total_seconds() * 1000, 2) if start else 0.0


def active_children(*, run: Run) -> list[Run]:
    """The child runs of ``run`` that are not finished, oldest first."""
    return list(
        Run.objects.filter(
            parent_run=run, status__in=[RunStatus.PENDING, RunStatus.RUNNING]
        ).order_by("pk")
    )


def parked_steps_cancel(*, run: Run, now: datetime | None = None) -> int:
    """Fail the steps of cancelled ``run`` that wait on a child run (Celery), so a resume
    runs them again (and resumes their child); returns how many."""
    now = now or timezone.now()
    error = SubworkflowFailed(
        "the run was cancelled while this step waited for its child run"
    ).as_dict()
    return step_transition(
        StepResult.objects.filter(
            run=run, status=StepStatus.RUNNING, claim_token__startswith=CHILD_CLAIM_PREFIX
        ),
        StepStatus.FAILED,
        error=error,
        claim_token="",
        finished_at=now,
        updated_at=now,
    )


def child_prepare_resume(
    *, parent: StepResult, force: bool, prepare: Callable[..., Run]
) -> Run | None:
    """Reset the failed or cancelled child run of a `workflow` step being resumed, with
    ``prepare`` (``runs.services.run_prepare_resume``), so the step resumes that child."""
    child = current_child(parent)
    if child is None:
        return None
    resumable = {RunStatus.FAILED, RunStatus.CANCELLED} | ({RunStatus.RUNNING} if force else set())
    if child.status not in resumable:
        return None
    return prepare(run=child, force=force)


def child_run_start(*, run_id: int, publish: Publish = publish_step) -> Run | None:
    """Start a pending child run on the workers (``runs.start_run``); a duplicate
    message finds it started already and does nothing."""
    run = Run.objects.get(pk=run_id)
    if run.status != RunStatus.PENDING:
        return None
    return start_run(run=run, publish=publish)
