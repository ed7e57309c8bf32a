"""`workflow` steps: the workflow they run exists and is active, their mapped inputs are
the child's declared inputs, and no chain of calls recurses or nests too deep.

The checks read the called workflows through a ``WorkflowLookup`` (a name → the spec of
its active version). ``ActiveWorkflows`` reads them from the database, once per name and
validation; tests and the planner may pass their own. Without a lookup (schema-only
validation, ``registry=None``) these checks are skipped, like the tool checks.
"""

from __future__ import annotations

from typing import Any, Protocol

from django.conf import settings
from pydantic import ValidationError

from workflows.graph import GraphCycleError, build_graph
from workflows.models import Workflow, WorkflowStatus
from workflows.schema import LoopStep, WorkflowSpec, WorkflowStep
from workflows.validation.report import ValidationIssue, error, names, suggest


class WorkflowLookup(Protocol):
    def get(self, name: str) -> WorkflowSpec | None: ...


class ActiveWorkflows:
    """The active version of each workflow, by name, read from the database once."""

    def __init__(self) -> None:
        self._specs: dict[str, WorkflowSpec | None] = {}

    def get(self, name: str) -> WorkflowSpec | None:
        if name not in self._specs:
            self._specs[name] = active_spec(name)
        return self._specs[name]


def active_version(name: str) -> Workflow | None:
    """The active version of workflow ``name`` (the newest, should there be two)."""
    return (
        Workflow.objects.filter(name=name, status=WorkflowStatus.ACTIVE)
        .order_by("-version")
        .first()
    )


def active_spec(name: str) -> WorkflowSpec | None:
    version = active_version(name)
    if version is None:
        return None
    try:
        return WorkflowSpec.model_validate(version.definition)
    except ValidationError:
        return None  # a stored definition that no longer parses runs nothing


def max_depth() -> int:
    """How many levels of `workflow` steps may nest (``FLOWPILOT_MAX_WORKFLOW_DEPTH``)."""
    return int(settings.FLOWPILOT_MAX_WORKFLOW_DEPTH)


def child_output_fields(spec: WorkflowSpec) -> tuple[str, ...] | None:
    """The fields of a child run's outputs: its declared outputs, else its sink steps."""
    if spec.outputs:
        return tuple(spec.outputs)
    try:
        graph = build_graph(spec)
    except (GraphCycleError, KeyError, ValueError):
        return None
    return tuple(s for s in graph.order if not graph.children[s])


def check_workflow_step(
    step: WorkflowStep | LoopStep, path: str, root: str, lookup: WorkflowLookup | None
) -> list[ValidationIssue]:
    """The issues of one `workflow` (or `loop`) step of workflow ``root`` (at ``path``)."""
    if lookup is None:
        return []
    if step.workflow == root:
        return [_recursion(step, path, [root, root])]
    child = lookup.get(step.workflow)
    if child is None:
        message = (
            f"step `{step.id}` runs workflow `{step.workflow}`, but no version of "
            f"`{step.workflow}` is active; approve it first, or name an active workflow"
        )
        return [error("unknown_workflow", f"{path}.workflow", message, step.id)]
    return _inputs(step, child, path) + _nesting(step, path, root, child, lookup)


def _inputs(step: WorkflowStep | LoopStep, child: WorkflowSpec, path: str) -> list[ValidationIssue]:
    issues = []
    declared = list(child.inputs)
    loop = isinstance(step, LoopStep)
    fields = ("input_mapping", "iteration_mapping") if loop else ("input_mapping",)
    mapped = {param: field for field in fields for param in getattr(step, field)}
    for param, field in mapped.items():
        if param not in child.inputs:
            message = (
                f"step `{step.id}` maps `{param}`, but workflow `{step.workflow}` declares no "
                f"input `{param}`{suggest(param, declared)}; its inputs are "
                f"{names(declared)}"
            )
            where = f"{path}.{field}.{param}"
            issues.append(error("unknown_workflow_input", where, message, step.id))
    for name, spec in child.inputs.items():
        if spec.is_required and name not in step.input_mapping:
            if name in mapped:  # only in iteration_mapping: null on the first iteration
                message = (
                    f"loop `{step.id}` maps `{name}`, a required input of workflow "
                    f"`{step.workflow}`, only in its iteration_mapping, which is null on the "
                    "first iteration; map it in input_mapping too, or give it a default"
                )
                where = f"{path}.iteration_mapping.{name}"
                issues.append(error("missing_workflow_input", where, message, step.id))
                continue
            message = (
                f"step `{step.id}` does not map `{name}`, a required input of workflow "
                f"`{step.workflow}`; map it in the step's input_mapping"
            )
            issues.append(
                error("missing_workflow_input", f"{path}.input_mapping", message, step.id)
            )
    return issues


def _nesting(
    step: WorkflowStep | LoopStep, path: str, root: str, child: WorkflowSpec, lookup: WorkflowLookup
) -> list[ValidationIssue]:
    """A call chain through ``child`` that comes back to a workflow already on it, or
    nests deeper than ``max_depth()`` (the first one found, depth first, in step order)."""
    limit = max_depth()
    seen: set[tuple[str, int]] = set()

    def walk(spec: WorkflowSpec, trail: list[str]) -> ValidationIssue | None:
        if len(trail) - 1 > limit:
            return _too_deep(step, path, trail, limit)
        for inner in spec.steps:
            name = inner.called_workflow()
            if name is None:
                continue
            if name in trail:
                return _recursion(step, path, [*trail, name])
            if (name, len(trail)) in seen:
                continue
            seen.add((name, len(trail)))
            found = lookup.get(name)
            if found is not None and (issue := walk(found, [*trail, name])) is not None:
                return issue
        return None

    issue = walk(child, [root, step.workflow])
    return [issue] if issue is not None else []


def _recursion(step: Any, path: str, trail: list[str]) -> ValidationIssue:
    chain = " → ".join(trail)
    message = (
        f"step `{step.id}` runs workflow `{step.workflow}`, which comes back to "
        f"`{trail[-1]}`: {chain}; a workflow may not call itself, directly or through others"
    )
    return error("workflow_recursion", f"{path}.workflow", message, step.id)


def _too_deep(step: Any, path: str, trail: list[str], limit: int) -> ValidationIssue:
    chain = " → ".join(trail)
    message = (
        f"step `{step.id}` runs workflow `{step.workflow}`, which nests workflows "
        f"{len(trail) - 1} levels deep ({chain}); at most {limit} are allowed "
        "(FLOWPILOT_MAX_WORKFLOW_DEPTH)"
    )
    return error("workflow_too_deep", f"{path}.workflow", message, step.id)
