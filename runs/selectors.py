"""Run selectors (reads)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Count, IntegerField, Max, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from runs.models import RecordingKind, Run, ToolCallRecording
from tools.jsondata import store_unescape
from workflows.models import Workflow, WorkflowStatus
from workflows.selectors import workflow_list

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


def run_trigger(*, run_id: int, trigger: str | None = None) -> str | None:
    """``trigger`` when the announcer passed it (a run-finished hook's keyword), else
    the stored run's; None when there is no such run."""
    if trigger is not None:
        return trigger
    return Run.objects.filter(pk=run_id).values_list("trigger", flat=True).first()


class LatestRun(TypedDict):
    """What ``run_latest_by_workflow`` adds to each workflow."""

    step_count: int
    run_count: int
    last_run_id: int | None
    last_run_status: str | None


def run_latest_by_workflow(
    *, include_archived: bool = False
) -> QuerySet[WithAnnotations[Workflow, LatestRun]]:
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
    runs = Run.objects.select_related("workflow", "started_by").order_by("-created_at", "-id")
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


def run_recorded_calls(*, run: Run) -> dict[str, list[dict[str, Any]]]:
    """The calls a (validation) run recorded, by step id, in recorded order: each as
    ``{kind, item, tool, target, answer, elapsed_ms}`` for the run page — ``target``
    is the method and masked URL (HTTP), ``tools/call mcp:<server>/<tool>`` (MCP) or
    ``chat llm:<endpoint>/<model>`` (LLM); ``answer`` the status, the finish reason
    or the error's type."""
    rows = (
        ToolCallRecording.objects.filter(step_result__run=run)
        .select_related("step_result")
        .order_by("id")
    )
    calls: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        calls.setdefault(row.step_result.step_id, []).append(
            {
                "kind": row.kind,
                "item": row.item,
                "tool": row.tool,
                "target": f"{row.method} {store_unescape(row.url)}",
                "answer": _answer(row),
                "elapsed_ms": row.elapsed_ms,
            }
        )
    return calls


def _answer(row: ToolCallRecording) -> str:
    if row.error:
        return f"error: {row.error.get('type')}"
    cut = " (cut at the recording cap)" if row.body_truncated else ""
    response = row.response if isinstance(row.response, dict) else {}
    if row.kind == RecordingKind.MCP:
        return ("error result" if response.get("isError") else "result") + cut
    if row.kind == RecordingKind.LLM:
        calls = len(response.get("tool_calls") or ())
        asked = f", {calls} tool call{'s' if calls != 1 else ''}" if calls else ""
        return f"reply ({response.get('finish_reason') or 'no finish reason'}{asked}){cut}"
    return f"HTTP {row.status}{cut}"
