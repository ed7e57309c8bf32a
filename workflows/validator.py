"""Workflow validation: every problem at once, each with its location and its fix.

``validate_workflow(data, registry=…)`` takes a raw mapping (from a file) or a
``WorkflowSpec`` and returns a ``ValidationReport``; ``report.raise_for_errors()``
raises ``WorkflowInvalid`` carrying the report. A raw mapping that fails the
schema yields its ``schema_invalid`` issues and the cross checks' errors on the
parts that parsed (``workflows.validation.partial``); its report has no spec.

Every code, what triggers it and an example message: ``docs/validation.md``
(errors unless marked *warning* there; ``ISSUE_CODES`` below lists them).

The checks live in ``workflows.validation``, one module per concern.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from workflows.graph import FlowGraph
from workflows.schema import WorkflowSpec
from workflows.validation.branches import check_decisions, check_edge_labels, check_unreachable
from workflows.validation.context import FlowContext, ToolLookup, ToolSpecLike
from workflows.validation.credentials import (
    CredentialLookup,
    StoredCredentialNames,
    check_credentials,
)
from workflows.validation.edge_types import check_edge_types
from workflows.validation.env_access import check_env_access
from workflows.validation.exclusive import check_exclusive_reads
from workflows.validation.jmespath_checks import check_transforms
from workflows.validation.kinds import UNSUPPORTED_KINDS, check_kinds
from workflows.validation.partial import outside, salvage
from workflows.validation.reference_checks import (
    check_concurrency_key,
    check_references,
    check_unused_inputs,
)
from workflows.validation.report import (
    ValidationIssue,
    ValidationReport,
    WorkflowInvalid,
    sort_issues,
)
from workflows.validation.scenarios import check_scenarios
from workflows.validation.schema_errors import schema_issues
from workflows.validation.structure import check_structure
from workflows.validation.subworkflows import ActiveWorkflows, WorkflowLookup
from workflows.validation.taint import check_credential_flow
from workflows.validation.tool_checks import check_tools
from workflows.validation.triggers import check_triggers
from workflows.validation.types import check_foreach_items, check_input_defaults

__all__ = [
    "ISSUE_CODES",
    "UNSUPPORTED_KINDS",
    "ToolLookup",
    "ToolSpecLike",
    "ValidationIssue",
    "ValidationReport",
    "WorkflowInvalid",
    "validate_workflow",
]

# Every code the validator reports (docs/validation.md). Each has a golden file
# under tests/data/flows/invalid/<code>.yaml; a test keeps the two in step.
ISSUE_CODES = frozenset(
    {
        "schema_invalid",
        # structure
        "duplicate_step_id",
        "edge_unknown_step",
        "duplicate_edge",
        "self_loop",
        "cycle",
        "not_ancestor",
        # references
        "invalid_reference",
        "unknown_input",
        "env_in_prompt",
        "env_in_output",
        "env_not_allowed",
        "credential_leak",
        "item_outside_foreach",
        "unknown_output_field",
        "error_ref_without_continue",
        "unknown_output_reference",
        "unknown_step_reference",
        "template_in_mapping",
        "reference_in_text",
        "input_without_dollar",
        "step_reference_without_field",
        "confusable_character",
        "unused_input",
        # tools
        "unknown_tool",
        "tool_not_allowed",
        "prompt_tool_not_offered",
        "missing_required_param",
        "unknown_param",
        "param_type_mismatch",
        "credential_unknown",
        # types
        "input_default_invalid",
        "foreach_items_not_list",
        "edge_type_mismatch",
        "edge_type_unknown",
        # branches
        "when_on_non_decision",
        "unknown_branch",
        "branch_without_edge",
        "decision_default_unknown",
        "condition_unknown_branch",
        "unreachable_step",
        "exclusive_branch_read",
        # kinds
        "decision_without_edges",
        "foreach_without_items",
        "condition_invalid",
        "decision_without_conditions",
        "transform_invalid",
        "max_output_bytes_over_limit",
        "transform_unknown_name",
        "transform_quoted_field",
        "prompt_invalid",
        "output_schema_invalid",
        "endpoint_unknown",
        "llm_price_unknown",
        "budget_without_llm",
        # workflow steps
        "unknown_workflow",
        "unknown_workflow_input",
        "missing_workflow_input",
        "workflow_recursion",
        "workflow_too_deep",
        # loop steps
        "loop_iterations_over_limit",
        "loop_reference_invalid",
        # tool lifecycle (a warning)
        "tool_deprecated",
        # test scenarios
        "scenario_name_duplicate",
        "scenario_input_unknown",
        "scenario_output_unknown",
        "scenario_expectation_invalid",
        # triggers (workflows.validation.triggers)
        "trigger_on_itself",
        "trigger_input_unknown",
        "trigger_input_missing",
        "trigger_reference_invalid",
        "trigger_workflow_unknown",  # warning
        "trigger_tool_unknown",
        "trigger_tool_not_http",
        "trigger_tool_not_allowed",
        "trigger_args_invalid",
        "trigger_cursor_undeclared",
    }
)

_CHECKS: tuple[Callable[[FlowContext], list[ValidationIssue]], ...] = (
    check_input_defaults,
    check_foreach_items,
    check_references,
    check_unused_inputs,
    check_concurrency_key,
    check_tools,
    check_credentials,
    check_edge_labels,
    check_decisions,
    check_kinds,
    check_env_access,
    check_credential_flow,
    check_transforms,
    check_exclusive_reads,
    check_edge_types,
    check_scenarios,
    check_triggers,
)


def validate_workflow(
    data: Mapping[str, Any] | WorkflowSpec,
    *,
    registry: ToolLookup | None,
    workflows: WorkflowLookup | None = None,
    credentials: CredentialLookup | None = None,
) -> ValidationReport:
    """Validate a workflow against a tool registry; never raises for a bad workflow.

    ``registry`` needs only ``get(name) -> tool spec | None`` (see
    ``workflows.validation.context``). ``None`` skips every tool-dependent
    check (tools, parameters, output fields) — for schema-only callers — and the
    checks of `workflow` steps too. ``workflows`` reads the workflows those steps run
    (``workflows.validation.subworkflows``); by default, their active versions in the
    database, read only when the workflow has such a step. ``credentials`` gives the
    stored credentials' names (``workflows.validation.credentials``); by default read
    from the database, only when a step uses a tool that names one.
    """
    if workflows is None and registry is not None:
        workflows = ActiveWorkflows()
    if credentials is None and registry is not None:
        credentials = StoredCredentialNames()
    if isinstance(data, WorkflowSpec):
        spec = data
    else:
        try:
            spec = WorkflowSpec.model_validate(data)
        except ValidationError as exc:
            issues = schema_issues(exc, data)
            salvaged, placeholders = salvage(data)
            if salvaged is not None:
                found = _cross_checks(salvaged, registry, workflows, credentials)[0]
                issues += outside(found, placeholders)
            return ValidationReport(sort_issues(issues))
    issues, graph = _cross_checks(spec, registry, workflows, credentials)
    return ValidationReport(sort_issues(issues), spec, graph)


def _cross_checks(
    spec: WorkflowSpec,
    registry: ToolLookup | None,
    workflows: WorkflowLookup | None,
    credentials: CredentialLookup | None = None,
) -> tuple[list[ValidationIssue], FlowGraph | None]:
    ctx = FlowContext.build(spec, registry, workflows, credentials)
    issues, graph = check_structure(ctx)
    for check in _CHECKS:
        issues += check(ctx)
    if graph is not None:
        issues += check_unreachable(ctx, graph)
    return issues, graph
