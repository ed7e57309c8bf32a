"""Decision branches match edge labels; steps behind impossible labels can never run."""

from __future__ import annotations

from workflows.graph import EdgeInfo, FlowGraph
from workflows.schema import DecisionStep
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, suggest, warning


def check_edge_labels(ctx: FlowContext) -> list[ValidationIssue]:
    """Every ``when`` names a branch of the decision step the edge leaves."""
    issues = []
    for index, edge in enumerate(ctx.spec.edges):
        source = ctx.step(edge.from_)
        if edge.when is None or source is None:
            continue
        path = f"edges[{index}].when"
        if not isinstance(source, DecisionStep):
            message = (
                f"edge `{edge.from_}` → `{edge.to}` has `when: {edge.when}`, but "
                f"`{edge.from_}` is a `{source.kind}` step; only decision steps pick branches"
            )
            issues.append(error("when_on_non_decision", path, message, edge.from_))
        elif edge.when not in source.branches:
            message = (
                f"edge `{edge.from_}` → `{edge.to}` has `when: {edge.when}`, which is not a "
                f"branch of decision `{edge.from_}` ({_labels(source)})"
            )
            issues.append(
                error(
                    "unknown_branch",
                    path,
                    message + suggest(edge.when, source.branches),
                    edge.from_,
                )
            )
    return issues


def check_decisions(ctx: FlowContext) -> list[ValidationIssue]:
    """``default`` and ``conditions`` name branches; every branch has an edge."""
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        if not isinstance(step, DecisionStep):
            continue
        path = ctx.step_path(index)
        if step.default is not None and step.default not in step.branches:
            message = (
                f"decision `{step.id}` defaults to `{step.default}`, not one of its branches "
                f"({_labels(step)}){suggest(step.default, step.branches)}"
            )
            issues.append(error("decision_default_unknown", f"{path}.default", message, step.id))
        for label in step.conditions:
            if label not in step.branches:
                message = f"decision `{step.id}` has a condition for `{label}`, not a branch"
                message += f" ({_labels(step)}){suggest(label, step.branches)}"
                issues.append(
                    error(
                        "condition_unknown_branch", f"{path}.conditions.{label}", message, step.id
                    )
                )
        labels = ctx.edge_labels(step.id)
        if not labels:
            continue  # no labelled edge at all: one error from the kind rules, not N warnings
        for k, label in enumerate(step.branches):
            if label not in labels:
                message = (
                    f"branch `{label}` of decision `{step.id}` has no edge with `when: {label}`"
                )
                issues.append(
                    warning("branch_without_edge", f"{path}.branches[{k}]", message, step.id)
                )
    return issues


def check_unreachable(ctx: FlowContext, graph: FlowGraph) -> list[ValidationIssue]:
    """Steps every path to which passes an edge whose ``when`` can never be chosen.

    Propagated in topological order: a step is reachable when it has no parent,
    or when some incoming edge comes from a reachable step and can be active.
    """
    reachable: dict[str, bool] = {}
    issues = []
    for step_id in graph.order:
        incoming = graph.incoming(step_id)
        reachable[step_id] = not incoming or any(
            reachable[e.source] and _can_be_active(ctx, e) for e in incoming
        )
        if not reachable[step_id]:
            message = (
                f"step `{step_id}` can never run: every path to it passes an edge whose "
                "`when` is not a branch of its decision"
            )
            index = ctx.first_index[step_id]
            issues.append(warning("unreachable_step", ctx.step_path(index), message, step_id))
    return issues


def _can_be_active(ctx: FlowContext, edge: EdgeInfo) -> bool:
    if edge.when is None:
        return True
    source = ctx.step(edge.source)
    return isinstance(source, DecisionStep) and edge.when in source.branches


def _labels(step: DecisionStep) -> str:
    return "branches: " + ", ".join(f"`{b}`" for b in step.branches)
