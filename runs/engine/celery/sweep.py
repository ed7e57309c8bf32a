"""The sweeper (a Celery beat task): takes back steps lost with their worker.

A step of a Celery run always holds a lease (``runs.engine.celery``). When it runs
out:

- a **queued** step's message was lost (the broker restarted, the publishing process
  died after its commit): it is published again. A duplicate is harmless, since only
  one task can claim the step;
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
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from runs.engine.attempt import step_idempotent
from runs.engine.celery.advance import advance_locked
from runs.engine.celery.broker import Publish, lease_until, publish_step, time_limit_of
from runs.engine.celery.run import lock_run, run_context
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


def steps_sweep(*, now: datetime | None = None, publish: Publish = publish_step) -> dict[str, int]:
    """Take back queued and running steps whose lease ran out; returns what it did.

    Counts: ``republished`` (a queued step's message was lost), ``requeued`` (its worker
    died; the step runs again), ``failed`` (not idempotent, or lost too often: failed for
    review), ``abandoned`` (the run had already ended).
    """
    now = now or DEFAULT_CLOCK()
    run_ids = sorted(
        set(
            StepResult.objects.filter(
                status__in=sorted(STEP_IN_FLIGHT), lease_expires_at__lt=now
            ).values_list("run_id", flat=True)
        )
    )
    counts: Counter[str] = Counter()
    for run_id in run_ids:
        counts.update(_sweep_run(run_id, now=now, publish=publish))
    if run_ids:
        logger.warning("sweeper: %s", dict(counts))
    return {k: counts[k] for k in ("republished", "requeued", FAILED, "abandoned")}


def _sweep_run(run_id: int, *, now: datetime, publish: Publish) -> Counter[str]:
    counts: Counter[str] = Counter()
    with transaction.atomic():
        run = lock_run(run_id)
        # Skip rows a finishing task holds: never wait on a step row under the run lock.
        expired = list(
            run.step_results.filter(status__in=sorted(STEP_IN_FLIGHT), lease_expires_at__lt=now)
            .select_for_update(skip_locked=True)
            .order_by("step_id")
        )
        if not expired:
            return counts
        with run_context(run) as ctx:
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
    limit = time_limit_of(step)
    if run.status != RunStatus.RUNNING:
        _abandon(result, now)
        return "abandoned"
    if result.status == StepStatus.QUEUED:
        result.lease_expires_at = lease_until(settings.FLOWPILOT_QUEUED_LEASE, now)
        result.save(update_fields=["lease_expires_at", "updated_at"])
        transaction.on_commit(lambda: publish(result.pk, time_limit=limit))
        return "republished"
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
    transaction.on_commit(lambda: publish(result.pk, time_limit=limit))
    return "requeued"


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
