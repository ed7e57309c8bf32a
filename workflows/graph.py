"""The compiled graph of a workflow: steps, merged edges, a deterministic order.

Pure: no I/O, no clock, no Django. Edges come from two places:

* the explicit ``edges`` of the spec, and
* *inferred* ones: every ``STEP_ID.path`` reference in a step's ``input_mapping``
  (and a foreach ``item_mapping``) makes that step a child of the step it reads.

An explicit edge between the same two steps absorbs the inferred one
(``inferred=False``) and lists the references in ``via``; it keeps its
``when``, because an extra unconditional edge would silently defeat the branch.

``build_graph`` is strict and raises on the first structural problem; callers
that want every problem at once use ``workflows.validator``. Everything here is
linear in steps + edges (the order uses a heap for its sorted ties); ancestor
sets are computed on demand only, never all pairs up front.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tools.errors import FlowpilotError
from workflows.references import Literal, ReferenceError_, StepRef, parse_value
from workflows.schema import WorkflowSpec


class GraphError(FlowpilotError, ValueError):
    """The steps and edges do not form a graph (duplicate ids, unknown endpoints).

    Also a ``ValueError``: a bad definition is a bad value to whoever compiles it.
    """

    code = "graph_invalid"


class GraphCycleError(GraphError):
    """The graph is not a DAG; ``cycle`` is one cycle as step ids, first == last."""

    code = "graph_cycle"

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("steps form a cycle: " + " → ".join(cycle))
        self.cycle = cycle


@dataclass(frozen=True, slots=True)
class QuotedLiteral(Literal):
    """A value written as ``{"$literal": x}``: deliberately not a reference."""


@dataclass(frozen=True, slots=True)
class BadReference:
    """A malformed ``$…`` string, kept in place so every one can be reported."""

    text: str
    message: str


@dataclass(frozen=True, slots=True)
class EdgeInfo:
    source: str
    target: str
    when: str | None = None
    inferred: bool = False
    via: tuple[str, ...] = ()  # the references ("geo.lat") the target reads from the source


# --- Parsing mappings -------------------------------------------------------


def step_mappings(step: Any) -> dict[str, dict[str, Any]]:
    """The raw mappings of a step by field name: ``input_mapping`` (+ ``item_mapping``)."""
    return step.mappings()


def step_references(step: Any, step_ids: Collection[str]) -> dict[str, Any]:
    """Parsed mappings of one step: ``{"input_mapping": {param: parsed}, "item_mapping": …}``.

    ``item_mapping`` is present for foreach steps only. ``step_ids`` are the ids
    of the workflow (a dotted string is a step reference only when its head is
    one). Raises ``ReferenceError_`` for a malformed ``$…`` reference.
    """
    ids = step_ids if isinstance(step_ids, set | frozenset) else frozenset(step_ids)
    return {
        name: {param: parse_value(value, ids) for param, value in mapping.items()}
        for name, mapping in step_mappings(step).items()
    }


def parse_leniently(value: Any, step_ids: frozenset[str] | set[str]) -> Any:
    """Like ``parse_value``, but never raises.

    Malformed references become ``BadReference`` leaves and ``{"$literal": x}``
    becomes a ``QuotedLiteral``, so the validator can report every problem.
    """
    if isinstance(value, Mapping):
        if set(value) == {"$literal"}:
            return QuotedLiteral(value["$literal"])
        return {k: parse_leniently(v, step_ids) for k, v in value.items()}
    if isinstance(value, list):
        return [parse_leniently(v, step_ids) for v in value]
    try:
        return parse_value(value, step_ids)
    except ReferenceError_ as exc:
        return BadReference(value, str(exc))


def iter_leaves(parsed: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple, Any]]:
    """Every leaf (reference, literal, bad reference) of a parsed value, with its path."""
    if isinstance(parsed, dict):
        for key, value in parsed.items():
            yield from iter_leaves(value, (*path, key))
    elif isinstance(parsed, list):
        for index, value in enumerate(parsed):
            yield from iter_leaves(value, (*path, index))
    else:
        yield path, parsed


def inferred_edges(steps: Iterable[Any], step_ids: Collection[str]) -> dict[tuple, list[str]]:
    """``{(source, target): [reference, …]}`` from every step reference in the mappings.

    A step reading its own output appears as ``(id, id)``; callers decide.
    """
    ids = frozenset(step_ids)
    found: dict[tuple, list[str]] = defaultdict(list)
    for step in steps:
        for mapping in step_mappings(step).values():
            for value in mapping.values():
                for _, leaf in iter_leaves(parse_leniently(value, ids)):
                    if isinstance(leaf, StepRef):
                        found[(leaf.step_id, step.id)].append(str(leaf))
    return dict(found)


def merge_edges(
    explicit: Iterable[tuple[str, str, str | None]], inferred: Mapping[tuple, Iterable[str]]
) -> tuple[EdgeInfo, ...]:
    """Explicit ``(source, target, when)`` edges merged with inferred ones, sorted.

    Repeated explicit edges collapse into one; an inferred edge between two
    steps already joined by an explicit edge is absorbed into it.
    """
    vias = {pair: tuple(sorted(set(refs))) for pair, refs in inferred.items()}
    edges: dict[tuple, EdgeInfo] = {}
    for source, target, when in explicit:
        via = vias.get((source, target), ())
        edges.setdefault((source, target, when), EdgeInfo(source, target, when, False, via))
    covered = {(source, target) for source, target, _ in edges}
    for (source, target), via in vias.items():
        if (source, target) not in covered:
            edges[(source, target, None)] = EdgeInfo(source, target, None, True, via)
    return tuple(sorted(edges.values(), key=_edge_key))


def _edge_key(edge: EdgeInfo) -> tuple:
    return edge.source, edge.target, edge.when is not None, edge.when or ""


# --- The compiled graph -----------------------------------------------------


@dataclass(frozen=True)
class FlowGraph:
    """A DAG of steps. Build it with ``build_graph`` or ``FlowGraph.from_edges``."""

    step_ids: tuple[str, ...]  # in file order
    edges: tuple[EdgeInfo, ...]  # sorted by (source, target, when)
    parents: Mapping[str, tuple[str, ...]]  # sorted
    children: Mapping[str, tuple[str, ...]]  # sorted
    order: tuple[str, ...]  # Kahn's algorithm, ties broken by sorted step id
    levels: tuple[tuple[str, ...], ...]  # by depth: longest path from a root
    _incoming: Mapping[str, tuple[EdgeInfo, ...]] = field(repr=False, compare=False)
    _outgoing: Mapping[str, tuple[EdgeInfo, ...]] = field(repr=False, compare=False)
    _ancestors: dict[str, frozenset[str]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_edges(cls, step_ids: Iterable[str], edges: Iterable[EdgeInfo]) -> FlowGraph:
        """Compile; raises ``GraphError`` or ``GraphCycleError`` when it is not a DAG."""
        ids = tuple(step_ids)
        edges = tuple(sorted(edges, key=_edge_key))
        incoming, outgoing = _index_edges(ids, edges)
        parents = {s: tuple(sorted({e.source for e in incoming[s]})) for s in ids}
        children = {s: tuple(sorted({e.target for e in outgoing[s]})) for s in ids}
        order = kahn_order(ids, parents, children)
        if len(order) < len(ids):
            cycle = find_cycles(ids, edges)[0]
            raise GraphCycleError([cycle[0].source, *(e.target for e in cycle)])
        return cls(
            step_ids=ids,
            edges=edges,
            parents=MappingProxyType(parents),
            children=MappingProxyType(children),
            order=order,
            levels=_levels(order, parents),
            _incoming=MappingProxyType({s: tuple(v) for s, v in incoming.items()}),
            _outgoing=MappingProxyType({s: tuple(v) for s, v in outgoing.items()}),
        )

    def incoming(self, step_id: str) -> tuple[EdgeInfo, ...]:
        return self._incoming[step_id]

    def outgoing(self, step_id: str) -> tuple[EdgeInfo, ...]:
        return self._outgoing[step_id]

    def ancestors(self, step_id: str) -> frozenset[str]:
        """Every step with a path to ``step_id`` (computed on first use, then cached)."""
        cached = self._ancestors.get(step_id)
        if cached is None:
            seen: set[str] = set()
            queue = deque(self.parents[step_id])
            while queue:
                node = queue.popleft()
                if node not in seen:
                    seen.add(node)
                    queue.extend(self.parents[node])
            cached = self._ancestors[step_id] = frozenset(seen)
        return cached


def build_graph(spec: WorkflowSpec) -> FlowGraph:
    """Compile a spec's steps and (explicit + inferred) edges into a ``FlowGraph``.

    Raises ``GraphError`` for a duplicate step id or an edge to an unknown step,
    and ``GraphCycleError`` when the graph is not a DAG (a step reading its own
    output included). Malformed references infer nothing; the validator
    reports them.
    """
    ids = [step.id for step in spec.steps]
    seen: set[str] = set()
    for step_id in ids:
        if step_id in seen:
            raise GraphError(f"duplicate step id `{step_id}`")
        seen.add(step_id)
    explicit = [(edge.from_, edge.to, edge.when) for edge in spec.edges]
    return FlowGraph.from_edges(ids, merge_edges(explicit, inferred_edges(spec.steps, seen)))


def _index_edges(ids: tuple[str, ...], edges: tuple[EdgeInfo, ...]) -> tuple[dict, dict]:
    incoming: dict[str, list[EdgeInfo]] = {s: [] for s in ids}
    outgoing: dict[str, list[EdgeInfo]] = {s: [] for s in ids}
    if len(incoming) != len(ids):
        raise GraphError("step ids are not unique")
    for edge in edges:
        for end in (edge.source, edge.target):
            if end not in incoming:
                raise GraphError(f"edge {edge.source} → {edge.target}: unknown step `{end}`")
        if edge.source == edge.target:
            raise GraphCycleError([edge.source, edge.source])
        outgoing[edge.source].append(edge)
        incoming[edge.target].append(edge)
    return incoming, outgoing


# --- Algorithms (pure functions over ids and adjacency) ---------------------


def kahn_order(
    step_ids: Iterable[str],
    parents: Mapping[str, Iterable[str]],
    children: Mapping[str, Iterable[str]],
) -> tuple[str, ...]:
    """Topological order, ties broken by sorted step id. Shorter than the input on a cycle."""
    pending = {s: len(tuple(parents[s])) for s in step_ids}
    ready = [s for s, count in pending.items() if count == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for child in children[node]:
            pending[child] -= 1
            if pending[child] == 0:
                heapq.heappush(ready, child)
    return tuple(order)


def _levels(order: tuple[str, ...], parents: Mapping[str, tuple[str, ...]]) -> tuple:
    depth: dict[str, int] = {}
    for node in order:
        depth[node] = 1 + max((depth[p] for p in parents[node]), default=-1)
    grouped: dict[int, list[str]] = defaultdict(list)
    for node, level in depth.items():
        grouped[level].append(node)
    return tuple(tuple(sorted(grouped[level])) for level in sorted(grouped))


def strongly_connected(
    nodes: Iterable[str], successors: Mapping[str, Iterable[str]]
) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(successors.get(node, ()))))

    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        visit(root)
        while work:
            node, successors_left = work[-1]
            for nxt in successors_left:
                if nxt not in index:
                    visit(nxt)
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def find_cycles(step_ids: Iterable[str], edges: Iterable[EdgeInfo]) -> list[tuple[EdgeInfo, ...]]:
    """One shortest cycle per strongly connected component, from its smallest step id.

    A component with several cycles is reported once; fixing it reveals the rest.
    """
    outgoing: dict[str, list[EdgeInfo]] = defaultdict(list)
    for edge in sorted(edges, key=_edge_key):
        outgoing[edge.source].append(edge)
    successors = {s: [e.target for e in out] for s, out in outgoing.items()}
    cycles = []
    for component in strongly_connected(sorted(step_ids), successors):
        start = component[0]
        if len(component) > 1 or start in successors.get(start, ()):
            cycles.append(_shortest_cycle(start, set(component), outgoing))
    return sorted(cycles, key=lambda cycle: cycle[0].source)


def _shortest_cycle(
    start: str, members: set[str], outgoing: Mapping[str, list[EdgeInfo]]
) -> tuple[EdgeInfo, ...]:
    arrived_by: dict[str, EdgeInfo] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in outgoing.get(node, ()):
            if edge.target == start:
                path = [edge]
                while path[-1].source != start:
                    path.append(arrived_by[path[-1].source])
                return tuple(reversed(path))
            if edge.target in members and edge.target not in arrived_by:
                arrived_by[edge.target] = edge
                queue.append(edge.target)
    raise AssertionError(f"no cycle through `{start}` in its component")
