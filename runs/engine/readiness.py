"""The pure readiness core: given the graph and every step's state, what happens next.

No I/O, no clock. Steps are visited in the graph's Kahn order (ties sorted), so the
same states always give the same answer. The services around it lock the run,
persist what it decides and start the steps (in threads or as Celery tasks).

Rules:
- a step runs when every parent is finished and at least one incoming edge is
  active; it is skipped when all incoming edges are inactive;
- an edge is active when its source succeeded (or failed under ``on_error:
  continue``) and, for a ``when`` edge, the source decision chose that branch;
- branches gate: a step with incoming ``when`` edges is skipped unless one of
  them is active, whatever else it reads;
- an edge from a parent that is also an ancestor of another parent (a value read
  from before the branch point, ``check.x`` beside ``page.id``) does not by itself
  keep a step running: otherwise every branch step reading upstream data would run
  on every branch, and a skip could never cascade;
- once a step has failed under ``on_error: fail``, nothing new starts; the run
  is finished when nothing is still in flight;
- an approval step waiting for its decision (``waiting``) keeps its children
  waiting; it is not in flight, so with nothing else to do the run waits.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from runs.state import STEP_IN_FLIGHT, STEP_TERMINAL, StepStatus
from workflows.graph import EdgeInfo, FlowGraph


@dataclass(frozen=True, slots=True)
class StepState:
    status: str = StepStatus.PENDING
    branch: str | None = None  # the label a decision step chose
    continued: bool = False  # failed, but under on_error: continue


@dataclass(frozen=True, slots=True)
class Actions:
    start: tuple[str, ...]  # ready steps, in execution order
    skip: tuple[str, ...]  # steps that can never run now
    in_flight: tuple[str, ...]
    fatal: tuple[str, ...]  # steps that failed the run
    done: bool  # nothing is in flight and nothing more will start
    # Approval steps waiting for their decision: with nothing in flight and nothing to
    # start, the run waits (``runs.engine.finish``) instead of finishing.
    waiting: tuple[str, ...] = ()

    @property
    def succeeded(self) -> bool:
        return self.done and not self.fatal


def _edge_active(edge: EdgeInfo, parent: StepState) -> bool:
    finished = parent.status == StepStatus.SUCCEEDED
    if finished or (parent.status == StepStatus.FAILED and parent.continued):
        return edge.when is None or edge.when == parent.branch
    return False


def _runs(graph: FlowGraph, incoming: Sequence[EdgeInfo], current: Mapping[str, StepState]) -> bool:
    """Whether a step whose parents all finished runs (else it is skipped)."""
    active = [e for e in incoming if _edge_active(e, current[e.source])]
    if len(active) == len(incoming):
        return True
    if any(e.when is not None for e in incoming) and all(e.when is None for e in active):
        return False  # none of the branches leading here was taken
    parents = {e.source for e in incoming}
    return any(
        e.when is not None
        or not any(e.source in graph.ancestors(p) for p in parents if p != e.source)
        for e in active
    )


def next_actions(graph: FlowGraph, states: Mapping[str, StepState]) -> Actions:
    """Decide what starts and what is skipped, from every step's state.

    ``graph`` is a ``workflows.graph.FlowGraph``. One pass over the whole graph: a
    driver that follows a run step by step keeps a ``Readiness`` instead.
    """
    return Readiness(ReadyPlan.of(graph), states).next()


@dataclass(frozen=True, slots=True)
class ReadyPlan:
    """What the incremental core needs of a graph, compiled once (immutable, shareable).

    ``position`` is each step's place in the graph's Kahn order (ties sorted): ready
    steps are decided in that order, so a skip cascades exactly as in one full pass.
    """

    graph: FlowGraph
    position: Mapping[str, int]

    @classmethod
    def of(cls, graph: FlowGraph) -> ReadyPlan:
        return cls(graph, MappingProxyType({s: i for i, s in enumerate(graph.order)}))


class Readiness:
    """One run's readiness, kept up to date step by step (a per-run object).

    Holds every step's state and, per pending step, how many parents have not
    finished yet. ``settle`` records a new state and touches only that step's
    children; ``next`` decides only the steps whose parents have all finished. So a
    run of N steps costs O(N + edges) over its whole life, not O(N) per step, and
    the answers are those of ``next_actions`` on the same states.

    States only move forward here (pending → in flight → finished); a run taken back
    (a resume) builds a new ``Readiness`` from its checkpoint.
    """

    def __init__(self, plan: ReadyPlan, states: Mapping[str, StepState]) -> None:
        graph = plan.graph
        self._plan = plan
        self._states = dict(states)
        self._waiting = {
            sid: sum(1 for p in graph.parents[sid] if self._states[p].status not in STEP_TERMINAL)
            for sid in graph.order
            if self._states[sid].status == StepStatus.PENDING
        }
        self._ready = [plan.position[s] for s, n in self._waiting.items() if n == 0]
        heapq.heapify(self._ready)
        # Steps in flight, kept sorted by graph position (two parallel lists), so ``next``
        # copies them instead of sorting thousands of running steps on every turn.
        flying = sorted(
            plan.position[s] for s, st in self._states.items() if st.status in STEP_IN_FLIGHT
        )
        self._flying_at = flying
        self._flying = [graph.order[p] for p in flying]
        self._fatal = {s for s, st in self._states.items() if _fatal(st)}
        self._parked = {s for s, st in self._states.items() if st.status == StepStatus.WAITING}
        self._held: list[str] = []  # ready to run, but a fatal failure stops new starts

    def state(self, step_id: str) -> StepState:
        return self._states[step_id]

    def settle(self, step_id: str, state: StepState) -> None:
        """Record ``step_id``'s new state; a step that finished frees its children."""
        before = self._states[step_id]
        if before.status in STEP_TERMINAL and state.status not in STEP_TERMINAL:
            raise ValueError(f"step `{step_id}` cannot go back from {before.status}")
        self._states[step_id] = state
        self._waiting.pop(step_id, None)
        self._flight(step_id, flying=state.status in STEP_IN_FLIGHT)
        if _fatal(state):
            self._fatal.add(step_id)
        if state.status == StepStatus.WAITING:
            self._parked.add(step_id)
        else:
            self._parked.discard(step_id)
        if state.status in STEP_TERMINAL and before.status not in STEP_TERMINAL:
            self._free_children(step_id)

    def _flight(self, step_id: str, *, flying: bool) -> None:
        """Add ``step_id`` to the steps in flight, or take it out (sorted by position)."""
        at = self._plan.position[step_id]
        i = bisect_left(self._flying_at, at)
        present = i < len(self._flying_at) and self._flying_at[i] == at
        if flying and not present:
            self._flying_at.insert(i, at)
            self._flying.insert(i, step_id)
        elif not flying and present:
            del self._flying_at[i], self._flying[i]

    def _free_children(self, step_id: str) -> None:
        position = self._plan.position
        for child in self._plan.graph.children[step_id]:
            if child in self._waiting:
                self._waiting[child] -= 1
                if self._waiting[child] == 0:
                    heapq.heappush(self._ready, position[child])

    def next(self) -> Actions:
        """What starts and what is skipped now. A started step stays pending here until
        the driver ``settle``s its new state (running, or failed before its call)."""
        graph, order = self._plan.graph, self._plan.graph.order
        start: list[str] = []
        skip: list[str] = []
        while self._ready:
            step_id = order[heapq.heappop(self._ready)]
            if self._states[step_id].status != StepStatus.PENDING or step_id not in self._waiting:
                continue
            incoming = graph.incoming(step_id)
            if incoming and not _runs(graph, incoming, self._states):
                self.settle(step_id, StepState(StepStatus.SKIPPED))
                skip.append(step_id)
            elif self._fatal:
                self._held.append(step_id)
            else:
                del self._waiting[step_id]
                start.append(step_id)
        position = self._plan.position
        in_flight = tuple(self._flying)
        fatal = tuple(sorted(self._fatal, key=position.__getitem__))
        done = not in_flight and not start
        waiting = tuple(sorted(self._parked, key=position.__getitem__)) if self._parked else ()
        return Actions(tuple(start), tuple(skip), in_flight, fatal, done, waiting)


