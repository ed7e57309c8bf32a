"""Per-kind rules: the unsupported-kind gate, and the hook for decision/transform/foreach.

The gate is one table: delete a kind's entry when its runtime ships.
"""

from __future__ import annotations

from typing import Any

from workflows.schema import DecisionStep, ForeachStep
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


# --- HOOK: kind-specific rules ------------------------------------------------
# Owned by the step-kinds work (workflows/expressions.py). Extend here: compile
# decision `conditions` with `compile_condition(text, names)` (ExpressionError ->
# an issue at `steps[i].conditions.<label>`), compile transform expressions, and
# so on. For now only the structure checkable without those modules is checked.


def _check_step_kind_specifics(step: Any, *, index: int, ctx: FlowContext) -> list[ValidationIssue]:
    """Issues specific to one step's kind (``index`` is its position in ``steps``)."""
    path = ctx.step_path(index)
    if isinstance(step, DecisionStep):
        return _decision_structure(step, path, ctx)
    if isinstance(step, ForeachStep):
        return _foreach_structure(step, path)
    return []


def _decision_structure(step: DecisionStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    if ctx.edge_labels(step.id):
        return []
    message = (
        f"decision `{step.id}` has no outgoing edge with `when`, so its choice changes nothing; "
        f"add edges labelled with its branches"
    )
    return [error("decision_without_edges", path, message, step.id)]


def _foreach_structure(step: ForeachStep, path: str) -> list[ValidationIssue]:
    if "items" in step.input_mapping:
        return []
    message = f"foreach `{step.id}` does not map `items`, the list it runs its tool over"
    return [error("foreach_without_items", f"{path}.input_mapping", message, step.id)]
