"""Reads across exclusive branches: a step that runs only on one branch of a decision
reading a step that runs only on another always reads null.

A step runs *only on* some branches of a decision when the decision's explicit
edges with those labels lead to it and the edges of its other branches do not. Only the
explicit edges count: the reference being checked infers an edge of its own,
which would otherwise place the reader on both branches.
"""

from __future__ import annotations

from collections import defaultdict, deque

from workflows.references import StepRef
from workflows.schema import DecisionStep
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error


def check_exclusive_reads(ctx: FlowContext) -> list[ValidationIssue]:
    only = _only_on(ctx)
    if not only:
        return []
    issues = []
    for step_id, index in ctx.first_index.items():
        mine = only.get(step_id, {})
        for leaf in ctx.step_leaves[index]:
            if not isinstance(leaf.value, StepRef):
                continue
            read = leaf.value.step_id
            for decision, branches in sorted(mine.items()):
                theirs = only.get(read, {}).get(decision)
                if theirs is not None and not theirs & branches:
                    message = (
                        f"step `{step_id}` runs only on {_labels(branches)} of decision "
                        f"`{decision}` and reads `{leaf.value}`, but `{read}` runs only on "
                        f"{_labels(theirs)}, so it never ran and the value is always null; "
                        f"read a step that runs on every branch (one before `{decision}`)"
                    )
                    issues.append(error("exclusive_branch_read", leaf.path, message, step_id))
                    break
    return issues


def _labels(branches: frozenset[str]) -> str:
    word = "branch" if len(branches) == 1 else "branches"
    return f"{word} " + ", ".join(f"`{b}`" for b in sorted(branches))


def _only_on(ctx: FlowContext) -> dict[str, dict[str, frozenset[str]]]:
    """step id → {decision id: the branches of it the step runs on, when not all}."""
    children: dict[str, list[str]] = defaultdict(list)
    for edge in ctx.spec.edges:
        children[edge.from_].append(edge.to)
    only: dict[str, dict[str, frozenset[str]]] = defaultdict(dict)
    for step in ctx.spec.steps:
        if not isinstance(step, DecisionStep):
            continue
        regions: dict[str, set[str]] = {}
        for edge in ctx.spec.edges:
            if edge.from_ == step.id and edge.when in step.branches:
                regions.setdefault(edge.when, set()).update(_reach(edge.to, children, stop=step.id))
        for member in set().union(*regions.values()) if regions else ():
            on = frozenset(label for label, members in regions.items() if member in members)
            if on != frozenset(regions):
                only[member][step.id] = on
    return dict(only)


def _reach(start: str, children: dict[str, list[str]], *, stop: str) -> set[str]:
    seen = {start}
    queue = deque([start])
    while queue:
        for nxt in children.get(queue.popleft(), ()):
            if nxt not in seen and nxt != stop:
                seen.add(nxt)
                queue.append(nxt)
    return seen
