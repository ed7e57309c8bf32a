"""Reads behind the API: querysets in a stable order, and a version's full picture."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from api.models import PlanRequest, WebhookTrigger
from review.selectors import workflow_graph_data
from runs.models import Run, StepResult
from tools.models import Tool
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.validator import validate_workflow


def tool_list() -> QuerySet[Tool]:
    return Tool.objects.order_by("name")


def workflow_versions() -> QuerySet[Workflow]:
    """Every stored version, by name, newest version first (ids break no ties: unique)."""
    return Workflow.objects.order_by("name", "-version")


def workflow_describe(*, workflow: Workflow, registry: ToolRegistry | None = None) -> dict:
    """A version with its graph (nodes, edges) and the validator's report against today's
    tools: a tool removed since approval shows up here as an error."""
    registry = registry if registry is not None else ToolRegistry.from_db()
    report = validate_workflow(workflow.definition, registry=registry)
    graph = workflow_graph_data(workflow)
    return {
        "workflow": workflow,
        "graph": {"nodes": graph["nodes"], "edges": graph["edges"]},
        "validation": {"ok": report.ok, "issues": [i.as_dict() for i in report.issues]},
    }


def run_list() -> QuerySet[Run]:
    """Newest first; the id breaks ties of one creation time."""
    return Run.objects.select_related("workflow").order_by("-created_at", "-id")


def run_detail_list() -> QuerySet[Run]:
    steps = StepResult.objects.order_by("id")
    from django.db.models import Prefetch

    return run_list().prefetch_related(Prefetch("step_results", queryset=steps))


def plan_request_list() -> QuerySet[PlanRequest]:
    return PlanRequest.objects.select_related("workflow", "based_on").order_by("-created_at", "-id")


def webhook_list() -> QuerySet[WebhookTrigger]:
    return WebhookTrigger.objects.order_by("workflow_name", "id")


def describe_fields(described: dict[str, Any]) -> dict[str, Any]:
    """The flat mapping ``WorkflowDetailSerializer`` reads."""
    workflow = described["workflow"]
    return {**{f: getattr(workflow, f) for f in _WORKFLOW_FIELDS}, **described}


_WORKFLOW_FIELDS = (
    "id",
    "name",
    "version",
    "status",
    "description",
    "goal",
    "definition_hash",
    "created_at",
    "updated_at",
    "approved_at",
    "definition",
)
