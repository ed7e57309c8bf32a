"""One step as a Celery task: claim, heartbeat, one attempt, settle (``runs.tasks``).

``step_execute`` reads its StepResult and the upstream outputs the step references,
resolves the inputs, then *claims* the step with a conditional ``UPDATE … SET
status='running' WHERE status='queued'`` that also stores the resolved inputs. A
duplicate or late message finds the step no longer queued, or loses the claim, and
does nothing, so a succeeded step never runs again.

It makes **one** attempt while a heartbeat thread renews the step's lease; the
Celery soft time limit (the step's ``timeout``) becomes a ``tool_timeout`` error.
Then it settles:

- a retryable failure with tries left goes back to ``queued`` (the attempt logged,
  with ``retry_in``); the task re-publishes itself with that countdown, so no
  worker sleeps while waiting;
- anything else is written with one UPDATE conditional on the claim (a result from
  a claim the sweeper took back is ignored), then the run is locked and advanced
  (``runs.engine.distributed.advance_locked``) in the same transaction.

Settling happens while the heartbeat still runs, and a transient database error
while settling is retried on a new connection (``runs.engine.db_retry``): a finished
call's result is recorded by the task that made it, and the sweeper, seeing the
lease renewed, never takes the step back meanwhile.

Every attempt is logged with the worker that made it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce

from runs.engine import checkpoint
from runs.engine.attempt import (
    error_record,
    execute_attempt,
)
from runs.engine.celery_settle import (
    Verdict,
    settle,
    settle_failed_before_call,
    settle_not_started,
)
from runs.engine.context import DEFAULT_CLOCK, Clock, RunContext
from runs.engine.db_retry import reconnect, with_db_retries
from runs.engine.distributed import (
    TOOLS_KEY,
    Publish,
    lease_until,
    publish_step,
    run_context,
    tools_key,
)
from runs.engine.kinds.base import Attempt
from runs.engine.local import CheckpointTruncated
from runs.engine.resolve import resolve_step_call
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


def claim_step(
    step_result_id: int,
    *,
    worker: str,
    inputs: Any = None,
    inputs_truncated: bool = False,
    now: Clock = DEFAULT_CLOCK,
) -> str | None:
    """Take a queued step for this task. Returns the claim token, or None if it lost.

    One conditional UPDATE (``… WHERE status='queued'``): of two deliveries of the same
    message, exactly one wins. ``inputs`` is the resolved-inputs record as stored
    (``checkpoint.stored_inputs``).
    """
    token = uuid.uuid4().hex
    now_at = now()
    won = step_transition(
        StepResult.objects.filter(pk=step_result_id, status=StepStatus.QUEUED),
        StepStatus.RUNNING,
        claim_token=token,
        worker=worker[:255],
        inputs=inputs,
        inputs_truncated=inputs_truncated,
        lease_expires_at=lease_until(settings.FLOWPILOT_STEP_LEASE, now_at),
        started_at=Coalesce(F("started_at"), Value(now_at)),
        updated_at=now_at,
    )
    return token if won else None


@contextmanager
def heartbeat(
    step_result_id: int, token: str, *, lease: float | None = None, now: Clock = DEFAULT_CLOCK
) -> Iterator[None]:
    """Renew the step's lease every third of it while the body runs.

    The renewal is conditional on the claim, so a step the sweeper took back is left
    alone. The thread opens its own database connection only once it first beats.
    """
    seconds = lease or settings.FLOWPILOT_STEP_LEASE
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(seconds / 3):
                try:
                    StepResult.objects.filter(
                        pk=step_result_id, claim_token=token, status=StepStatus.RUNNING
                    ).update(lease_expires_at=lease_until(seconds, now()))
                except DatabaseError:
                    logger.warning("heartbeat of step result %s failed", step_result_id)
                    reconnect()  # the next beat opens a new connection
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"heartbeat-{step_result_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=seconds)


def step_execute(
    *,
    step_result_id: int,
    worker: str,
    publish: Publish = publish_step,
    now: Clock = DEFAULT_CLOCK,
) -> Verdict:
    """Claim, run one attempt of, and settle one step (the body of the step task).

    The inputs are resolved before the claim (the upstream outputs they read are final
    once the step is queued), so the claim stores them in the same UPDATE.
    """
    result = StepResult.objects.select_related("run").annotate(**TOOLS_KEY).get(pk=step_result_id)
    if result.status != StepStatus.QUEUED:
        logger.debug("step result %s is %s: duplicate or stale message", result.pk, result.status)
        return Verdict(claimed=False)
    run = result.run
    try:
        context = run_context(run, tools_key=tools_key(result))
    except FlowpilotError as exc:
        return _fail_unstartable(result, run, exc, worker=worker, now=now)
    with context as ctx:
        step = ctx.spec.step(result.step_id)
        failure = None
        try:
            args, record = _resolve(ctx, run, step)
        except FlowpilotError as exc:
            args, record, failure = {}, None, exc
        inputs, capped = checkpoint.stored_inputs(ctx, record)
        token = claim_step(
            result.pk, worker=worker, inputs=inputs, inputs_truncated=capped, now=ctx.now
        )
        if token is None:
            return Verdict(claimed=False)
        if run.status != RunStatus.RUNNING:
            return settle_not_started(result, token, now=ctx.now)
        if failure is not None:
            return settle_failed_before_call(ctx, result, token, failure, publish=publish)
        with heartbeat(result.pk, token, now=ctx.now):
            logger.debug("run %s: step %s started (try %s)", run.pk, step.id, result.attempts + 1)
            entry, attempt, error = _attempt(
                ctx, step, args, number=result.attempts + 1, worker=worker
            )
            logger.debug(
                "run %s: step %s try %s %s in %.0f ms",
                run.pk, step.id, entry["attempt"], entry["status"], entry["duration_ms"],
            )  # fmt: skip
            return with_db_retries(
                lambda: settle(ctx, result, token, entry, attempt, error, publish=publish),
                what=f"recording step `{step.id}` of run {run.pk}",
            )


def _resolve(ctx: RunContext, run: Run, step: AnyStep) -> tuple[dict[str, Any], dict[str, Any]]:
    """The step's inputs, read from the stored outputs of the steps it references.

    An output stored as a capped preview (over ``FLOWPILOT_MAX_STORED_OUTPUT_BYTES``)
    cannot feed a step on another worker: that fails clearly instead of reading null.
    """
    parsed = [ctx.parsed[step.id], ctx.parsed_items.get(step.id, {})]
    names = {ref.step_id for ref in iter_refs(parsed) if isinstance(ref, StepRef)}
    views = {}
    if names:
        rows = StepResult.objects.filter(run=run, step_id__in=names).only(
            "step_id", "status", "output", "error"
        )
        views = {r.step_id: checkpoint.view_of(r) for r in rows}
    for name in sorted(names):
        if _is_preview(views.get(name)):
            raise CheckpointTruncated(
                f"step `{step.id}` reads the output of `{name}`, which was stored truncated "
                "(over FLOWPILOT_MAX_STORED_OUTPUT_BYTES), so a step on a Celery worker cannot "
                "read it; raise the limit, or run this workflow in process"
            )
    return resolve_step_call(ctx, step, inputs=run.inputs, step_value=views.get)


def _is_preview(value: Any) -> bool:
    """The shape ``checkpoint.stored_output`` stores in place of an oversized output."""
    return isinstance(value, dict) and value.get("_truncated") is True and "preview" in value


def _attempt(
    ctx: RunContext, step: AnyStep, args: dict[str, Any], *, number: int, worker: str
) -> tuple[dict[str, Any], Attempt | None, FlowpilotError | None]:
    """One try. Returns ``(log entry, Attempt or None, FlowpilotError or None)``."""
    entry: dict[str, Any] = {
        "attempt": number,
        "started_at": ctx.now().isoformat(),
        "worker": worker,
    }
    t0 = time.perf_counter()
    try:
        attempt = execute_attempt(ctx, step, args)
    except (FlowpilotError, SoftTimeLimitExceeded) as exc:
        error = _as_timeout(step, exc) if _hit_time_limit(exc) else exc
        entry.update(duration_ms=_ms(t0), status=StepStatus.FAILED, error=error_record(ctx, error))
        return entry, None, error
    entry.update(duration_ms=_ms(t0), status=StepStatus.SUCCEEDED)
    return entry, attempt, None


def _hit_time_limit(exc: BaseException | None) -> bool:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, SoftTimeLimitExceeded):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _as_timeout(step: AnyStep, exc: BaseException) -> ToolTimeout:
    error = ToolTimeout(f"step `{step.id}` ran past its {step.timeout:g} s timeout")
    error.__cause__ = exc
    return error


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


def _fail_unstartable(
    result: StepResult, run: Run, exc: FlowpilotError, *, worker: str, now: Clock
) -> Verdict:
    """No context can be built for the run (its stored definition or tools are broken):
    fail the step and the run at once, instead of re-queueing the step forever."""
    token = claim_step(result.pk, worker=worker, now=now)
    if token is None:
        return Verdict(claimed=False)
    at = now()
    error = StepUnstartable(exc).record()
    with transaction.atomic():
        step_transition(
            StepResult.objects.filter(pk=result.pk, claim_token=token), StepStatus.FAILED,
            error=error, finished_at=at, claim_token="", lease_expires_at=None, updated_at=at,
        )  # fmt: skip
        run_transition(
            Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING), RunStatus.FAILED,
            finished_at=at,
            error_summary=f"step `{result.step_id}` could not start: {error['message']}"[:5000],
        )  # fmt: skip
    logger.error("run %s step %s could not start: %s", run.pk, result.step_id, exc.message)
    return Verdict(claimed=True, status=StepStatus.FAILED)
