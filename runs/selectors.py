"""Run selectors (reads)."""

from __future__ import annotations

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from runs.models import Run
from workflows.models import Workflow, WorkflowStatus
from workflows.selectors import workflow_list


def run_latest_by_workflow(*, include_archived: bool = False) -> QuerySet[Workflow]:
    """Every stored version with its run count and its newest run, in one query.

    Each workflow of ``workflow_list()`` (name, newest version first; archived
    versions only when asked) carries ``step_count``, ``run_count``,
    ``last_run_id`` and ``last_run_status`` (``None`` when it never ran). The newest
    run is the one created last, ties broken by the higher id. The run columns come
    from subqueries on ``Run``, so the workflow layer never reads the runs table.
    """
    runs = Run.objects.filter(workflow=OuterRef("pk"))
    newest = runs.order_by("-created_at", "-id")
    counted = runs.order_by().values("workflow").annotate(n=Count("id")).values("n")
    rows = workflow_list().annotate(
        step_count=Count("steps", distinct=True),
        run_count=Coalesce(Subquery(counted, output_field=IntegerField()), Value(0)),
        last_run_id=Subquery(newest.values("id")[:1]),
        last_run_status=Subquery(newest.values("status")[:1]),
    )
    if not include_archived:
        rows = rows.exclude(status=WorkflowStatus.ARCHIVED)
    return rows
