"""What a version was approved with: its tools and the workflows it runs, checked before a run.

Approving records ``Workflow.tool_pins`` (tool name → definition hash) for every
tool the version allows, and ``Workflow.workflow_pins`` (workflow name → definition
hash of its active version) for every workflow its `workflow` steps run. A version
whose tools changed since — parameters, URL, auth, outputs, or the tool removed — or
whose child workflow has another active version now, does not run:
``workflow_pins_check`` raises ``WorkflowInvalid`` with one ``tool_changed`` or
``workflow_changed`` error each, naming it and what changed, until a person
re-approves the version (a validation run on the new definitions,
``review.services.workflow_reapprove``).
"""

from __future__ import annotations

from typing import Any

from tools.pins import tool_pin_changes, tool_pins_for
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.validation.report import ValidationIssue, ValidationReport, error
from workflows.validation.subworkflows import active_version

# What a person reads for each part of a child workflow's definition.
_WORKFLOW_ASPECTS = ("inputs", "outputs", "steps", "edges", "tools")


def workflow_tool_pins(*, spec: WorkflowSpec, registry: ToolRegistry) -> dict[str, str]:
    """The hash of every tool the version allows (what approving records)."""
    return tool_pins_for(names=spec.allowlist(), registry=registry)


def workflow_child_pins(*, spec: WorkflowSpec) -> dict[str, str]:
    """The definition hash of the active version of every workflow its steps run."""
    pins = {}
    for name in sorted({n for s in spec.steps if (n := s.called_workflow()) is not None}):
        version = active_version(name)
        if version is not None:
            pins[name] = version.definition_hash
    return pins


def workflow_child_changes(*, pins: dict[str, str]) -> list[tuple[str, str]]:
    """``(workflow, what changed)`` for every pinned child whose active version is not
    the approved one any more, by name."""
    changes = []
    for name in sorted(pins):
        version = active_version(name)
        if version is None:
            changes.append((name, "it has no active version any more"))
        elif version.definition_hash != pins[name]:
            changes.append((name, _child_change(name, pins[name], version)))
    return changes


def _child_change(name: str, pinned_hash: str, active: Workflow) -> str:
    pinned = (
        Workflow.objects.filter(name=name, definition_hash=pinned_hash).order_by("-version").first()
    )
    now = f"v{active.version} is active now"
    if pinned is None:
        return f"{now}; its definition changed"
    parts = [
        aspect
        for aspect in _WORKFLOW_ASPECTS
        if _part(pinned.definition, aspect) != _part(active.definition, aspect)
    ]
    what = "its " + ", ".join(parts) + " changed" if parts else "its definition changed"
    return f"{now} (approved against v{pinned.version}); {what}"


def _part(definition: Any, key: str) -> Any:
    return definition.get(key) if isinstance(definition, dict) else None


def workflow_pin_issues(*, workflow: Workflow, registry: ToolRegistry) -> list[ValidationIssue]:
    """One ``tool_changed`` error per pinned tool that is not as it was approved, and one
    ``workflow_changed`` per pinned child workflow."""
    issues = [
        error(
            "tool_changed",
            "tools",
            f"tool `{name}` changed since `{workflow}` was approved: {what}; "
            "re-approve the version to run it with the new definition",
        )
        for name, what in tool_pin_changes(pins=workflow.tool_pins or {}, registry=registry)
    ]
    issues += [
        error(
            "workflow_changed",
            "steps",
            f"workflow `{name}`, which `{workflow}` runs as a step, changed since `{workflow}` "
            f"was approved: {what}; re-approve `{workflow}` to run it with the new version",
        )
        for name, what in workflow_child_changes(pins=workflow.workflow_pins or {})
    ]
    return issues


def workflow_pins_check(*, workflow: Workflow, registry: ToolRegistry) -> None:
    """Raise ``WorkflowInvalid`` when a tool or a child workflow of an approved version
    changed."""
    issues = workflow_pin_issues(workflow=workflow, registry=registry)
    if issues:
        ValidationReport(issues=tuple(issues)).raise_for_errors()
