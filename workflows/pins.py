"""The tools a version was approved with: recorded at approval, checked before a run.

Approving records ``Workflow.tool_pins`` (tool name → definition hash) for every
tool the version allows. A version whose tools changed since — parameters, URL,
auth, outputs, or the tool removed — does not run: ``workflow_pins_check`` raises
``WorkflowInvalid`` with one ``tool_changed`` error per tool, naming it and what
changed, until a person re-approves the version (a validation run on the new
definitions, ``review.services.workflow_reapprove``).
"""

from __future__ import annotations

from tools.pins import tool_pin_changes, tool_pins_for
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.validation.report import ValidationIssue, ValidationReport, error


def workflow_tool_pins(*, spec: WorkflowSpec, registry: ToolRegistry) -> dict[str, str]:
    """The hash of every tool the version allows (what approving records)."""
    return tool_pins_for(names=spec.allowlist(), registry=registry)


def workflow_pin_issues(*, workflow: Workflow, registry: ToolRegistry) -> list[ValidationIssue]:
    """One ``tool_changed`` error per pinned tool that is not as it was approved."""
    return [
        error(
            "tool_changed",
            "tools",
            f"tool `{name}` changed since `{workflow}` was approved: {what}; "
            "re-approve the version to run it with the new definition",
        )
        for name, what in tool_pin_changes(pins=workflow.tool_pins or {}, registry=registry)
    ]


def workflow_pins_check(*, workflow: Workflow, registry: ToolRegistry) -> None:
    """Raise ``WorkflowInvalid`` when a tool of an approved version changed."""
    issues = workflow_pin_issues(workflow=workflow, registry=registry)
    if issues:
        ValidationReport(issues=tuple(issues)).raise_for_errors()
