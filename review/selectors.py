"""What a reviewer sees for one workflow version (reads only).

``workflow_review`` gathers the graph picture's data, the steps table, the
validator's issues against the current tool registry, the approvals with their
validation runs, the plan history (PlanAttempt rows) of the workflow's lineage and
what the version costs (``review.costs``). The admin renders it; nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from pydantic import ValidationError

from review.costs import VersionCosts, version_costs
from review.limits import LimitNote, rate_limit_notes
from review.models import Approval
from review.policy import Tally, approval_tally
from review.routing import RoutingNote, routing_notes
from runs.scenarios import ScenarioRow, scenario_rows
from tools.jsondata import store_unescape
from tools.pins import pinned_version
from tools.registry import ToolRegistry
from tools.sources import source_state, stale_sources
from workflows.diff import WorkflowDiff, field_text
from workflows.errors import WorkflowError
from workflows.models import PlanAttemptStatus, Step, Workflow
from workflows.planner.selectors import plan_attempts_for_lineage, plan_attempts_for_version
from workflows.schema import InputSpec, WorkflowSpec
from workflows.selectors import workflow_diff_base, workflow_graph_data, workflow_version_diff
from workflows.services import workflow_spec
from workflows.validation.context import FlowContext
from workflows.validation.edge_types import edge_type_lines
from workflows.validation.report import ValidationIssue
from workflows.validation.subworkflows import ActiveWorkflows
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
    # The input mapping as readable rows: (parameter, where its value comes from).
    mapping_rows: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ToolRow:
    """A tool the version calls, the steps calling it, and whether a call changes anything."""

    name: str
    kind: str
    steps: tuple[str, ...]
    side_effects: bool  # not idempotent: a repeated call may act twice
    known: bool  # in the current registry
    version: str = ""  # the tool's version now (tools.versions)
    pinned: str = ""  # the version this workflow version was approved with
    # "compatible": the tool changed since approval, compatibly (minor or patch changes
    # only); "breaking": with a major change. Runs refuse either until re-approved.
    newer: str = ""


@dataclass(frozen=True)
class LimitRow:
    """One budget or limit of the version, in words: what it bounds and its value."""

    scope: str  # "workflow" or "step `x`"
    what: str
    value: str


@dataclass(frozen=True)
class ApprovalRow:
    approval: Approval
    inputs: str  # pretty JSON


@dataclass(frozen=True)
class StepChangeRow:
    step_id: str
    change: str  # added | removed | changed
    kind: str
    tool: str
    changes: list[str]  # "path: old → new" per changed field


@dataclass(frozen=True)
class ChangeSet:
    """What this version changes relative to ``base`` (the version it would replace)."""

    base: Workflow
    diff: WorkflowDiff
    steps: list[StepChangeRow]
    workflow_fields: list[str]


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
    changes: ChangeSet | None = None  # None for a first version
    tally: Tally | None = None
    # What the planner drew on for this version: templates shown ({name, version, score,
    # reused}), and the clarifying questions it asked with their answers.
    templates: tuple[dict[str, Any], ...] = ()
    clarifications: tuple[dict[str, Any], ...] = ()
    # The tools it was shown, best first ({name, why, score, used}: ``used`` when the
    # version calls it), and whether the catalog was ranked (else shown whole).
    offered_tools: tuple[dict[str, Any], ...] = ()
    catalog_ranked: bool = False
    # Earlier plans for similar goals that went wrong, shown to it as warnings
    # ({kind, workflow, version, text, score}).
    lessons: tuple[dict[str, Any], ...] = ()
    # What max_parallel and the queues imply (``review.routing``), before approval.
    routing: tuple[RoutingNote, ...] = ()
    # What the version's concurrency limit implies, in one sentence ("" when the
    # definition does not parse: the validator's errors say why).
    concurrency: str = ""
    # What its tools' rate limits imply (``review.limits``): one note per limited step.
    rate_limits: tuple[LimitNote, ...] = ()
    # The decision summary: the tools it calls (side effects marked), its budgets and limits.
    tools: tuple[ToolRow, ...] = ()
    limits: tuple[LimitRow, ...] = ()
    # Its test scenarios (``tests:``) and their newest results (``runs.scenarios``).
    scenarios: tuple[ScenarioRow, ...] = ()
    # The sources of its tools that are stale or could not be read (``tools.sources``):
    # "mcp time (/srv/tools/time.yaml): stale: last read …".
    stale_sources: tuple[str, ...] = ()
    # What it cost to plan, what its validation run's model calls cost, what a month of
    # its schedule would, and its LLM budgets (``review.costs``).
    costs: VersionCosts | None = None

    @property
    def side_effect_tools(self) -> tuple[ToolRow, ...]:
        return tuple(t for t in self.tools if t.side_effects)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _node(step: Any, change: str) -> dict[str, Any]:
    """A graph node of a pydantic step (a removed step of the base version)."""
    return {
        "id": step.id,
        "kind": step.kind,
        "tool": getattr(step, "tool", "") or "",
        "name": step.name,
        "description": step.description,
        "branches": list(getattr(step, "branches", [])),
        "change": change,
    }


def graph_with_types(
    graph: dict[str, Any], spec: WorkflowSpec | None, registry: ToolRegistry
) -> dict[str, Any]:
    """The picture's data with ``types`` on every edge: what each mapped reference across
    it carries and where it goes (``a.list: array<object> → b.name: string``), the edge's
    tooltip (``workflows.validation.edge_types``). None for a definition that does not
    parse."""
    if spec is None:
        return graph
    lines = edge_type_lines(FlowContext.build(spec, registry, ActiveWorkflows()))
    edges = [{**e, "types": lines.get((e["from"], e["to"]), [])} for e in graph["edges"]]
    return {**graph, "edges": edges}


def graph_with_changes(graph: dict[str, Any], changes: ChangeSet) -> dict[str, Any]:
    """The picture's data marked with the diff: every node and edge gets ``change``
    (added, removed, changed or unchanged); removed steps and edges are drawn too."""
    diff = changes.diff
    base_steps = {s.id: s for s in workflow_spec(changes.base).steps}
    nodes = [{**n, "change": diff.step_status(n["id"])} for n in graph["nodes"]]
    nodes += [_node(base_steps[c.step_id], "removed") for c in diff.steps if c.change == "removed"]
    status = {(e.source, e.target, e.when): e.change for e in diff.edges}
    edges = [
        {**e, "change": status.get((e["from"], e["to"], e["when"] or None), "unchanged")}
        for e in graph["edges"]
    ]
    edges += [
        {
            "from": e.source,
            "to": e.target,
            "when": e.when,
            "inferred": e.inferred,
            "change": "removed",
        }
        for e in diff.edges
        if e.change == "removed"
    ]
    return {**graph, "nodes": nodes, "edges": edges, "base_version": changes.base.version}


def workflow_changes(*, workflow: Workflow) -> ChangeSet | None:
    """The diff against the version this one would replace (``None`` when there is none,
    or when either stored definition no longer fits the format)."""
    base = workflow_diff_base(version=workflow)
    if base is None:
        return None
    try:
        diff = workflow_version_diff(old=base, new=workflow)
    except WorkflowError:
        return None
    rows = [
        StepChangeRow(c.step_id, c.change, c.kind, c.tool, [field_text(f) for f in c.fields])
        for c in diff.steps
    ]
    return ChangeSet(base, diff, rows, [field_text(f) for f in diff.fields])


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
        mapping_rows=mapping_rows(step.input_mapping or {}),
    )


def mapping_rows(mapping: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``{"city": "$input.city", "days": 3}`` as ``(("city", "$input.city"), ("days", "3"))``:
    a reference or template as written, any other literal as compact JSON."""
    return tuple(
        (name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        for name, value in mapping.items()
    )


def tool_rows(
    spec: WorkflowSpec | None, registry: ToolRegistry, pins: dict[str, str] | None = None
) -> tuple[ToolRow, ...]:
    """The tools the version's steps call, in first-use order, each with its version now
    and, for an approved version (``pins``), the one it was approved with."""
    if spec is None:
        return ()
    used: dict[str, list[str]] = {}
    for step in spec.steps:
        for called in step.direct_tools():
            used.setdefault(called, []).append(step.id)
    rows = []
    for name, steps in used.items():
        tool = registry.get(name)
        where = (
            pinned_version(spec=tool, pinned_hash=(pins or {}).get(name))
            if tool is not None
            else None
        )
        rows.append(
            ToolRow(
                name=name,
                kind=tool.kind if tool is not None else "?",
                steps=tuple(steps),
                side_effects=tool is not None and not tool.idempotent,
                known=tool is not None,
                version=where.current if where else "",
                pinned=where.pinned if where else "",
                newer=where.newer if where else "",
            )
        )
    return tuple(rows)


def _stale_sources(spec: WorkflowSpec | None) -> tuple[str, ...]:
    """The stale or unreadable sources of the tools the version calls or offers."""
    if spec is None:
        return ()
    called = {t for step in spec.steps for t in (*step.direct_tools(), *step.model_tools())}
    return tuple(
        f"{source.kind} {source.name} ({source.location}): {source_state(source)}"
        for source in stale_sources(tools=called)
    )


def _seconds(value: float) -> str:
    return f"{value:g} s"


def limit_rows(spec: WorkflowSpec | None) -> tuple[LimitRow, ...]:
    """Every budget and limit the definition sets, in words (the defaults are not listed)."""
    if spec is None:
        return ()
    rows = [LimitRow("workflow", "runs at once", concurrency_text(spec).rstrip("."))]
    if spec.max_parallel is not None:
        rows.append(LimitRow("workflow", "steps in flight at once", str(spec.max_parallel)))
    if spec.retention_days is not None:
        kept = "forever" if spec.retention_days == 0 else f"{spec.retention_days} days"
        rows.append(LimitRow("workflow", "finished runs kept", kept))
    for step in spec.steps:
        scope = f"step `{step.id}`"
        if step.timeout is not None:
            rows.append(LimitRow(scope, "time per try", _seconds(step.timeout)))
        if step.retry is not None:
            rows.append(LimitRow(scope, "tries at most", str(step.retry.max_attempts)))
        if step.max_output_bytes is not None:
            rows.append(LimitRow(scope, "output size at most", f"{step.max_output_bytes} bytes"))
        budget = getattr(step, "budget", None)
        for field, what in (
            ("max_tokens", "LLM tokens at most"),
            ("max_calls", "LLM calls at most"),
            ("max_tool_calls", "tool calls at most"),
        ):
            value = getattr(budget, field, None) if budget is not None else None
            if value is not None:
                rows.append(LimitRow(scope, what, str(value)))
        turns = getattr(step, "max_turns", None)
        if turns is not None and budget is not None:
            rows.append(LimitRow(scope, "agent turns at most", str(turns)))
        parallel = getattr(step, "max_parallel", None)
        if parallel is not None:
            rows.append(LimitRow(scope, "items in flight at once", str(parallel)))
    return tuple(rows)


def workflow_review(*, workflow: Workflow, registry: ToolRegistry | None = None) -> Review:
    from workflows.planner.services import MAX_REVISION_ROUNDS  # the planner loads on use

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
    changes = workflow_changes(workflow=workflow)
    graph = graph_with_types(workflow_graph_data(workflow), report.spec, registry)
    return Review(
        graph=graph_with_changes(graph, changes) if changes else graph,
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
        changes=changes,
        tally=approval_tally(version=workflow),
        routing=_routing(report.spec, registry),
        concurrency=concurrency_text(report.spec),
        rate_limits=_rate_limits(workflow, report.spec, registry),
        tools=tool_rows(report.spec, registry, workflow.tool_pins),
        stale_sources=_stale_sources(report.spec),
        scenarios=tuple(scenario_rows(version=workflow)) if report.spec is not None else (),
        limits=limit_rows(report.spec),
        costs=version_costs(workflow=workflow, spec=report.spec, history=list(history)),
        **_planner_sources(workflow, report.spec),
    )


def _routing(spec: WorkflowSpec | None, registry: ToolRegistry) -> tuple[RoutingNote, ...]:
    """The routing notes of a definition that parses (none for one that does not)."""
    if spec is None:
        return ()
    site = settings.FLOWPILOT_MAX_PARALLEL_STEPS
    return tuple(routing_notes(spec, registry, in_process_steps=site))


def concurrency_text(spec: WorkflowSpec | None) -> str:
    """What a version's ``concurrency`` block means for its runs, before approval."""
    if spec is None:
        return ""
    if spec.concurrency is None:
        return "No concurrency limit: every run starts at once, however many are running."
    text = spec.concurrency.describe()
    return text[0].upper() + text[1:] + "."


def _rate_limits(
    workflow: Workflow, spec: WorkflowSpec | None, registry: ToolRegistry
) -> tuple[LimitNote, ...]:
    """The rate-limit notes of a definition that parses (none for one that does not)."""
    if spec is None:
        return ()
    inputs = sample_input_defaults(workflow, dict(spec.inputs))
    return rate_limit_notes(spec=spec, registry=registry, inputs=inputs)


def _planner_sources(workflow: Workflow, spec: WorkflowSpec | None) -> dict[str, Any]:
    """The templates, the answered questions, the tools offered and the lessons shown of
    the attempt that produced ``workflow``."""
    produced = plan_attempts_for_version(workflow=workflow).last()
    if produced is None:
        return {}
    answered = [
        {"question": q["question"], "answer": r.get("answers", {}).get(q["id"], "")}
        for r in produced.clarifications or []
        for q in r.get("questions") or []
    ]
    called = (
        {t for step in spec.steps for t in (*step.direct_tools(), *step.model_tools())}
        if spec is not None
        else set()
    )
    offered = [
        {**tool, "used": tool.get("name") in called}
        for tool in produced.offered_tools or []
        if isinstance(tool, dict)
    ]
    return {
        "templates": tuple(produced.templates or []),
        "clarifications": tuple(answered),
        "offered_tools": tuple(offered),
        "catalog_ranked": any(tool.get("score") is not None for tool in offered),
        "lessons": tuple(
            lesson for lesson in store_unescape(produced.lessons or []) if isinstance(lesson, dict)
        ),
    }


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
