"""Step ids, explicit edges, inferred edges, cycles — and the compiled graph.

Cycles are found only when Kahn's algorithm cannot order every step, so a valid
graph costs O(V + E). Then, first, an inferred edge that closes a loop with
explicit edges (a step reads a step that runs after it) is reported as
``not_ancestor`` on the reference itself; the remaining strongly connected
components are reported as one ``cycle`` each.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping

from workflows.graph import (
    EdgeInfo,
    FlowGraph,
    GraphCycleError,
    find_cycles,
    kahn_order,
    merge_edges,
    strongly_connected,
)
from workflows.references import StepRef
from workflows.validation.context import FlowContext, Leaf
from workflows.validation.report import ValidationIssue, error, format_path, names, suggest

ExplicitKey = tuple[str, str, str | None]


def check_structure(ctx: FlowContext) -> tuple[list[ValidationIssue], FlowGraph | None]:
    """All id/edge/cycle issues, and the graph when the steps form a DAG."""
    issues = check_duplicate_ids(ctx)
    edge_issues, explicit = _explicit_edges(ctx)
    self_issues, reads = _step_reads(ctx)
    issues += edge_issues + self_issues
    ids = list(ctx.first_index)
    inferred = {pair: [str(leaf.value) for leaf in leaves] for pair, leaves in reads.items()}
    edges = merge_edges(explicit, inferred)
    try:
        return issues, FlowGraph.from_edges(ids, edges)
    except GraphCycleError:
        pass
    late = _reads_of_later_steps(ids, edges, explicit)
    for pair in sorted(late):
        loop = _branch_loop(pair, explicit)
        if loop is not None:
            issues.append(loop)
        else:
            issues += [_not_ancestor(leaf, pair) for leaf in reads[pair]]
    remaining = [e for e in edges if (e.source, e.target) not in late]
    for cycle in find_cycles(ids, remaining):
        issues.append(_cycle_issue(ctx, cycle, explicit, reads))
    return issues, None


def check_duplicate_ids(ctx: FlowContext) -> list[ValidationIssue]:
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        first = ctx.first_index[step.id]
        if first != index:
            message = f"step id `{step.id}` is already used by steps[{first}]"
            issues.append(error("duplicate_step_id", f"steps[{index}].id", message, step.id))
    return issues


def _explicit_edges(ctx: FlowContext) -> tuple[list[ValidationIssue], dict[ExplicitKey, int]]:
    """Issues of the explicit edges, and the usable ones → their index in ``edges``."""
    issues: list[ValidationIssue] = []
    usable: dict[ExplicitKey, int] = {}
    for index, edge in enumerate(ctx.spec.edges):
        path = f"edges[{index}]"
        label = f"edge `{edge.from_}` → `{edge.to}`"
        unknown = [(end, name) for end, name in (("from", edge.from_), ("to", edge.to))]
        unknown = [(end, name) for end, name in unknown if name not in ctx.step_ids]
        for end, name in unknown:
            hint = suggest(name, ctx.step_ids)
            message = f"{label} names `{name}`, which is not a step{hint}"
            message += f" (the steps: {names(ctx.step_ids)})"
            issues.append(error("edge_unknown_step", f"{path}.{end}", message))
        if unknown:
            continue
        key = (edge.from_, edge.to, edge.when)
        if edge.from_ == edge.to:
            message = f"{label} leads from a step to itself"
            issues.append(error("self_loop", path, message, edge.from_))
        elif key in usable:
            message = f"{label} repeats edges[{usable[key]}]"
            issues.append(error("duplicate_edge", path, message, edge.from_))
        else:
            usable[key] = index
    return issues, usable


def _step_reads(ctx: FlowContext) -> tuple[list[ValidationIssue], dict[tuple, list[Leaf]]]:
    """Step references by (read step, reading step); a step reading itself is an issue."""
    issues: list[ValidationIssue] = []
    reads: dict[tuple, list[Leaf]] = defaultdict(list)
    for step_id, index in ctx.first_index.items():
        for leaf in ctx.step_leaves[index]:
            if not isinstance(leaf.value, StepRef):
                continue
            if leaf.value.step_id == step_id:
                message = (
                    f"step `{step_id}` reads `{leaf.value}`, its own output (if "
                    f'`{leaf.value}` is text, write {{"$literal": "{leaf.value}"}})'
                )
                issues.append(error("self_loop", leaf.path, message, step_id))
            else:
                reads[(leaf.value.step_id, step_id)].append(leaf)
    return issues, dict(reads)


def _reads_of_later_steps(
    ids: list[str], edges: tuple[EdgeInfo, ...], explicit: Mapping[ExplicitKey, int]
) -> set[tuple[str, str]]:
    """Inferred edges (source, target) where explicit edges lead from target to source.

    Only inferred edges inside a strongly connected component can close a loop.
    An edge that goes forward in the explicit edges' own topological order
    cannot; the others are settled with one search from their target.
    """
    successors: dict[str, list[str]] = defaultdict(list)
    for edge in edges:
        successors[edge.source].append(edge.target)
    components = [set(c) for c in strongly_connected(ids, successors)]
    component_of = {node: number for number, members in enumerate(components) for node in members}
    explicit_out: dict[str, list[str]] = {node: [] for node in ids}
    explicit_in: dict[str, list[str]] = {node: [] for node in ids}
    for source, target, _ in explicit:
        explicit_out[source].append(target)
        explicit_in[target].append(source)
    position = {node: i for i, node in enumerate(kahn_order(ids, explicit_in, explicit_out))}
    descendants: dict[str, set[str]] = {}
    late = set()
    for edge in edges:
        source, target = edge.source, edge.target
        if not edge.inferred or component_of[source] != component_of[target]:
            continue
        if source in position and target in position and position[source] < position[target]:
            continue
        if target not in descendants:
            members = components[component_of[target]]
            descendants[target] = _reach(target, explicit_out, members)
        if source in descendants[target]:
            late.add((source, target))
    return late


def _reach(start: str, successors: Mapping[str, list[str]], within: set[str]) -> set[str]:
    seen: set[str] = set()
    queue = deque([start])
    while queue:
        for nxt in successors.get(queue.popleft(), ()):
            if nxt in within and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def _branch_loop(
    pair: tuple[str, str], explicit: Mapping[ExplicitKey, int]
) -> ValidationIssue | None:
    """A ``cycle`` on the labelled edge through which a decision loops back to a step it
    reads (``when: retry`` back to the fetch), or ``None`` when no branch edge is on the way.
    """
    source, target = pair  # `target` reads `source`; explicit edges lead target → source
    arrived: dict[str, ExplicitKey] = {}
    queue = deque([target])
    while queue and source not in arrived:
        node = queue.popleft()
        for key in sorted(k for k in explicit if k[0] == node):
            if key[1] not in arrived and key[1] != target:
                arrived[key[1]] = key
                queue.append(key[1])
    path, node = [], source
    while node in arrived and node != target:
        path.append(arrived[node])
        node = arrived[node][0]
    labelled = [key for key in reversed(path) if key[2] is not None]
    if not labelled:
        return None
    frm, to, when = labelled[0]
    message = (
        f"edge `{frm}` → `{to}` (`when: {when}`) loops back: `{target}` reads `{source}`, so "
        f"`{source}` runs before it, and steps form a cycle; a workflow runs each step once. "
        f"Drop the edge (or branch `{when}`); to try a call again give `{to}` a `retry` "
        "policy (`retry: {max_attempts: N}`)"
    )
    return error("cycle", format_path(("edges", explicit[labelled[0]])), message, frm)


def _not_ancestor(leaf: Leaf, pair: tuple[str, str]) -> ValidationIssue:
    source, target = pair
    message = (
        f"step `{target}` reads `{leaf.value}`, but `{source}` runs after `{target}` "
        f"(the edges lead from `{target}` to `{source}`); drop the edge that makes "
        f"`{source}` wait for `{target}`, or read a step that runs before `{target}`"
    )
    return error("not_ancestor", leaf.path, message, target)


def _cycle_issue(
    ctx: FlowContext,
    cycle: tuple[EdgeInfo, ...],
    explicit: Mapping[ExplicitKey, int],
    reads: Mapping[tuple, list[Leaf]],
) -> ValidationIssue:
    """One issue per cycle, located at the edge (or reference) that closes it."""
    text = f"`{cycle[0].source}`"
    for edge in cycle:
        text += f" → `{edge.target}`"
        if edge.inferred:
            text += f" (reads `{edge.via[0]}`)"
    closing = cycle[-1]
    if closing.inferred:
        path = reads[(closing.source, closing.target)][0].path
    else:
        path = format_path(("edges", explicit[(closing.source, closing.target, closing.when)]))
    return error("cycle", path, f"steps form a cycle: {text}", closing.target)
