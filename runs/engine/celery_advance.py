"""Advancing a run after one Celery step settled, reading only what that step can change.

``distributed.advance_locked`` reads every step of the run and asks the pure
``next_actions``: right, but O(steps) per settle, so a hop of a long chain grew with
the chain. When a step *succeeded*, only its children can become ready, and in the
common case the answer needs only their parents' rows:

- a child whose parents all succeeded over plain edges (no ``when``) starts;
- a child with a parent not finished yet waits;
- anything else (a branch edge, a failed or skipped parent, a step failed earlier
  in the run) is decided by ``advance_locked`` over the whole run, so branches,
  skip cascades and ``on_error`` keep one implementation.

When no child starts and none waits, the run may be finished: one ``EXISTS`` for a
queued or running step, and if there is none ``advance_locked`` finishes the run
(once per run). The caller holds the run's row lock, as for ``advance_locked``.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from runs.engine.context import RunContext
from runs.engine.distributed import Held, Publish, advance_locked, queue_ready
from runs.models import Run
from runs.state import STEP_IN_FLIGHT, StepStatus


def advance_after(
    ctx: RunContext,
    run: Run,
    step_id: str,
    status: str,
    *,
    publish: Publish,
    now: datetime,
    hold: bool = False,
) -> Held | None:
    """Queue what ``step_id`` (just settled as ``status``) made ready; finish the run when
    nothing is left. Returns the pk of a step held for this task (see ``queue_ready``)."""
    full = lambda: advance_locked(ctx, run, publish=publish, now=now, hold=hold)  # noqa: E731
    if status != StepStatus.SUCCEEDED:
        return full()
    graph = ctx.graph
    children = graph.children[step_id]
    ready: dict[str, int] = {}
    waiting = False
    if children:
        rows = _rows(run, {step_id, *children, *(p for c in children for p in graph.parents[c])})
        if any(row[1] == StepStatus.FAILED for row in rows.values()):
            return full()  # a failure in the run: on_error decides what still starts
        for child in children:
            pk, child_status = rows[child]
            if child_status != StepStatus.PENDING:
                continue
            incoming = graph.incoming(child)
            parents = [rows[edge.source][1] for edge in incoming]
            if any(parent in _UNFINISHED for parent in parents):
                waiting = True
                continue
            if any(e.when is not None for e in incoming) or any(
                parent != StepStatus.SUCCEEDED for parent in parents
            ):
                return full()  # a branch or a skipped parent: the readiness core decides
            ready[child] = pk
    if ready:
        return queue_ready(ctx, ready, publish=publish, now=now, hold=hold)
    if waiting or run.step_results.filter(status__in=sorted(STEP_IN_FLIGHT)).exists():
        return None
    return full()  # nothing in flight: the run is done (or a resumed run has more to do)


_UNFINISHED = frozenset({StepStatus.PENDING, *STEP_IN_FLIGHT})


def _rows(run: Run, step_ids: set[str]) -> dict[str, tuple[int, str]]:
    """pk and status of ``step_ids``, and of every failed step of the run."""
    query = run.step_results.filter(Q(step_id__in=sorted(step_ids)) | Q(status=StepStatus.FAILED))
    return {
        sid: (pk, status)
        for pk, sid, status in query.order_by().values_list("pk", "step_id", "status")
    }
