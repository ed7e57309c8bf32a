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

A step of a plain chain needs even less: a child whose only incoming edge is a plain
edge from the settled step is ready exactly when it is pending and no step of the run
has failed, so it is started by one UPDATE conditional on both (``pending → running``
for the task to run next, or ``→ queued`` to publish when it has a time limit); no
row is read. If that UPDATE matches nothing, the general path above decides.

When no child starts and none waits, the run may be finished: one ``EXISTS`` for a
queued or running step, and if there is none ``advance_locked`` finishes the run
(once per run). The caller holds the run's row lock, as for ``advance_locked``.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from runs.engine.attempt import effective_retry
from runs.engine.celery_claim import no_failed_step
from runs.engine.context import RunContext
from runs.engine.distributed import (
    Held,
    Publish,
    T,
    Take,
    advance_locked,
    lease_until,
    queue_ready,
    time_limit_of,
)
from runs.models import Run, StepResult
from runs.state import STEP_IN_FLIGHT, StepStatus, step_update_returning
from workflows.graph import EdgeInfo


def advance_after(
    ctx: RunContext,
    run: Run,
    step_id: str,
    status: str,
    *,
    publish: Publish,
    now: datetime,
    take: Take[T] | None = None,
) -> Held | T | None:
    """Queue what ``step_id`` (just settled as ``status``) made ready; finish the run when
    nothing is left. Returns the step kept for this task, if any (see ``queue_ready``)."""
    full = lambda: advance_locked(ctx, run, publish=publish, now=now, take=take)  # noqa: E731
    if status != StepStatus.SUCCEEDED:
        return full()
    graph = ctx.graph
    children = graph.children[step_id]
    if len(children) == 1 and _sole_parent(graph.incoming(children[0])):
        lone = children[0]
        started, kept = _start_lone_child(ctx, run, lone, publish=publish, now=now, take=take)
        if started:
            return kept
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
        return queue_ready(ctx, ready, publish=publish, now=now, take=take)
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


def _sole_parent(incoming: tuple[EdgeInfo, ...]) -> bool:
    """One incoming edge, a plain one (no ``when``): the settled step is the only parent."""
    return len(incoming) == 1 and incoming[0].when is None


def _start_lone_child(
    ctx: RunContext,
    run: Run,
    child: str,
    *,
    publish: Publish,
    now: datetime,
    take: Take[T] | None,
) -> tuple[bool, T | None]:
    """Start ``child``, whose only parent just succeeded, with one conditional UPDATE:
    claimed for this task (``take``) or queued and published on commit. ``(False,
    None)`` when it is not pending or a step of the run failed (nothing written)."""
    step = ctx.spec.step(child)
    budget = effective_retry(ctx, step).max_attempts
    limit = time_limit_of(step)
    if take is not None and limit is None:
        kept = take(child, budget, True)
        return kept is not None, kept
    row = step_update_returning(
        StepResult,
        StepStatus.QUEUED,
        status=StepStatus.PENDING,
        match={"run": run.pk, "step_id": child},
        fields={
            "lease_expires_at": lease_until(settings.FLOWPILOT_QUEUED_LEASE, now),
            "claim_token": "",
            "started_at": None,
            "finished_at": None,
            "error": None,
            "updated_at": now,
        },
        plus={"attempt_limit": ("attempts", budget)},
        **no_failed_step(run.pk),
        returning=("id",),
    )
    if row is None:
        return False, None
    pk = row[0]
    transaction.on_commit(lambda: publish(pk, time_limit=limit))
    return True, None
