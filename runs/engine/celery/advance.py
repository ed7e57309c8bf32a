"""Advancing a Celery run: what a settled step makes ready is queued (or kept), under the run lock.

``advance_locked`` is the coordinator. The caller holds the run's row lock
(``select_for_update``); it asks the pure ``next_actions`` what starts and what is
skipped, persists that, publishes the newly queued steps on commit and finishes the
run when nothing is left. Every completion advances under that lock, so two steps
finishing at once never queue a step twice or lose one.

It reads every step of the run: right, but O(steps) per settle, so a hop of a long
chain would grow with the chain. ``advance_after`` is what a settle calls: when a step
*succeeded*, only its children can become ready, and in the common case the answer
needs only their parents' rows:

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

A workflow with ``max_parallel`` always takes the whole-run path: ``advance_locked``
counts the run's queued and running steps and queues only as many ready steps as the
bound leaves room for, in the order ``next_actions`` gives them; the rest stay
``pending`` and are queued by a later settle, when a step leaves flight. The fast
paths above are skipped for it, since a settle must also start the ready steps held
back elsewhere in the run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.fields.json import KT

from runs.engine.attempt import effective_retry
from runs.engine.celery.broker import Publish, lease_until, step_queue, time_limit_of
from runs.engine.celery.claim import no_failed_step
from runs.engine.context import RunContext
from runs.engine.finish import run_finish
from runs.engine.readiness import StepState, next_actions
from runs.models import Run, StepResult
from runs.state import STEP_IN_FLIGHT, StepStatus, step_transition, step_update_returning
from tools.statements import bound_cursor
from workflows.graph import EdgeInfo
from workflows.schema import AnyStep

logger = logging.getLogger("flowpilot.engine")

# A queued step kept back from the broker for the task that queued it: (pk, step id).
Held = tuple[int, str]

# Claims a ready step for the task that made it ready, in the caller's transaction:
# ``take(step_id, retry budget, unless_failed)`` returns what that task runs next, or
# None when the step was not pending (or, with ``unless_failed``, a step of the run
# failed). See ``queue_ready`` and ``claim.claim_ready``.
T = TypeVar("T")
Take = Callable[[str, int, bool], T | None]


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
    nothing is left. Returns the step kept for this task, if any (see ``queue_ready``):
    only a step routed to this task's queue (``step_id``'s) can be kept."""
    here = step_queue(ctx, ctx.spec.step(step_id))
    full = lambda: advance_locked(  # noqa: E731
        ctx, run, publish=publish, now=now, take=take, task_queue=here
    )
    if status != StepStatus.SUCCEEDED or ctx.spec.max_parallel is not None:
        return full()
    graph = ctx.graph
    children = graph.children[step_id]
    if len(children) == 1 and _sole_parent(graph.incoming(children[0])):
        lone = children[0]
        started, kept = _start_lone_child(
            ctx, run, lone, publish=publish, now=now, take=take, task_queue=here
        )
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
        return queue_ready(ctx, ready, publish=publish, now=now, take=take, task_queue=here)
    if waiting or _any_in_flight(run.pk):
        return None
    return full()  # nothing in flight: the run is done (or a resumed run has more to do)


_UNFINISHED = frozenset({StepStatus.PENDING, *STEP_IN_FLIGHT})


def _any_in_flight(run_id: int) -> bool:
    """Whether a step of the run is queued or running: one precompiled statement (every
    settle of a step without children asks it; building it with the ORM cost more than
    running it)."""
    with bound_cursor(connection) as cursor:
        cursor.execute(_in_flight_sql(connection.vendor), [run_id, *_IN_FLIGHT])
        return cursor.fetchone() is not None


_IN_FLIGHT = sorted(str(status.value) for status in STEP_IN_FLIGHT)


@functools.cache
def _in_flight_sql(vendor: str) -> str:
    quote, opts = connection.ops.quote_name, StepResult._meta
    table, run = quote(opts.db_table), quote(opts.get_field("run").column)
    marks = ", ".join("%s" for _ in _IN_FLIGHT)
    return (
        f"SELECT 1 FROM {table} WHERE {table}.{run} = %s "  # noqa: S608 - names from metadata
        f"AND {table}.{quote('status')} IN ({marks}) LIMIT 1"
    )


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
    task_queue: str | None,
) -> tuple[bool, T | None]:
    """Start ``child``, whose only parent just succeeded, with one conditional UPDATE:
    claimed for this task (``take``) or queued and published on commit. ``(False,
    None)`` when it is not pending or a step of the run failed (nothing written)."""
    step = ctx.spec.step(child)
    budget = effective_retry(ctx, step).max_attempts
    limit = time_limit_of(step)
    if take is not None and _keepable(ctx, step, task_queue):
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
    pk, queue = row[0], step_queue(ctx, step)
    transaction.on_commit(lambda: publish(pk, time_limit=limit, queue=queue))
    return True, None


