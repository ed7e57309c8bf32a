"""Settling a Celery step task's try: a retry, or the outcome and the run's advance.

What follows a failed try is ``tries.next_try``'s decision, as on every driver: a
retry goes back to ``queued`` with the try logged (``retry_in``, ``wait_reason``) and
the task publishes itself again with that countdown; anything else is the outcome.

Every write is conditional on the task's claim (``claim_token``): a result from a
claim the sweeper took back is ignored. The outcome is written first and the run
row locked second (by the same statement: the outcome's UPDATE reads its run's
status back ``FOR UPDATE``), which keeps the lock short; no writer waits on a
running step's row while holding the run lock, so the order cannot deadlock.
``step`` calls these while its heartbeat still renews the lease; ``children`` calls
``settle`` when a parked `workflow` step's child run ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from runs.engine import checkpoint
from runs.engine.attempt import StepOutcome, effective_retry, outcome_of
from runs.engine.celery.advance import Held, advance_after, advance_locked
from runs.engine.celery.broker import Publish, lease_until
from runs.engine.celery.claim import Taken, run_status_sql
from runs.engine.context import DEFAULT_CLOCK, Clock, RunContext
from runs.engine.kinds.base import Attempt
from runs.engine.tries import Retry, Tried, next_try
from runs.models import Run, StepResult
from runs.state import RunStatus, StepStatus, step_transition, step_update_returning
from tools.errors import FlowpilotError

# Claims a child the settled step made ready, for the settling task to run next, in the
# settle's transaction: ``take(stored output of the settled step, child id, retry
# budget, unless_failed)`` (``step``; see ``advance.Take``).
TakeNext = Callable[[Any, str, int, bool], Taken | None]

logger = logging.getLogger("flowpilot.engine")


@dataclass(frozen=True)
class Verdict:
    """What a step task did: ``claimed`` is False when it lost the claim (a duplicate).

    ``retry_in`` is set when the step went back to ``queued`` for a policy retry: the
    task must re-publish itself with that countdown.
    """

    claimed: bool
    status: str | None = None
    retry_in: float | None = None
    # A ready child for this same task to run next, kept from the broker: claimed by the
    # settle already (``Taken``), or queued, to claim (``Held``: pk, step id).
    follow: Taken | Held | None = None
    # The verdicts of the steps this task ran after its own (``follow``, and so on).
    continued: tuple[Verdict, ...] = ()
    # The outcome's output as stored (scrubbed, escaped): what a child reads of it.
    stored_output: Any = field(default=None, repr=False, compare=False)


def _locked_claim(result: StepResult, token: str) -> tuple[Run, StepResult] | None:
    """Lock the run, then re-read the step; None when the claim is no longer ours."""
    run = Run.objects.select_for_update().get(pk=result.run_id)
    current = StepResult.objects.get(pk=result.pk)
    if current.claim_token != token or current.status != StepStatus.RUNNING:
        logger.warning(
            "step `%s` of run %s: stale claim, result ignored", result.step_id, run.pk,
            extra={"step_id": result.step_id},
        )  # fmt: skip
        return None
    return run, current


def settle(
    ctx: RunContext,
    result: StepResult,
    token: str,
    tried: Tried[Attempt],
    *,
    publish: Publish,
    take: TakeNext | None = None,
    inputs: tuple[Any, bool] | None = None,
) -> Verdict:
    """Record the try: a retry (``next_try``), or the outcome and an advance of the run.
    ``inputs`` (the resolved-inputs record as stored, and whether it was capped) are
    written with it when the claim did not store them.

    The try's number within the retry budget is counted from ``attempt_limit`` (the
    policy's tries end there; a try lost with its worker raised it by one, so it does
    not use up the policy). With ``take``, one newly ready child may be kept for this
    task (``Verdict.follow``).
    """
    if tried.error is not None:
        policy = effective_retry(ctx, ctx.spec.step(result.step_id))
        budget_try = tried.record.number - (result.attempt_limit - policy.max_attempts)
        decision = next_try(policy, budget_try, tried.error, ctx.rand.random)
        if isinstance(decision, Retry):
            return _settle_retry(
                ctx, result, token, tried, decision, publish=publish, inputs=inputs
            )
    outcome = outcome_of(tried, (tried.record,))
    return settle_outcome(ctx, result, token, outcome, publish=publish, take=take, inputs=inputs)


def settle_outcome(
    ctx: RunContext,
    result: StepResult,
    token: str,
    outcome: StepOutcome,
    *,
    publish: Publish,
    take: TakeNext | None = None,
    inputs: tuple[Any, bool] | None = None,
) -> Verdict:
    """Write the outcome if the claim is still ours, then advance under the run lock.

    One transaction: the outcome's UPDATE (which locks the run row and reads its
    status back), then the advance (``advance.advance_after``), whose claim of a child kept
    for this task (``take``) is in it too, so a hop of a chain commits once. The step
    row is written before the run row is locked, which keeps the lock short. No writer
    waits on a running step's row while holding the run lock (the sweeper skips locked
    rows; the others only touch pending or queued ones), so this order cannot deadlock.
    """
    follow: Taken | Held | None = None
    with transaction.atomic():
        now = ctx.now()
        output, capped = checkpoint.outcome_output(ctx, outcome)
        run_status = _write_outcome(
            result, token, outcome, now, output=output, capped=capped, inputs=inputs
        )
        if run_status is None:
            logger.warning(
                "step `%s` of run %s: stale claim, result ignored", result.step_id, result.run_id,
                extra={"step_id": result.step_id},
            )  # fmt: skip
            return Verdict(claimed=True)
        if run_status == RunStatus.RUNNING:
            # Only the status was read (a run's inputs can be large); the rest loads on
            # use, once per run, when the run finishes.
            run = Run.from_db(Run.objects.db, ["id", "status"], [result.run_id, run_status])
            follow = advance_after(
                ctx, run, result.step_id, outcome.status, publish=publish, now=now,
                take=partial(take, output) if take is not None else None,
            )  # fmt: skip
    return Verdict(claimed=True, status=outcome.status, follow=follow, stored_output=output)


def _write_outcome(
    result: StepResult,
    token: str,
    outcome: StepOutcome,
    now: datetime,
    *,
    output: Any,
    capped: bool,
    inputs: tuple[Any, bool] | None,
) -> str | None:
    """``checkpoint.mark_finished`` as one UPDATE conditional on the claim, which locks
    the run row (``FOR UPDATE``) and returns its status; None when the claim is stale.
    With ``inputs``, the step's resolved inputs are written too."""
    row = step_update_returning(
        StepResult,
        outcome.status,
        status=StepStatus.RUNNING,
        match={"id": result.pk, "claim_token": token},
        fields={
            "output": output,
            "output_truncated": capped or outcome.truncated,
            "output_bytes": outcome.size,
            "error": checkpoint.storable(outcome.error),
            "attempt_log": [
                *(result.attempt_log or []),
                *checkpoint.stored_entries(outcome.attempts),
            ],
            "finished_at": None if outcome.status == StepStatus.WAITING else now,
            "updated_at": now,
            **_inputs_fields(inputs),
        },
        plus={"attempts": ("attempts", len(outcome.attempts))},
        returning_sql=(run_status_sql(lock=True),),
    )
    return None if row is None else row[0]


