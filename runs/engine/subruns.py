"""Child runs of `workflow` steps, seen from their parent's cancel and resume.

The step itself is ``runs.engine.kinds.workflow``; settling a step parked on its child
(Celery) is ``runs.engine.celery.children``. These serve ``runs.services`` on both
drivers: the children a cancel cascades to, the parked steps a cancel fails (none in
process), the child a resumed step resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

from runs.engine.kinds.workflow import CHILD_CLAIM_PREFIX, SubworkflowFailed, current_child
from runs.models import Run, StepResult
from runs.state import RunStatus, StepStatus, step_transition


def active_children(*, run: Run) -> list[Run]:
    """The child runs of ``run`` that are not finished, oldest first."""
    return list(
        Run.objects.filter(
            parent_run=run, status__in=[RunStatus.PENDING, RunStatus.RUNNING, RunStatus.WAITING]
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
