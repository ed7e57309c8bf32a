"""The sweeper (a Celery beat task): takes back steps lost with their worker.

A step of a Celery run always holds a lease (``runs.engine.celery``). When it runs
out:

- a **queued** step's message was lost (the broker restarted, the publishing process
  died after its commit): it is published again. A duplicate is harmless, since only
  one task can claim the step. When the broker says it lost everything it held
  (``broker.broker_forgot``: a Redis restart without persistence, a FLUSHDB), every
  queued step is published again at once, not when its lease runs out, keeping the
  countdown of a retry that was waiting;
- a **running** step's worker stopped renewing the lease (``kill -9``, a lost machine):
  the try is logged as ``lost`` and the step is queued again, unless its tool is not
  idempotent, in which case it is failed for review rather than repeated blindly (the
  ``run_prepare_resume`` rule), or it was lost ``FLOWPILOT_MAX_LOST_ATTEMPTS`` times
  (a step that kills its worker must not loop forever). A lost try does not use up
  the step's retry policy;
- a step of a run that already ended (cancelled) is closed: queued never starts,
  running is failed as lost.

Each run is handled under its row lock, like every other writer of its steps, so a
late result from a worker thought dead is discarded by its stale claim token.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from runs.engine.attempt import step_idempotent
from runs.engine.celery.advance import advance_locked
from runs.engine.celery.broker import (
    Publish,
    broker_forgot,
    lease_until,
    publish_step,
    step_queue,
    time_limit_of,
)
from runs.engine.celery.run import lock_run, run_context, run_log_fields
from runs.engine.celery.settle import requeue
from runs.engine.context import DEFAULT_CLOCK, RunContext
from runs.models import Run, StepResult
from runs.state import (
    STEP_IN_FLIGHT,
    InterruptedNonIdempotent,
    RunStatus,
    StepStatus,
    WorkerLost,
    step_transition,
)
from workflows.schema import Step

logger = logging.getLogger("flowpilot.engine")

FAILED = StepStatus.FAILED.value  # the sweep's count of steps it failed for review


def steps_sweep(
    *,
    now: datetime | None = None,
    publish: Publish = publish_step,
    broker_lost: Callable[[], bool] = broker_forgot,
) -> dict[str, int]:
    """Take back queued and running steps whose lease ran out, and every queued step
    when ``broker_lost()`` says the broker's messages are gone; returns what it did.

    Counts: ``republished`` (a queued step's message was lost), ``requeued`` (its worker
    died; the step runs again), ``failed`` (not idempotent, or lost too often: failed for
    review), ``abandoned`` (the run had already ended).
    """
    now = now or DEFAULT_CLOCK()
    due = Q(status__in=sorted(STEP_IN_FLIGHT), lease_expires_at__lt=now)
    if broker_lost():
        logger.warning("sweeper: the broker lost its messages; publishing queued steps again")
        due |= Q(status=StepStatus.QUEUED)
    run_ids = sorted(set(StepResult.objects.filter(due).values_list("run_id", flat=True)))
    counts: Counter[str] = Counter()
    for run_id in run_ids:
        counts.update(_sweep_run(run_id, due, now=now, publish=publish))
    if run_ids:
        logger.warning("sweeper: %s", dict(counts))
    return {k: counts[k] for k in ("republished", "requeued", FAILED, "abandoned")}


def _sweep_run(run_id: int, due: Q, *, now: datetime, publish: Publish) -> Counter[str]:
    counts: Counter[str] = Counter()
    with transaction.atomic():
        run = lock_run(run_id)
        # Skip rows a finishing task holds: never wait on a step row under the run lock.
        expired = list(
            run.step_results.filter(due).select_for_update(skip_locked=True).order_by("step_id")
        )
        if not expired:
            return counts
        with run_log_fields(run), run_context(run) as ctx:
            for result in expired:
                step = ctx.spec.step(result.step_id)
                action = _take_back(ctx, run, result, step, now=now, publish=publish)
                counts[action] += 1
            if counts[FAILED] and run.status == RunStatus.RUNNING:
                advance_locked(ctx, run, publish=publish, now=now)
    return counts


def _take_back(
    ctx: RunContext, run: Run, result: StepResult, step: Step, *, now: datetime, publish: Publish
) -> str:
    limit, queue = time_limit_of(step), step_queue(ctx, step)
    if run.status != RunStatus.RUNNING:
        _abandon(result, now)
        return "abandoned"
    if result.status == StepStatus.QUEUED:
        return _republish(result, now=now, publish=publish, limit=limit, queue=queue)
    entry: dict[str, Any] = {
        "attempt": result.attempts + 1,
        "started_at": result.started_at.isoformat() if result.started_at else None,
        "worker": result.worker,
        "status": "lost",
        "error": WorkerLost(
            f"the worker running step `{step.id}` ({result.worker}) stopped renewing its lease"
        ).record(),
    }
    lost = 1 + sum(1 for e in result.attempt_log or [] if e.get("status") == "lost")
    if not step_idempotent(ctx.registry, step):
        _fail_lost(result, entry, now, InterruptedNonIdempotent(step.id).record())
        return FAILED
    if lost >= settings.FLOWPILOT_MAX_LOST_ATTEMPTS:
        message = f"{entry['error']['message']}; lost {lost} times, not tried again"
        _fail_lost(result, entry, now, WorkerLost(message, retryable=False).record())
        return FAILED
    result.attempt_limit += 1  # a lost try does not use up the retry policy
    requeue(result, entry, now, delay=0, error=entry["error"])
    transaction.on_commit(lambda: publish(result.pk, time_limit=limit, queue=queue))
    return "requeued"


def _republish(
    result: StepResult, *, now: datetime, publish: Publish, limit: float | None, queue: str | None
) -> str:
    """Publish a queued step again, keeping what is left of a retry's countdown (a
    queued lease runs ``FLOWPILOT_QUEUED_LEASE`` past the time the step is due)."""
    queued_lease = settings.FLOWPILOT_QUEUED_LEASE
    due_at = result.lease_expires_at
    wait = max(0.0, (due_at - now).total_seconds() - queued_lease) if due_at else 0.0
    result.lease_expires_at = lease_until(wait + queued_lease, now)
    result.save(update_fields=["lease_expires_at", "updated_at"])
    if wait:
        transaction.on_commit(
            lambda: publish(result.pk, countdown=wait, time_limit=limit, queue=queue)
        )
    else:
        transaction.on_commit(lambda: publish(result.pk, time_limit=limit, queue=queue))
    return "republished"


def _fail_lost(result: StepResult, entry: dict, now: datetime, error: dict) -> None:
    step_transition(
        result,
        StepStatus.FAILED,
        attempts=(result.attempts or 0) + 1,
        attempt_log=[*(result.attempt_log or []), entry],
        error=error,
        finished_at=now,
        claim_token="",
        lease_expires_at=None,
        updated_at=now,
    )


def _abandon(result: StepResult, now: datetime) -> None:
    """A step of a run that already ended (cancelled): queued never starts; running is lost."""
    closed = {"finished_at": now, "claim_token": "", "lease_expires_at": None, "updated_at": now}
    if result.status == StepStatus.QUEUED:
        step_transition(result, StepStatus.SKIPPED, **closed)
        return
    lost = WorkerLost("the worker running this step was lost after the run ended", retryable=False)
    step_transition(result, StepStatus.FAILED, error=lost.record(), **closed)