def _inputs_fields(inputs: tuple[Any, bool] | None) -> dict[str, Any]:
    if inputs is None:
        return {}
    record, capped = inputs
    return {"inputs": record, "inputs_truncated": capped}


def _settle_retry(
    ctx: RunContext,
    result: StepResult,
    token: str,
    tried: Tried[Attempt],
    wait: Retry,
    *,
    publish: Publish,
    inputs: tuple[Any, bool] | None = None,
) -> Verdict:
    """Back to ``queued``, due after ``wait``, unless the run ended meanwhile (then the
    try is the step's outcome)."""
    with transaction.atomic():
        locked = _locked_claim(result, token)
        if locked is None:
            return Verdict(claimed=True)
        run, current = locked
        if run.status == RunStatus.RUNNING:
            entry = tried.record.waiting(wait).entry()
            requeue(
                current, entry, ctx.now(), delay=wait.delay, error=tried.record.error,
                free=not wait.spends_try, **_inputs_fields(inputs),
            )  # fmt: skip
            return Verdict(claimed=True, status=StepStatus.QUEUED, retry_in=wait.delay)
    outcome = outcome_of(tried, (tried.record,))
    return settle_outcome(ctx, result, token, outcome, publish=publish, inputs=inputs)


def settle_failed_before_call(
    ctx: RunContext, result: StepResult, token: str, exc: FlowpilotError, *, publish: Publish
) -> Verdict:
    """A reference or template error: the step fails without a call, the run advances."""
    with transaction.atomic():
        locked = _locked_claim(result, token)
        if locked is None:
            return Verdict(claimed=True)
        run, current = locked
        checkpoint.mark_failed_before_call(ctx, current, exc.as_dict())
        if run.status == RunStatus.RUNNING:
            advance_locked(ctx, run, publish=publish, now=ctx.now())
        return Verdict(claimed=True, status=StepStatus.FAILED)


def settle_not_started(result: StepResult, token: str, *, now: Clock = DEFAULT_CLOCK) -> Verdict:
    """The run ended (cancelled) between the claim and the call: the step never starts."""
    with transaction.atomic():
        if _locked_claim(result, token) is not None:
            step_transition(
                StepResult.objects.filter(pk=result.pk),
                StepStatus.SKIPPED,
                finished_at=now(),
                claim_token="",
                lease_expires_at=None,
            )
    return Verdict(claimed=True, status=StepStatus.SKIPPED)


def requeue(
    result: StepResult,
    entry: dict[str, Any],
    now: datetime,
    *,
    delay: float,
    error: dict[str, Any] | None,
    free: bool = False,
    **also: Any,
) -> None:
    """Back to ``queued`` with the try's log ``entry`` recorded; due ``delay`` seconds
    from now (``also``: further fields, the try's inputs). ``free``: the try does not use
    up the retry policy (a rate limit held it back): the step's budget grows by one."""
    step_transition(
        result,
        StepStatus.QUEUED,
        attempts=(result.attempts or 0) + 1,
        attempt_log=[*(result.attempt_log or []), checkpoint.storable(entry)],
        attempt_limit=result.attempt_limit + (1 if free else 0),
        error=checkpoint.storable(error),
        claim_token="",
        lease_expires_at=lease_until(delay + settings.FLOWPILOT_QUEUED_LEASE, now),
        updated_at=now,
        **also,
    )
