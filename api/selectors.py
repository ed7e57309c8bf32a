"""Reads behind the API: querysets in a stable order, and a version's full picture."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch, QuerySet

from review.models import PlanRequest, PlanRequestStatus
from runs.models import Run, StepResult
from tools.models import Tool
from tools.registry import ToolRegistry
from triggers.models import WebhookTrigger
from workflows.models import Workflow
from workflows.selectors import workflow_graph_data
from workflows.validator import validate_workflow


def tool_list() -> QuerySet[Tool]:
    return Tool.objects.order_by("name")


def workflow_versions() -> QuerySet[Workflow]:
    """Every stored version, by name, newest version first (ids break no ties: unique)."""
    return Workflow.objects.order_by("name", "-version")


@dataclass(frozen=True)
class WorkflowDescription:
    """A version as its detail endpoint shows it: with ``graph`` (nodes, edges) and
    ``validation`` (the validator's report against today's tools: a tool removed since
    approval shows up as an error). Every other attribute is the version's own, so a
    serializer of ``Workflow`` reads it like the model."""

    workflow: Workflow
    graph: dict[str, Any]
    validation: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.workflow, name)


def workflow_describe(
    *, workflow: Workflow, registry: ToolRegistry | None = None
) -> WorkflowDescription:
    """``workflow`` with its graph and its validation against today's tools."""
    registry = registry if registry is not None else ToolRegistry.from_db()
    report = validate_workflow(workflow.definition, registry=registry)
    graph = workflow_graph_data(workflow)
    return WorkflowDescription(
        workflow=workflow,
        graph={"nodes": graph["nodes"], "edges": graph["edges"]},
        validation={"ok": report.ok, "issues": [i.as_dict() for i in report.issues]},
    )


def run_list() -> QuerySet[Run]:
    """Newest first; the id breaks ties of one creation time."""
    return Run.objects.select_related(
        "workflow", "restarted_from__workflow", "started_by"
    ).order_by("-created_at", "-id")


def run_detail_list() -> QuerySet[Run]:
    """Runs with their step results (in the order they were created) fetched along."""
    steps = StepResult.objects.order_by("id")
    return run_list().prefetch_related(Prefetch("step_results", queryset=steps))


def plan_request_list() -> QuerySet[PlanRequest]:
    return PlanRequest.objects.select_related("workflow", "based_on").order_by("-created_at", "-id")


def webhook_list() -> QuerySet[WebhookTrigger]:
    return WebhookTrigger.objects.order_by("workflow_name", "id")


def plan_request_wait(
    *,
    request_id: int,
    timeout: float,
    interval: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PlanRequest:
    """Read plan request ``request_id`` until it has finished or ``timeout`` seconds have
    passed; the request as last read (its ``status`` says which)."""
    deadline = clock() + max(0.0, timeout)
    while True:
        plan = plan_request_list().get(pk=request_id)
        left = deadline - clock()
        if plan.status not in (PlanRequestStatus.QUEUED, PlanRequestStatus.RUNNING) or left <= 0:
            return plan
        sleep(min(interval, left))
