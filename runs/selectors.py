"""Run selectors (reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, IntegerField, Max, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from runs.models import Run
from workflows.models import Workflow, WorkflowStatus
from workflows.selectors import workflow_list


def run_trigger(*, run_id: int, trigger: str | None = None) -> str | None:
    """``trigger`` when the announcer passed it (a run-finished hook's keyword), else
    the stored run's; None when there is no such run."""
    if trigger is not None:
        return trigger
    return Run.objects.filter(pk=run_id).values_list("trigger", flat=True).first()


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


def run_list(
    *,
    workflow: str | None = None,
    status: str | None = None,
    trigger: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
) -> QuerySet[Run]:
    """Runs, newest first, filtered by workflow name, status, trigger and creation time."""
    runs = Run.objects.select_related("workflow").order_by("-created_at", "-id")
    if workflow:
        runs = runs.filter(workflow__name=workflow)
    if status:
        runs = runs.filter(status=status)
    if trigger:
        runs = runs.filter(trigger=trigger)
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    return runs[:limit] if limit else runs


@dataclass(frozen=True)
class StatusStrip:
    """A workflow's recent runs, oldest first (the newest at the right end of the strip)."""

    workflow: str
    runs: list[Run]


def run_status_strips(*, workflows: int = 12, runs_each: int = 20) -> list[StatusStrip]:
    """The most recently run workflows (by name), each with its last ``runs_each`` runs."""
    newest = (
        Run.objects.values("workflow__name")
        .annotate(last=Max("created_at"))
        .order_by("-last", "workflow__name")[:workflows]
    )
    strips = []
    for row in newest:
        name = row["workflow__name"]
        recent = list(
            Run.objects.filter(workflow__name=name)
            .select_related("workflow")
            .order_by("-created_at", "-id")[:runs_each]
        )
        strips.append(StatusStrip(name, recent[::-1]))
    return strips
