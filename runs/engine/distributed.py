"""The Celery driver: every step is its own task, so a run's branches spread over workers.

The contract:

- ``run_start`` moves a pending run to running and queues its first ready steps in one
  transaction; the step tasks are published when it commits.
- ``advance_locked`` is the coordinator. The caller holds the run's row lock
  (``select_for_update``); it asks the pure ``next_actions`` what starts and what is
  skipped, persists that, publishes the newly queued steps on commit and finishes the
  run when nothing is left. Every completion advances under that lock, so two steps
  finishing at once never queue a step twice or lose one. After a success the step
  task first tries ``runs.engine.celery_advance``, which starts a lone child of the
  step with one conditional UPDATE, or reads only the step's children and their
  parents, and falls back to this for anything but the plain case.
- ``runs.engine.celery_step`` is the step task's body: claim (a conditional UPDATE
  from ``queued``; a duplicate message loses it), one attempt, then a retry with the
  policy's countdown or the outcome and an advance under the run lock; a ready child
  it keeps from the broker (``queue_ready(take=…)``: claimed in the same transaction
  when it is the only one) it runs next itself.
- ``runs.engine.sweep`` (Celery beat) takes back steps whose lease ran out: lost
  messages are published again, steps of a dead worker are queued again (or failed for
  review when their tool is not idempotent).

Leases: a running step's lease is ``FLOWPILOT_STEP_LEASE`` seconds, renewed every
third of it (from the first second of an attempt on) by ``runs.engine.heartbeat``; a
queued step's lease is its due time plus ``FLOWPILOT_QUEUED_LEASE``. Steps of
in-process runs have no lease and are never swept. A result written under an older
claim (``claim_token``) is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Func, Subquery
from django.db.models.fields.json import KT
from kombu.exceptions import OperationalError as KombuOperationalError

from runs.engine import caches
from runs.engine.attempt import effective_retry
from runs.engine.build import build_run_context
from runs.engine.context import RunContext
from runs.engine.finish import run_finish
from runs.engine.readiness import StepState, next_actions
from runs.models import Run, StepResult
from runs.replay.recorder import call_recorder_for
from runs.state import (
    RunError,
    RunStateError,
    RunStatus,
    StepStatus,
    run_transition,
    step_transition,
)
from tools.models import Tool
from workflows.schema import AnyStep
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.engine")

STEP_TASK = "runs.execute_step"
HARD_LIMIT_GRACE = 10.0  # seconds between a step's soft and hard time limit


# A queued step kept back from the broker for the task that queued it: (pk, step id).
Held = tuple[int, str]

# Claims a ready step for the task that made it ready, in the caller's transaction:
# ``take(step_id, retry budget, unless_failed)`` returns what that task runs next, or
# None when the step was not pending (or, with ``unless_failed``, a step of the run
# failed). See ``queue_ready`` and ``celery_claim.claim_ready``.
T = TypeVar("T")
Take = Callable[[str, int, bool], T | None]

# How a queued step reaches a worker: ``publish(step_result_id, countdown=, time_limit=)``.
Publish = Callable[..., None]


def publish_step(
    step_result_id: int, *, countdown: float = 0.0, time_limit: float | None = None
) -> None:
    """Send the step task to the broker (tests inject a recorder instead).

    ``time_limit`` becomes the task's soft time limit; the hard limit follows it.
    """
    options: dict[str, Any] = {"countdown": countdown} if countdown else {}
    if time_limit:
        options.update(soft_time_limit=time_limit, time_limit=time_limit + HARD_LIMIT_GRACE)
    current_app.send_task(STEP_TASK, args=[step_result_id], **options)


def in_process() -> bool:
    """No broker configured (Celery eager): runs execute in this process, as before."""
    return bool(current_app.conf.task_always_eager)


def lease_until(seconds: float, now: datetime) -> datetime:
    return now + timedelta(seconds=seconds)


def time_limit_of(step: AnyStep) -> float | None:
    """The per-attempt limit enforced as the task's soft time limit.

    A foreach step applies its ``timeout`` to every item call instead.
    """
    return step.step_time_limit()


def run_context(run: Run, *, tools_key: tuple | None = None) -> RunContext:
    """A fresh context for one task of ``run`` (its own redactor and HTTP client).

    The compiled plan (by the version's hash: a version never changes) and the tool
    registry (by the tool table's state, ``tools_key``) come from this process's caches
    (``runs.engine.caches``): building a registry validates every built-in schema,
    more than a step task's own work.
    """
    return build_run_context(
        run_id=run.pk,
        run_uuid=str(run.uuid),
        plan=caches.plan_for_version(run.definition_hash, lambda: workflow_spec(run.workflow)),
        registry=caches.registry_for(caches.tools_state() if tools_key is None else tools_key),
        taps=call_recorder_for(run),  # a validation run records its tool and model calls
    )


# The Tool table's state, read beside the step row (no extra round trip): the newest
# update, the number of rows and of enabled rows.
TOOLS_KEY = {
    "tools_updated": Subquery(Tool.objects.order_by("-updated_at").values("updated_at")[:1]),
    "tools_count": Subquery(
        Tool.objects.order_by().annotate(n=Func("pk", function="COUNT")).values("n")
    ),
    "tools_enabled": Subquery(
        Tool.objects.filter(enabled=True)
        .order_by()
        .annotate(n=Func("pk", function="COUNT"))
        .values("n")
    ),
}


def tools_key(row: Any = None) -> tuple:
    """The Tool table's state (``caches.tools_state``), from a row annotated with
    ``TOOLS_KEY`` (read beside the step row, no extra round trip), or queried."""
    if row is not None:
        return caches.state_key(row.tools_updated, row.tools_count, row.tools_enabled or 0)
    return caches.tools_state()


def lock_run(run_id: int) -> Run:
    """The run, row-locked until the transaction ends."""
    return Run.objects.select_for_update().get(pk=run_id)


# --- the coordinator -----------------------------------------------------------


class BrokerUnavailable(RunError):
    code = "broker_unavailable"


def run_start(*, run: Run, publish: Publish = publish_step) -> Run:
    """Move a pending run to running and queue its first steps (published on commit).

    Raises ``BrokerUnavailable`` when the broker refuses the steps: the run is started
    and its steps queued by then, so the sweeper publishes them again later.
    """
    try:
        with transaction.atomic():
            locked = lock_run(run.pk)
            with run_context(locked) as ctx:
                now = ctx.now()
                started = locked.started_at or now
                if not run_transition(locked, RunStatus.RUNNING, started_at=started):
                    raise RunStateError(f"run {locked.pk} is {locked.status}; it cannot start")
                advance_locked(ctx, locked, publish=publish, now=now)
    except KombuOperationalError as exc:
        raise BrokerUnavailable(
            f"run {run.pk} started, but its steps could not be sent to the broker ({exc}); "
            "the sweeper sends them again once the broker is back, or cancel it with "
            f"`manage.py cancelrun {run.pk}`"
        ) from exc
    logger.info("run %s started on the Celery workers", run.pk)
    return locked


def advance_locked(
    ctx: RunContext,
    run: Run,
    *,
    publish: Publish,
    now: datetime,
    take: Take[T] | None = None,
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
    if actions.start:
        ready = {sid: rows[sid][0] for sid in actions.start}
        held = queue_ready(ctx, ready, publish=publish, now=now, take=take)
    if actions.done:
        run_finish(ctx, run)
        logger.info("run %s %s", run.pk, run.status)
    return held


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
) -> Held | T | None:
    """Mark ready steps (step id → pk) queued, one UPDATE per retry budget, and publish
    them on commit.

    With ``take``, the first of them that has no time limit of its own is kept for the
    task that settled its parent, saving a broker round trip (a Celery time limit is
    per task, so only a step without one can share a task):

    - when it is the only ready step, ``take`` claims it in this transaction
      (``pending → running``: one UPDATE, no commit of its own) and its result is
      returned;
    - when others are published with it, it is queued like them but not published,
      and its ``(pk, step id)`` is returned: the task claims it after this commit,
      once the others are sent (a claimed step's lease is renewed only while its
      attempt runs, and publishing may wait on the broker). If that task dies first,
      the sweeper publishes it again.
    """
    jobs = [(pk, sid, time_limit_of(ctx.spec.step(sid))) for sid, pk in ready.items()]
    held = next(((pk, sid) for pk, sid, limit in jobs if limit is None), None) if take else None
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
        for pk, sid, limit in jobs:
            if (pk, sid) != held:
                publish(pk, time_limit=limit)

    transaction.on_commit(publish_all)
    return held


def _budget(ctx: RunContext, step_id: str) -> int:
    """The tries the step's retry policy allows from now (its ``attempt_limit`` step)."""
    return effective_retry(ctx, ctx.spec.step(step_id)).max_attempts
