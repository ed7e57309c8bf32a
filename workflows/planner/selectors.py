"""Planner selectors (reads): the audit trail from a goal to its versions."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from workflows.models import PlanAttempt, Workflow


def plan_attempts_for_lineage(*, workflow: Workflow) -> QuerySet[PlanAttempt]:
    """Every planner call of ``workflow``'s lineage, oldest first.

    The lineage is the calls that produced or revised a version of its name, plus
    the failed first-plan calls for the same goal (they produced no version, so the
    goal text is what ties them to it).
    """
    first_plan_failures = Q(workflow__isnull=True, based_on__isnull=True, goal=workflow.goal)
    return PlanAttempt.objects.filter(
        Q(workflow__name=workflow.name) | Q(based_on__name=workflow.name) | first_plan_failures
    ).order_by("created_at", "id")


def plan_attempts_for_version(*, workflow: Workflow) -> QuerySet[PlanAttempt]:
    """The calls of the session that produced ``workflow`` (its revision), oldest first."""
    produced = PlanAttempt.objects.filter(workflow=workflow).first()
    if produced is None:
        return PlanAttempt.objects.none()
    return plan_attempts_for_lineage(workflow=workflow).filter(
        revision=produced.revision, based_on=produced.based_on, id__lte=produced.id
    )
