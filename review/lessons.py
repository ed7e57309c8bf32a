"""Failed validation runs as planner lessons (a ``FLOWPILOT_PLANNER_LESSON_PROVIDERS``
provider, ``workflows.planner.lessons``): an approved version whose validation run
failed warns the next plan for a similar goal, with the run's error summary (masked by
value when the run stored it)."""

from __future__ import annotations

from review.models import Approval, ApprovalStatus
from workflows.planner.lessons import VALIDATION_FAILED, Lesson, lesson_of_version


def failed_validations(*, limit: int) -> list[Lesson]:
    """The versions whose validation run failed, newest first, one lesson each."""
    approvals = (
        Approval.objects.filter(status=ApprovalStatus.FAILED, validation_run__isnull=False)
        .select_related("workflow", "validation_run")
        .order_by("-created_at", "-id")[:limit]
    )
    lessons = []
    for approval in approvals:
        run = approval.validation_run
        assert run is not None  # filtered above
        text = run.error_summary or f"the validation run ended {run.status}"
        lessons.append(lesson_of_version(approval.workflow, VALIDATION_FAILED, text))
    return lessons