def advance_locked(
    ctx: RunContext,
    run: Run,
    *,
    publish: Publish,
    now: datetime,
    take: Take[T] | None = None,
    task_queue: str | None = None,
) -> Held | T | None:
    """Persist what ``next_actions`` decides; the caller holds the run's row lock.

    Reads only each step's status and decision branch (never the outputs), so
    an advance costs the same whatever the steps produced. With ``take``, one newly
    ready step without a time limit of its own is kept for the calling task to run
    next (``queue_ready``).
    """
    rows = {
        sid: (pk, status, branch)
        for pk, sid, status, branch in run.step_results.annotate(branch=KT("output__branch"))
        .order_by("step_id")
        .values_list("pk", "step_id", "status", "branch")
    }
    states = {sid: _state(ctx.spec.step(sid), *row[1:]) for sid, row in rows.items()}
    actions = next_actions(ctx.graph, states)
    if actions.skip:
        step_transition(
            StepResult.objects.filter(pk__in=[rows[sid][0] for sid in actions.skip]),
            StepStatus.SKIPPED,
            finished_at=now,
            updated_at=now,
        )
    held: Held | T | None = None
    start = _within_bound(ctx, actions.start, [row[1] for row in rows.values()])
    if start:
        ready = {sid: rows[sid][0] for sid in start}
        held = queue_ready(ctx, ready, publish=publish, now=now, take=take, task_queue=task_queue)
    if actions.done:
        run_finish(ctx, run)
        logger.info("run %s %s", run.pk, run.status, extra={"run_id": run.pk})
    return held


def _within_bound(ctx: RunContext, start: tuple[str, ...], statuses: list[str]) -> tuple[str, ...]:
    """The ready steps that may be queued now: all of them, or under the workflow's
    ``max_parallel`` as many as leave the run's queued and running steps at the bound."""
    bound = ctx.spec.max_parallel
    if bound is None:
        return start
    in_flight = sum(1 for status in statuses if status in STEP_IN_FLIGHT)
    return start[: max(0, bound - in_flight)]


def _state(step: AnyStep, status: str, branch: str | None) -> StepState:
    """``checkpoint.state_of`` from the columns ``advance_locked`` reads."""
    return StepState(
        status=status,
        branch=branch if step.picks_branch else None,
        continued=status == StepStatus.FAILED and step.on_error == "continue",
    )


def queue_ready(
    ctx: RunContext,
    ready: dict[str, int],
    *,
    publish: Publish,
    now: datetime,
    take: Take[T] | None = None,
    task_queue: str | None = None,
) -> Held | T | None:
    """Mark ready steps (step id → pk) queued, one UPDATE per retry budget, and publish
    them on commit.

    With ``take``, the first of them that has no time limit of its own and is routed to
    the queue of the task that settled its parent (``task_queue``) is kept for that task,
    saving a broker round trip (a Celery time limit is per task, so only a step without
    one can share a task; a step of another queue belongs to other workers):

    - when it is the only ready step, ``take`` claims it in this transaction
      (``pending → running``: one UPDATE, no commit of its own) and its result is
      returned;
    - when others are published with it, it is queued like them but not published,
      and its ``(pk, step id)`` is returned: the task claims it after this commit,
      once the others are sent (a claimed step's lease is renewed only while its
      attempt runs, and publishing may wait on the broker). If that task dies first,
      the sweeper publishes it again.
    """
    jobs = [
        (pk, sid, time_limit_of(step), step_queue(ctx, step))
        for sid, pk in ready.items()
        for step in (ctx.spec.step(sid),)
    ]
    held = (
        next(
            ((pk, sid) for pk, sid, limit, queue in jobs if limit is None and queue == task_queue),
            None,
        )
        if take
        else None
    )
    if take is not None and held is not None and len(jobs) == 1:
        return take(held[1], _budget(ctx, held[1]), False)
    by_budget: dict[int, list[int]] = {}
    for sid, pk in ready.items():
        by_budget.setdefault(_budget(ctx, sid), []).append(pk)
    for budget, pks in sorted(by_budget.items()):
        step_transition(
            StepResult.objects.filter(pk__in=pks),
            StepStatus.QUEUED,
            attempt_limit=F("attempts") + budget,
            lease_expires_at=lease_until(settings.FLOWPILOT_QUEUED_LEASE, now),
            claim_token="",
            started_at=None,
            finished_at=None,
            error=None,
            updated_at=now,
        )

    def publish_all() -> None:
        for pk, sid, limit, queue in jobs:
            if (pk, sid) != held:
                publish(pk, time_limit=limit, queue=queue)

    transaction.on_commit(publish_all)
    return held


def _keepable(ctx: RunContext, step: AnyStep, task_queue: str | None) -> bool:
    """Whether ``step`` may run in the task of a step routed to ``task_queue``: it has no
    Celery time limit of its own and its own queue is that one."""
    return time_limit_of(step) is None and step_queue(ctx, step) == task_queue


def _budget(ctx: RunContext, step_id: str) -> int:
    """The tries the step's retry policy allows from now (its ``attempt_limit`` step)."""
    return effective_retry(ctx, ctx.spec.step(step_id)).max_attempts
