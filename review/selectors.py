"""What a reviewer sees for one workflow version (reads only).

``workflow_review`` gathers the graph picture's data, the steps table, the
validator's issues against the current tool registry, the approvals with their
validation runs, and the plan history (PlanAttempt rows) of the workflow's
lineage. The admin renders it; nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from pydantic import ValidationError

from review.models import Approval
from tools.registry import ToolRegistry
from workflows.models import PlanAttemptStatus, Step, Workflow
from workflows.planner import MAX_REVISION_ROUNDS
from workflows.planner.selectors import plan_attempts_for_lineage, plan_attempts_for_version
from workflows.schema import InputSpec, WorkflowSpec
from workflows.validation.report import ValidationIssue
from workflows.validator import validate_workflow

# Keys every step row shows in its own column; the rest is "details".
_COLUMNS = frozenset({"id", "kind", "tool", "name", "description", "input_mapping", "on_error"})


@dataclass(frozen=True)
class StepRow:
    step_id: str
    kind: str
    tool: str
    name: str
    description: str
    mapping: str  # pretty JSON
    details: str  # the rest of the step config, pretty JSON ("" when none)
    on_error: str


@dataclass(frozen=True)
class ApprovalRow:
    approval: Approval
    inputs: str  # pretty JSON


@dataclass(frozen=True)
class Review:
    graph: dict[str, Any]
    steps: list[StepRow]
    errors: tuple[ValidationIssue, ...]
    warnings: tuple[ValidationIssue, ...]
    approvals: list[ApprovalRow]
    plan_attempts: QuerySet
    revisions_used: int = 0  # reviewer-feedback revisions of this lineage so far
    revisions_max: int = 0
    # What the planner drew on for this version: templates shown ({name, version, score,
    # reused}), and the clarifying questions it asked with their answers.
    templates: tuple[dict[str, Any], ...] = ()
    clarifications: tuple[dict[str, Any], ...] = ()


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def workflow_graph_data(workflow: Workflow) -> dict[str, Any]:
    """Nodes and edges for the picture (embedded with ``json_script``, drawn by graph.js)."""
    nodes = []
    for step in workflow.steps.order_by("position"):
        config = step.config or {}
        nodes.append(
            {
                "id": step.step_id,
                "kind": step.kind,
                "tool": step.tool,
                "name": config.get("name", ""),
                "description": config.get("description", ""),
                "branches": list(config.get("branches", [])),
            }
        )
    edges = [
        {"from": e.from_step, "to": e.to_step, "when": e.when, "inferred": e.inferred}
        for e in workflow.edges.order_by("from_step", "to_step", "when")
    ]
    return {"name": workflow.name, "version": workflow.version, "nodes": nodes, "edges": edges}


def _step_row(step: Step) -> StepRow:
    config = step.config or {}
    rest = {k: v for k, v in config.items() if k not in _COLUMNS}
    return StepRow(
        step_id=step.step_id,
        kind=step.kind,
        tool=step.tool,
        name=config.get("name", ""),
        description=config.get("description", ""),
        mapping=_pretty(step.input_mapping) if step.input_mapping else "",
        details=_pretty(rest) if rest else "",
        on_error=step.on_error,
    )


def workflow_review(*, workflow: Workflow, registry: ToolRegistry | None = None) -> Review:
    registry = registry if registry is not None else ToolRegistry.from_db()
    report = validate_workflow(workflow.definition, registry=registry)
    history = plan_attempts_for_lineage(workflow=workflow).select_related(
        "workflow", "based_on", "created_by"
    )
    answered = [
        a.revision
        for a in history
        if a.status != PlanAttemptStatus.ERROR
        and workflow.name in {getattr(a.workflow, "name", None), getattr(a.based_on, "name", None)}
    ]
    return Review(
        graph=workflow_graph_data(workflow),
        steps=[_step_row(s) for s in workflow.steps.order_by("position")],
        errors=report.errors,
        warnings=report.warnings,
        approvals=[
            ApprovalRow(a, _pretty(a.sample_inputs))
            for a in Approval.objects.filter(workflow=workflow)
            .select_related("approved_by", "validation_run")
            .order_by("-created_at", "-id")
        ],
        plan_attempts=history,
        revisions_used=max(answered, default=1) - 1,
        revisions_max=MAX_REVISION_ROUNDS,
        **_planner_sources(workflow),
    )


def _planner_sources(workflow: Workflow) -> dict[str, Any]:
    """The templates and the answered questions of the attempt that produced ``workflow``."""
    produced = plan_attempts_for_version(workflow=workflow).last()
    if produced is None:
        return {}
    answered = [
        {"question": q["question"], "answer": r.get("answers", {}).get(q["id"], "")}
        for r in produced.clarifications or []
        for q in r.get("questions") or []
    ]
    return {"templates": tuple(produced.templates or []), "clarifications": tuple(answered)}


def declared_inputs(workflow: Workflow) -> dict[str, InputSpec]:
    """The version's declared inputs ({} when its definition no longer parses)."""
    try:
        return dict(WorkflowSpec.model_validate(workflow.definition).inputs)
    except ValidationError:
        return {}


def sample_input_defaults(workflow: Workflow, declared: dict[str, InputSpec]) -> dict[str, Any]:
    """Prefill for the approve form: the last approval's inputs, else the declared defaults."""
    last = (
        Approval.objects.filter(workflow=workflow, definition_hash=workflow.definition_hash)
        .order_by("-created_at", "-id")
        .first()
    )
    values = {
        name: spec.default for name, spec in declared.items() if "default" in spec.model_fields_set
    }
    if last is not None:
        values.update({k: v for k, v in (last.sample_inputs or {}).items() if k in declared})
    return values
