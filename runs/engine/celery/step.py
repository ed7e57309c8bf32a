"""One step as a Celery task: claim, heartbeat, one try, settle (``runs.tasks``).

``step_execute`` first *claims* the step (``run.claim_read``): one conditional
``UPDATE … SET status='running' WHERE status='queued' RETURNING …`` that reads back
the attempt counters, the whole run and the Tool table's state (on PostgreSQL one
statement, ``UPDATE … FROM``; elsewhere a read follows). A duplicate or late message
finds the step no longer queued and does nothing, so a succeeded step never runs
again. It then reads the upstream outputs the step references and resolves its
inputs, which are written with the step's outcome (or its retry). A database error
before the try gives the claim back (``running → queued``) and the task is retried;
a worker that dies leaves a running step without inputs, which the sweeper takes
back when its lease runs out, and the next claim resolves them again.

It makes **one** attempt; one that outlives a second has its lease renewed by the
process's heartbeat thread (``heartbeat``). The Celery soft time limit (the step's
``timeout``) becomes a ``tool_timeout`` error. Then it settles (``settle``):

- a failure ``tries.next_try`` retries goes back to ``queued`` (the try logged, with
  ``retry_in`` and ``wait_reason``); the task re-publishes itself with that
  countdown, so no worker sleeps while waiting;
- anything else is written with one UPDATE conditional on the claim (a result from
  a claim the sweeper took back is ignored) that also locks the run row, and the run
  is advanced (``advance.advance_after``: only the settled step's children are
  looked at) in the same transaction.

**Chains stay in the task.** Of the children a success makes ready, all are published
but one without a time limit of its own, which this task runs next (``continue_chain``,
no broker round trip, its parent's output from memory): a chain runs as one task per
worker, a fan-out still spreads over the workers. Only steps without a ``timeout``
share a task, since a Celery time limit covers the whole task. A child that is the
only step its parent made ready is claimed in the parent's settle transaction
(``claim.claim_ready``), so a hop of a chain is one commit: the parent's
outcome, the run lock, the child's claim.

Settling happens while the lease is still renewed, and a transient database error
while settling is retried on a new connection (``runs.engine.db_retry``): a finished
call's result is recorded by the task that made it, and the sweeper, seeing the
lease renewed, never takes the step back meanwhile.

Every attempt is logged with the worker that made it.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from runs.engine import checkpoint
from runs.engine.attempt import attempt_request, execute_attempt
from runs.engine.celery.broker import (
    Publish,
    lease_until,
    publish_step,
    step_queue,
    time_limit_of,
)
from runs.engine.celery.claim import Claim, Taken, claim, claim_ready
from runs.engine.celery.heartbeat import heartbeat
from runs.engine.celery.run import TapsFor, claim_read, run_context, run_log_fields
from runs.engine.celery.settle import (
    TakeNext,
    Verdict,
    settle,
    settle_failed_before_call,
    settle_not_started,
)
from runs.engine.context import DEFAULT_CLOCK, Clock, RunContext
from runs.engine.db_retry import with_db_retries
from runs.engine.finish import run_finished_announce
from runs.engine.kinds import KINDS
from runs.engine.kinds.base import Attempt
from runs.engine.local import CheckpointTruncated
from runs.engine.resolve import resolve_step_call
from runs.engine.tries import Tried, try_once
from runs.models import Run, StepResult
from runs.state import (
    RunStatus,
    StepStatus,
    StepUnstartable,
    run_transition,
    step_transition,
)
from tools.errors import FlowpilotError, ToolTimeout
from workflows.references import StepRef, iter_refs
from workflows.schema import AnyStep

logger = logging.getLogger("flowpilot.engine")


def step_execute(
    *,
    step_result_id: int,
    worker: str,
    publish: Publish = publish_step,
    now: Clock = DEFAULT_CLOCK,
    taps_for: TapsFor | None = None,
) -> Verdict:
    """Claim, try once, and settle one step (the body of the step task).

    The claim is the task's first read (``run.claim_read``); the inputs, resolved after
    it, are written with the outcome (a held step of a chain, claimed later, stores
    them with its claim, as a child claimed in its parent's settle does). When the
    step's success makes one child ready (a chain), that child is run next in this same
    task (``continue_chain``); its verdict is in ``Verdict.continued``. ``taps_for``
    gives the run's call taps (``runs.tasks``: a validation run records its calls).
    What the task logs once it has claimed the step carries the run's ids.
    """
    claimed = claim_read(step_result_id, worker=worker, now=now)
    if claimed is None:
        logger.debug("step result %s is not queued: duplicate or stale message", step_result_id)
        return Verdict(claimed=False)
    won, tools = claimed
    with run_log_fields(won.result.run):
        return _claimed_execute(
            won, tools, worker=worker, publish=publish, now=now, taps_for=taps_for
        )


def _claimed_execute(
    won: Claim,
    tools: tuple,
    *,
    worker: str,
    publish: Publish,
    now: Clock,
    taps_for: TapsFor | None,
) -> Verdict:
    """``step_execute`` once the step is claimed: build the context, resolve, try once,
    settle, and go on with the chain."""
    result = won.result
    run = result.run
    # The lease runs from the claim: renewed while the context is built and the inputs
    # resolved too (slow on a busy machine), not only once the try starts.
    beating = partial(heartbeat, result.pk, won.token, now=now, leased_at=won.leased_at)
    try:
        with beating():
            context = run_context(run, tools_key=tools, taps_for=taps_for)
    except FlowpilotError as exc:
        return _fail_unstartable(result, run, exc, token=won.token, now=now)
    except Exception:
        _release(won, now=now)
        raise
    with context as ctx:
        with beating():
            try:
                if won.run_status == RunStatus.RUNNING:
                    step = ctx.spec.step(result.step_id)
                    args, record, failure = _resolved(ctx, run, step, {})
                else:  # cancelled meanwhile: the step never starts, nothing to resolve
                    args, record, failure = {}, None, None
            except Exception:
                _release(won, now=now)
                raise
            verdict = _run_claimed(
                ctx, run, won, args, failure, worker=worker, publish=publish,
                inputs=checkpoint.stored_inputs(ctx, record),
            )  # fmt: skip
        if verdict.follow is None:
            return verdict
        more = continue_chain(ctx, run, result.step_id, verdict, worker=worker, publish=publish)
        return replace(verdict, continued=more)


def _release(won: Claim, *, now: Clock) -> None:
    """Give a claim back (``running → queued``) when the task fails before its try (a
    database error building the context or reading the upstream outputs): the task is
    retried and claims it again, instead of leaving it to the sweeper as a lost worker's
    step. If even this fails, the sweeper takes it back when its lease runs out."""
    result, token = won.result, won.token

    def give_back() -> int:
        at = now()
        return step_transition(
            StepResult.objects.filter(pk=result.pk, claim_token=token), StepStatus.QUEUED,
            claim_token="", lease_expires_at=lease_until(settings.FLOWPILOT_QUEUED_LEASE, at),
            updated_at=at,
        )  # fmt: skip

    try:
        with_db_retries(give_back, what=f"giving back the claim of step result {result.pk}")
    except Exception:
        logger.exception(
            "step result %s: claim not given back; the sweeper will", result.pk,
            extra={"step_id": result.step_id},
        )  # fmt: skip


def continue_chain(
    ctx: RunContext, run: Run, step_id: str, verdict: Verdict, *, worker: str, publish: Publish
) -> tuple[Verdict, ...]:
    """Run kept children one after the other in this task, no broker round trip between.

    A child that was the only step its parent made ready was claimed by the parent's
    settle (``Taken``: inputs resolved from the parent's output in memory, as stored,
    the claim in the same transaction as the parent's outcome), so the hop commits
    once. One kept beside siblings published to the broker is queued (``Held``) and
    claimed here, after they are sent. It stops when a step makes no child ready to
    keep, a held step loses its claim (the run was cancelled: its queued steps were
    skipped) or a step goes back to ``queued`` for a retry (then published with the
    policy's countdown, as a task retrying itself is).

    If this task dies, a claimed child's lease runs out and the sweeper takes it back
    like any step of a lost worker; a held one is queued with a lease, so the sweeper
    publishes it again. If a held one raises (the database went away), it is published
    before the exception goes on.
    """
    done: list[Verdict] = []
    while verdict.follow is not None:
        follow = verdict.follow
        if isinstance(follow, Taken):
            pk, step_id = follow.claim.result.pk, follow.claim.result.step_id
            verdict = _run_claimed(
                ctx, run, follow.claim, follow.args, follow.failure, worker=worker, publish=publish
            )
        else:
            parent = StepResult(status=StepStatus.SUCCEEDED, output=verdict.stored_output)
            known = {step_id: checkpoint.view_of(parent)}
            pk, step_id = follow
            try:
                verdict = _execute(ctx, run, pk, step_id, known, worker=worker, publish=publish)
            except Exception:
                # The task is retried for its own step only: send the held one to the
                # broker now rather than after its queued lease (a copy of a claimed one
                # does nothing).
                publish(pk, queue=step_queue(ctx, ctx.spec.step(step_id)))
                raise
        done.append(replace(verdict, stored_output=None))  # a long chain keeps no outputs
        if verdict.retry_in is not None:
            queue = step_queue(ctx, ctx.spec.step(step_id))
            publish(pk, countdown=verdict.retry_in, queue=queue)
    return tuple(done)


def _execute(
    ctx: RunContext,
    run: Run,
    step_result_id: int,
    step_id: str,
    known: dict[str, Any],
    *,
    worker: str,
    publish: Publish,
) -> Verdict:
    """Resolve, claim, attempt and settle one queued step of ``run``."""
    args, record, failure = _resolved(ctx, run, ctx.spec.step(step_id), known)
    inputs, capped = checkpoint.stored_inputs(ctx, record)
    won = claim(step_result_id, worker=worker, inputs=inputs, inputs_truncated=capped, now=ctx.now)
    if won is None:
        return Verdict(claimed=False)
    return _run_claimed(ctx, run, won, args, failure, worker=worker, publish=publish)


def _run_claimed(
    ctx: RunContext,
    run: Run,
    won: Claim,
    args: dict[str, Any],
    failure: FlowpilotError | None,
    *,
    worker: str,
    publish: Publish,
    inputs: tuple[Any, bool] | None = None,
) -> Verdict:
    """Attempt and settle a step this task claimed (``failure``: its inputs could not be
    resolved, so it fails without a call). ``inputs`` (stored record, capped) are
    written with the step's outcome or retry, when its claim did not store them."""
    result, token = won.result, won.token
    if won.run_status != RunStatus.RUNNING:
        return settle_not_started(result, token, now=ctx.now)
    if failure is not None:
        return settle_failed_before_call(ctx, result, token, failure, publish=publish)
    step = ctx.spec.step(result.step_id)
    # A child may share this task only if neither has a Celery time limit (the task's).
    take = partial(_take, ctx, run, step.id, worker) if time_limit_of(step) is None else None
    with heartbeat(result.pk, token, now=ctx.now, leased_at=won.leased_at):
        number, on_step = result.attempts + 1, {"step_id": step.id}
        logger.debug("run %s: step %s started (try %s)", run.pk, step.id, number, extra=on_step)
        tried = _try(ctx, step, args, number=number, worker=worker)
        logger.debug(
            "run %s: step %s try %s %s in %.0f ms",
            run.pk, step.id, tried.record.number, tried.record.status, tried.record.duration_ms,
            extra=on_step,
        )  # fmt: skip
        return with_db_retries(
            lambda: _flushed_settle(
                ctx, result, token, tried, publish=publish, take=take, inputs=inputs
            ),
            what=f"recording step `{step.id}` of run {run.pk}",
        )


def _flushed_settle(
    ctx: RunContext,
    result: StepResult,
    token: str,
    tried: Tried[Attempt],
    *,
    publish: Publish,
    take: TakeNext | None,
    inputs: tuple[Any, bool] | None,
) -> Verdict:
    """``settle``, the try's recorded calls (a validation run's taps) stored first: the
    outcome may finish the run, and whoever sees it finished (a replay of it) must find
    every call. The context's close would store them only after a chain continued in
    this task had finished the run."""
    if ctx.taps is not None:
        ctx.taps.flush()
    return settle(ctx, result, token, tried, publish=publish, take=take, inputs=inputs)


def _take(
    ctx: RunContext,
    run: Run,
    parent_id: str,
    worker: str,
    parent_output: Any,
    step_id: str,
    budget: int,
    unless_failed: bool,
) -> Taken | None:
    """Claim ``step_id``, made ready by ``parent_id``, for this task (in the parent's
    settle transaction): its inputs resolved first, the parent's output from memory."""
    parent = StepResult(status=StepStatus.SUCCEEDED, output=parent_output)
    known = {parent_id: checkpoint.view_of(parent)}
    args, record, failure = _resolved(ctx, run, ctx.spec.step(step_id), known)
    inputs, capped = checkpoint.stored_inputs(ctx, record)
    won = claim_ready(
        run.pk, step_id, budget=budget, worker=worker, inputs=inputs, inputs_truncated=capped,
        unless_failed=unless_failed, now=ctx.now,
    )  # fmt: skip
    return None if won is None else Taken(won, args, failure)


def _resolved(
    ctx: RunContext, run: Run, step: AnyStep, known: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None, FlowpilotError | None]:
    """``_resolve``, its error returned: ``(args, inputs record, None)`` or ``({}, None,
    error)`` (the step is claimed anyway, then fails without a call)."""
    try:
        args, record = _resolve(ctx, run, step, known)
    except FlowpilotError as exc:
        return {}, None, exc
    return args, record, None


def _resolve(
    ctx: RunContext, run: Run, step: AnyStep, known: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The step's inputs, read from the stored outputs of the steps it references
    (those in ``known``, a parent's output this task just stored, are not read again).

    An output stored as a capped preview (over ``FLOWPILOT_MAX_STORED_OUTPUT_BYTES``)
    cannot feed a step on another worker: that fails clearly instead of reading null.
    """
    parsed = [ctx.parsed[step.id], ctx.parsed_items.get(step.id, {})]
    names = {ref.step_id for ref in iter_refs(parsed) if isinstance(ref, StepRef)}
    views = {name: known[name] for name in names if name in known}
    if missing := sorted(names - views.keys()):
        rows = StepResult.objects.filter(run=run, step_id__in=missing).only(
            "step_id", "status", "output", "error"
        )
        views.update({r.step_id: checkpoint.view_of(r) for r in rows})
    for name in sorted(names):
        if _is_preview(views.get(name)):
            raise CheckpointTruncated(
                f"step `{step.id}` reads the output of `{name}`, which was stored truncated "
                "(over FLOWPILOT_MAX_STORED_OUTPUT_BYTES), so a step on a Celery worker cannot "
                "read it; raise the limit, or run this workflow in process"
            )
    args, record = resolve_step_call(ctx, step, inputs=run.inputs, step_value=views.get)
    if KINDS[step.kind].carries:  # its own row may hold the progress of an earlier try
        own = StepResult.objects.only("reused", "output", "output_truncated").get(
            run=run, step_id=step.id
        )
        args = checkpoint.with_progress(step, own, args, record)
    return args, record


def _is_preview(value: Any) -> bool:
    """The shape ``checkpoint.stored_output`` stores in place of an oversized output."""
    return isinstance(value, dict) and value.get("_truncated") is True and "preview" in value


def _try(
    ctx: RunContext, step: AnyStep, args: dict[str, Any], *, number: int, worker: str
) -> Tried[Attempt]:
    """The task's one try (``tries.try_once``); the task's soft time limit running out
    during it is the step's ``tool_timeout``."""

    def call() -> Attempt:
        try:
            return execute_attempt(ctx, step, args)
        except (FlowpilotError, SoftTimeLimitExceeded) as exc:
            if _hit_time_limit(exc):
                raise _as_timeout(step) from exc
            raise

    return try_once(ctx, number, call, worker=worker, request_of=attempt_request, step_id=step.id)


def _hit_time_limit(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, SoftTimeLimitExceeded):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _as_timeout(step: AnyStep) -> ToolTimeout:
    return ToolTimeout(f"step `{step.id}` ran past its {step.timeout:g} s timeout")


def _fail_unstartable(
    result: StepResult, run: Run, exc: FlowpilotError, *, token: str, now: Clock
) -> Verdict:
    """No context can be built for the run (its stored definition or tools are broken):
    fail the step (claimed by ``token``) and the run at once, instead of re-queueing the
    step forever."""
    at = now()
    error = StepUnstartable(exc).record()
    with transaction.atomic():
        step_transition(
            StepResult.objects.filter(pk=result.pk, claim_token=token), StepStatus.FAILED,
            error=error, finished_at=at, claim_token="", lease_expires_at=None, updated_at=at,
        )  # fmt: skip
        if run_transition(
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING), RunStatus.FAILED,
            finished_at=at,
            error_summary=f"step `{result.step_id}` could not start: {error['message']}"[:5000],
        ):  # fmt: skip
            # Like any finished run: a failure report, a parked parent step, an approval.
            run_finished_announce(run)
    logger.error(
        "run %s step %s could not start: %s", run.pk, result.step_id, exc.message,
        extra={"step_id": result.step_id},
    )  # fmt: skip
    return Verdict(claimed=True, status=StepStatus.FAILED)
