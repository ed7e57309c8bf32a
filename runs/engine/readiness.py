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
  is finished when nothing is still in flight.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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
    """Decide what starts and what is skipped. ``graph`` is a ``workflows.graph.FlowGraph``."""
    current = dict(states)
    start: list[str] = []
    skip: list[str] = []
    fatal = tuple(
        s
        for s in graph.order
        if current[s].status == StepStatus.FAILED and not current[s].continued
    )
    in_flight = tuple(s for s in graph.order if current[s].status in STEP_IN_FLIGHT)
    for step_id in graph.order:
        if current[step_id].status != StepStatus.PENDING:
            continue
        incoming = graph.incoming(step_id)
        if any(current[e.source].status not in STEP_TERMINAL for e in incoming):
            continue
        if incoming and not _runs(graph, incoming, current):
            current[step_id] = StepState(StepStatus.SKIPPED)
            skip.append(step_id)
        elif not fatal:
            start.append(step_id)
    done = not in_flight and not start
    return Actions(tuple(start), tuple(skip), in_flight, fatal, done)
