"""Per-kind rules: the unsupported-kind gate, and the hook for decision/transform/foreach.

The gate is one table: delete a kind's entry when its runtime ships.
"""

from __future__ import annotations

from typing import Any

from workflows.expressions import ExpressionError, compile_condition
from workflows.schema import DecisionStep, ForeachStep, TransformStep
from workflows.transform import TransformError, compile_transform
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error

# Step kinds the executor cannot run yet -> why. Remove an entry to enable the kind.
UNSUPPORTED_KINDS: dict[str, str] = {
    "llm": "the llm step runtime is not built yet",
}


def check_kinds(ctx: FlowContext) -> list[ValidationIssue]:
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        reason = UNSUPPORTED_KINDS.get(step.kind)
        if reason is not None:
            message = f"step `{step.id}` is a `{step.kind}` step, which cannot run: {reason}"
            issues.append(
                error("kind_not_supported", f"{ctx.step_path(index)}.kind", message, step.id)
            )
        issues += _check_step_kind_specifics(step, index=index, ctx=ctx)
    return issues


# --- kind-specific rules -------------------------------------------------------
# Conditions and JMESPath expressions are compiled here, so a typo is a validation
# error, never a run-time surprise.


def _check_step_kind_specifics(step: Any, *, index: int, ctx: FlowContext) -> list[ValidationIssue]:
    """Issues specific to one step's kind (``index`` is its position in ``steps``)."""
    path = ctx.step_path(index)
    if isinstance(step, DecisionStep):
        return _decision_structure(step, path, ctx) + _decision_conditions(step, path)
    if isinstance(step, ForeachStep):
        return _foreach_structure(step, path)
    if isinstance(step, TransformStep):
        return _transform_expression(step, path)
    return []


def _decision_structure(step: DecisionStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    if ctx.edge_labels(step.id):
        return []
    message = (
        f"decision `{step.id}` has no outgoing edge with `when`, so its choice changes nothing; "
        f"add edges labelled with its branches"
    )
    return [error("decision_without_edges", path, message, step.id)]


def _decision_conditions(step: DecisionStep, path: str) -> list[ValidationIssue]:
    if step.decision_prompt:
        reason = "LLM decisions (`decision_prompt`) need the llm runtime, which is not built yet"
        message = f"decision `{step.id}` cannot run: {reason}"
        return [error("kind_not_supported", f"{path}.decision_prompt", message, step.id)]
    if not step.conditions and not step.default:
        message = (
            f"decision `{step.id}` has neither `conditions` nor a `default` branch, so it can "
            "never choose; give each branch a condition over its mapped values"
        )
        return [error("decision_without_conditions", path, message, step.id)]
    issues = []
    names = list(step.input_mapping)
    for label, text in step.conditions.items():
        try:
            compile_condition(text, names=names)
        except ExpressionError as exc:
            message = f"decision `{step.id}`, branch `{label}`: {exc.message}"
            issues.append(
                error("condition_invalid", f"{path}.conditions.{label}", message, step.id)
            )
    return issues


def _transform_expression(step: TransformStep, path: str) -> list[ValidationIssue]:
    try:
        compile_transform(step.expression)
    except TransformError as exc:
        message = f"transform `{step.id}`: {exc.message}"
        return [error("transform_invalid", f"{path}.expression", message, step.id)]
    return []


def _foreach_structure(step: ForeachStep, path: str) -> list[ValidationIssue]:
    if "items" in step.input_mapping:
        return []
    message = f"foreach `{step.id}` does not map `items`, the list it runs its tool over"
    return [error("foreach_without_items", f"{path}.input_mapping", message, step.id)]