def _fatal(state: StepState) -> bool:
    return state.status == StepStatus.FAILED and not state.continued


@dataclass(frozen=True, slots=True)
class Ready:
    start: tuple[str, ...]  # children that run now, in execution order
    skip: tuple[str, ...]  # children that can never run (their own children are next)


def ready_children(
    plan: ReadyPlan, step_id: str, states: Mapping[str, StepState], *, blocked: bool = False
) -> Ready:
    """The children of ``step_id`` (just finished) that start or are skipped now.

    For a driver that does not keep a ``Readiness`` (a Celery task settling one step):
    ``states`` needs only the children of ``step_id`` and their parents
    (``children_parents``), never the whole run. ``blocked``: a step has failed the run,
    so nothing new starts (skips still happen). A skipped child finishes too: call
    this again for it, with its own children's states, to cascade.
    """
    graph = plan.graph
    start: list[str] = []
    skip: list[str] = []
    for child in sorted(graph.children[step_id], key=plan.position.__getitem__):
        if states[child].status != StepStatus.PENDING:
            continue
        if any(states[p].status not in STEP_TERMINAL for p in graph.parents[child]):
            continue
        if not _runs(graph, graph.incoming(child), states):
            skip.append(child)
        elif not blocked:
            start.append(child)
    return Ready(tuple(start), tuple(skip))


def children_parents(plan: ReadyPlan, step_id: str) -> frozenset[str]:
    """The steps whose states ``ready_children`` reads for ``step_id``."""
    graph = plan.graph
    children = graph.children[step_id]
    return frozenset(children).union(*(graph.parents[c] for c in children))
