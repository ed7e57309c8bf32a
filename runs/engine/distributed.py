"""The Celery driver: every step is its own task, so a run's branches spread over workers.

The contract (DESIGN §5-§6, STYLE §2 and §5):

- ``run_start`` moves a pending run to running and queues its first ready steps in one
  transaction; the step tasks are published when it commits.
- ``run_advance`` is the coordinator. Under the run's row lock (``select_for_update``)
  it asks the pure ``next_actions`` what starts and what is skipped, persists that,
  publishes the newly queued steps on commit and finishes the run when nothing is left.
  Every completion advances under the same lock, so two steps finishing at once never
  queue a step twice or lose one.
- ``step_execute`` (the step task) first *claims* its StepResult with a conditional
  ``UPDATE … SET status='running' WHERE status='queued'``; a duplicate or late message
  loses the claim and does nothing, so a succeeded step never runs again. It resolves
  the step's inputs from the stored upstream outputs, makes **one** attempt (the Celery
  soft time limit becomes a ``tool_timeout`` error) and settles it under the run lock:
  a retryable failure with tries left goes back to ``queued`` and the task re-publishes
  itself with the policy's countdown (no worker sleeps); anything else is written and
  the run advances. Every attempt is logged with the worker that made it.
- ``runs.engine.sweep`` (Celery beat) takes back steps whose lease ran out: lost
  messages are published again, steps of a dead worker are queued again (or failed for
  review when their tool is not idempotent).

Leases: a running step's lease is ``FLOWPILOT_STEP_LEASE`` seconds, renewed by a
heartbeat thread every third of it; a queued step's lease is its due time plus
``FLOWPILOT_QUEUED_LEASE``. Steps of in-process runs have no lease and are never swept.
A result written under an older claim (``claim_token``) is ignored.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, F, Func, Max, Q, Subquery, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.engine import checkpoint
from runs.engine.attempt import (
    StepOutcome,
    effective_retry,
    error_record,
    execute_attempt,
    retry_delay,
)
from runs.engine.context import RunContext, build_run_context
from runs.engine.readiness import StepState, next_actions
from runs.engine.resolve import resolve_step_call
from runs.models import Run, RunStatus, StepResult, StepStatus
from runs.services import RunStateError, _finish, _transition
from tools.errors import FlowpilotError, ToolTimeout
from tools.models import Tool
from tools.registry import ToolRegistry
from workflows.references import StepRef, iter_refs
from workflows.schema import WorkflowSpec
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.engine")

STEP_TASK = "runs.execute_step"
HARD_LIMIT_GRACE = 10.0  # seconds between a step's soft and hard time limit


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


@dataclass(frozen=True)
class Verdict:
    """What a step task did: ``claimed`` is False when it lost the claim (a duplicate).

    ``retry_in`` is set when the step went back to ``queued`` for a policy retry: the
    task must re-publish itself with that countdown.
    """

    claimed: bool
    status: str | None = None
    retry_in: float | None = None


def in_process() -> bool:
    """No broker configured (Celery eager): runs execute in this process, as before."""
    return bool(current_app.conf.task_always_eager)


def lease_until(seconds: float, now: datetime) -> datetime:
    return now + timedelta(seconds=seconds)


def time_limit_of(step) -> float | None:
    """The per-attempt limit enforced as the task's soft time limit.

    A foreach step applies its ``timeout`` to every item call instead.
    """
    return None if step.kind == "foreach" else step.timeout


def run_context(run: Run, *, tools_key: tuple | None = None) -> RunContext:
    """A fresh context for one task of ``run`` (its own redactor and HTTP client)."""
    return build_run_context(run_id=run.pk, spec=_spec(run), registry=_registry(tools_key))


_specs: dict[str, WorkflowSpec] = {}  # frozen definitions of this process, by hash


def _spec(run: Run) -> WorkflowSpec:
    """The run's frozen definition as a model, parsed once per process (a version never
    changes: a change is a new version with a new hash)."""
    spec = _specs.get(run.definition_hash)
    if spec is None:
        if len(_specs) >= 128:
            _specs.clear()
        spec = _specs[run.definition_hash] = workflow_spec(run.workflow)
    return spec


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

_registries: dict[tuple, ToolRegistry] = {}  # this process's last registry, by table state


def _registry(key: tuple | None = None) -> ToolRegistry:
    """The tool registry, rebuilt only when the ``Tool`` table changed.

    A ``ToolRegistry`` is immutable, so the tasks of one worker process share the one
    built for the same state of the table (building one validates every built-in
    schema: ~30 ms, more than a step task's own work). ``key`` is ``tools_key()``.
    """
    key = tools_key() if key is None else key
    registry = _registries.get(key)
    if registry is None:
        _registries.clear()
        registry = _registries[key] = ToolRegistry.from_db()
    return registry


def tools_key(row: Any = None) -> tuple:
    """The Tool table's state: from a row annotated with ``TOOLS_KEY``, or queried."""
    if row is not None:
        return (row.tools_updated, row.tools_count, row.tools_enabled)
    state = Tool.objects.aggregate(
        updated=Max("updated_at"), count=Count("pk"), enabled=Count("pk", filter=Q(enabled=True))
    )
    return (state["updated"], state["count"], state["enabled"])


def lock_run(run_id: int) -> Run:
    """The run, row-locked until the transaction ends."""
    return Run.objects.select_for_update().get(pk=run_id)


# --- the coordinator -----------------------------------------------------------


def run_start(*, run: Run, publish: Publish = publish_step) -> Run:
    """Move a pending run to running and queue its first steps (published on commit)."""
    with transaction.atomic():
        locked = lock_run(run.pk)
        now = timezone.now()
        if not _transition(locked, RunStatus.RUNNING, started_at=locked.started_at or now):
            raise RunStateError(f"run {locked.pk} is {locked.status}; it cannot start")
        with run_context(locked) as ctx:
            advance_locked(ctx, locked, publish=publish, now=now)
    logger.info("run %s started on the Celery workers", run.pk)
    return locked


def run_advance(*, run_id: int, publish: Publish = publish_step) -> None:
    """Lock the run and start whatever became ready (the sweeper's and tests' entry)."""
    with transaction.atomic():
        run = lock_run(run_id)
        if run.status != RunStatus.RUNNING:
            return
        with run_context(run) as ctx:
            advance_locked(ctx, run, publish=publish, now=timezone.now())


def advance_locked(ctx: RunContext, run: Run, *, publish: Publish, now: datetime) -> None:
    """Persist what ``next_actions`` decides; the caller holds the run's row lock.

    Reads only each step's status, tries and decision branch (never the outputs), so
    an advance costs the same whatever the steps produced.
    """
    rows = {
        sid: (pk, status, attempts, branch)
        for pk, sid, status, attempts, branch in run.step_results.annotate(
            branch=KT("output__branch")
        )
        .order_by("step_id")
        .values_list("pk", "step_id", "status", "attempts", "branch")
    }
    states = {sid: _state(ctx.spec.step(sid), *row[1:]) for sid, row in rows.items()}
    actions = next_actions(ctx.graph, states)
    if actions.skip:
        StepResult.objects.filter(pk__in=[rows[sid][0] for sid in actions.skip]).update(
            status=StepStatus.SKIPPED, finished_at=now, updated_at=now
        )
    if actions.start:
        _queue(ctx, {sid: rows[sid] for sid in actions.start}, publish=publish, now=now)
    if actions.done:
        _finish(ctx, run)
        logger.info("run %s %s", run.pk, run.status)


def _state(step, status: str, attempts: int, branch: str | None) -> StepState:
    """``checkpoint.state_of`` from the columns ``advance_locked`` reads."""
    return StepState(
        status=status,
        branch=branch if step.kind == "decision" else None,
        continued=status == StepStatus.FAILED and step.on_error == "continue",
    )


def _queue(ctx: RunContext, rows: dict, *, publish: Publish, now: datetime) -> None:
    """Mark ready steps queued (one UPDATE per retry budget) and publish them on commit."""
    by_budget: dict[int, list[int]] = {}
    for sid, (pk, *_) in rows.items():
        budget = effective_retry(ctx, ctx.spec.step(sid)).max_attempts
        by_budget.setdefault(budget, []).append(pk)
    for budget, pks in sorted(by_budget.items()):
        StepResult.objects.filter(pk__in=pks).update(
            status=StepStatus.QUEUED,
            attempt_limit=F("attempts") + budget,
            lease_expires_at=lease_until(settings.FLOWPILOT_QUEUED_LEASE, now),
            claim_token="",
            started_at=None,
            finished_at=None,
            error=None,
            updated_at=now,
        )
    jobs = [(pk, time_limit_of(ctx.spec.step(sid))) for sid, (pk, *_) in rows.items()]
    transaction.on_commit(lambda: [publish(pk, time_limit=limit) for pk, limit in jobs])


# --- one step ---------------------------------------------------------------------


def claim_step(step_result_id: int, *, worker: str, inputs: Any = None) -> str | None:
    """Take a queued step for this task. Returns the claim token, or None if it lost.

    One conditional UPDATE (``… WHERE status='queued'``): of two deliveries of the same
    message, exactly one wins. ``inputs`` is the resolved-inputs record to store.
    """
    token = uuid.uuid4().hex
    now = timezone.now()
    won = StepResult.objects.filter(pk=step_result_id, status=StepStatus.QUEUED).update(
        status=StepStatus.RUNNING,
        claim_token=token,
        worker=worker[:255],
        inputs=inputs,
        lease_expires_at=lease_until(settings.FLOWPILOT_STEP_LEASE, now),
        started_at=Coalesce(F("started_at"), Value(now)),
        updated_at=now,
    )
    return token if won else None


@contextmanager
def heartbeat(step_result_id: int, token: str, *, lease: float | None = None) -> Iterator[None]:
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
                    ).update(lease_expires_at=lease_until(seconds, timezone.now()))
                except DatabaseError:
                    logger.warning("heartbeat of step result %s failed", step_result_id)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"heartbeat-{step_result_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=seconds)


def step_execute(*, step_result_id: int, worker: str, publish: Publish = publish_step) -> Verdict:
    """Claim, run one attempt of, and settle one step (the body of the step task).

    The inputs are resolved before the claim (the upstream outputs they read are final
    once the step is queued), so the claim stores them in the same UPDATE.
    """
    result = StepResult.objects.select_related("run").annotate(**TOOLS_KEY).get(pk=step_result_id)
    if result.status != StepStatus.QUEUED:
        logger.debug("step result %s is %s: duplicate or stale message", result.pk, result.status)
        return Verdict(claimed=False)
    run = result.run
    with run_context(run, tools_key=tools_key(result)) as ctx:
        step = ctx.spec.step(result.step_id)
        failure = None
        try:
            args, record = _resolve(ctx, run, step)
        except FlowpilotError as exc:
            args, record, failure = {}, None, exc
        token = claim_step(result.pk, worker=worker, inputs=record)
        if token is None:
            return Verdict(claimed=False)
        if run.status != RunStatus.RUNNING:
            return _settle_not_started(result, token)
        if failure is not None:
            return _settle_failed_before_call(ctx, result, token, failure, publish=publish)
        with heartbeat(result.pk, token):
            entry, attempt, error = _attempt(
                ctx, step, args, number=result.attempts + 1, worker=worker
            )
        return _settle(ctx, result, token, entry, attempt, error, publish=publish)


def _resolve(ctx: RunContext, run: Run, step) -> tuple[dict[str, Any], dict[str, Any]]:
    """The step's inputs, read from the stored outputs of the steps it references."""
    parsed = [ctx.parsed[step.id], ctx.parsed_items.get(step.id, {})]
    names = {ref.step_id for ref in iter_refs(parsed) if isinstance(ref, StepRef)}
    views = {}
    if names:
        rows = StepResult.objects.filter(run=run, step_id__in=names).only(
            "step_id", "status", "output", "error"
        )
        views = {r.step_id: checkpoint.view_of(r) for r in rows}
    return resolve_step_call(ctx, step, inputs=run.inputs, step_value=views.get)


def _attempt(ctx, step, args, *, number: int, worker: str):
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


def _as_timeout(step, exc: BaseException) -> ToolTimeout:
    error = ToolTimeout(f"step `{step.id}` ran past its {step.timeout:g} s timeout")
    error.__cause__ = exc
    return error


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000, 2)


def _locked_claim(result: StepResult, token: str) -> tuple[Run, StepResult] | None:
    """Lock the run, then re-read the step; None when the claim is no longer ours."""
    run = Run.objects.select_for_update().get(pk=result.run_id)
    current = StepResult.objects.get(pk=result.pk)
    if current.claim_token != token or current.status != StepStatus.RUNNING:
        logger.warning("step `%s` of run %s: stale claim, result ignored", result.step_id, run.pk)
        return None
    return run, current


def _settle(ctx, result, token, entry, attempt, error, *, publish: Publish) -> Verdict:
    """Record the attempt: a retry, or the outcome and an advance of the run."""
    if error is not None and error.retryable and entry["attempt"] < result.attempt_limit:
        return _settle_retry(ctx, result, token, entry, error, publish=publish)
    outcome = StepOutcome(
        StepStatus.FAILED if error else StepStatus.SUCCEEDED,
        output=attempt.output if attempt else None,
        error=entry.get("error"),
        truncated=attempt.truncated if attempt else False,
        attempts=[entry],
    )
    return _settle_outcome(ctx, result, token, outcome, publish=publish)


def _settle_outcome(ctx, result, token, outcome: StepOutcome, *, publish: Publish) -> Verdict:
    """Write the outcome if the claim is still ours, then advance under the run lock.

    The step row is written first and the run row locked second, which keeps the lock
    short. No writer waits on a running step's row while holding the run lock (the
    sweeper skips locked rows; the others only touch pending or queued ones), so this
    order cannot deadlock.
    """
    with transaction.atomic():
        now = timezone.now()
        if not _write_outcome(ctx, result, token, outcome, now):
            logger.warning(
                "step `%s` of run %s: stale claim, result ignored", result.step_id, result.run_id
            )
            return Verdict(claimed=True)
        run = Run.objects.select_for_update().get(pk=result.run_id)
        if run.status == RunStatus.RUNNING:
            advance_locked(ctx, run, publish=publish, now=now)
    return Verdict(claimed=True, status=outcome.status)


def _write_outcome(ctx, result: StepResult, token: str, outcome: StepOutcome, now) -> bool:
    """``checkpoint.mark_finished`` as one UPDATE conditional on the claim."""
    output, capped = (None, False)
    if outcome.status == StepStatus.SUCCEEDED:
        output, capped = checkpoint.stored_output(ctx, outcome.output)
    return bool(
        StepResult.objects.filter(
            pk=result.pk, claim_token=token, status=StepStatus.RUNNING
        ).update(
            status=outcome.status,
            output=output,
            output_truncated=capped or outcome.truncated,
            error=outcome.error,
            attempts=F("attempts") + len(outcome.attempts),
            attempt_log=[*(result.attempt_log or []), *outcome.attempts],
            finished_at=now,
            updated_at=now,
        )
    )


def _settle_retry(ctx, result, token, entry, error, *, publish: Publish) -> Verdict:
    """Back to ``queued`` for the policy's countdown, unless the run ended meanwhile."""
    with transaction.atomic():
        locked = _locked_claim(result, token)
        if locked is None:
            return Verdict(claimed=True)
        run, current = locked
        if run.status == RunStatus.RUNNING:
            policy = effective_retry(ctx, ctx.spec.step(current.step_id))
            tries = entry["attempt"] - (current.attempt_limit - policy.max_attempts)
            entry["retry_in"] = round(retry_delay(ctx, policy, tries, error), 3)
            requeue(current, entry, timezone.now(), delay=entry["retry_in"], error=entry["error"])
            return Verdict(claimed=True, status=StepStatus.QUEUED, retry_in=entry["retry_in"])
    outcome = StepOutcome(StepStatus.FAILED, error=entry["error"], attempts=[entry])
    return _settle_outcome(ctx, result, token, outcome, publish=publish)


def _settle_failed_before_call(ctx, result, token, exc, *, publish: Publish) -> Verdict:
    """A reference or template error: the step fails without a call, the run advances."""
    with transaction.atomic():
        locked = _locked_claim(result, token)
        if locked is None:
            return Verdict(claimed=True)
        run, current = locked
        checkpoint.mark_failed_before_call(ctx, current, exc.as_dict())
        if run.status == RunStatus.RUNNING:
            advance_locked(ctx, run, publish=publish, now=timezone.now())
        return Verdict(claimed=True, status=StepStatus.FAILED)


def _settle_not_started(result: StepResult, token: str) -> Verdict:
    """The run ended (cancelled) between the claim and the call: the step never starts."""
    with transaction.atomic():
        if _locked_claim(result, token) is not None:
            StepResult.objects.filter(pk=result.pk).update(
                status=StepStatus.SKIPPED,
                finished_at=timezone.now(),
                claim_token="",
                lease_expires_at=None,
            )
    return Verdict(claimed=True, status=StepStatus.SKIPPED)


def requeue(result: StepResult, entry: dict, now: datetime, *, delay: float, error) -> None:
    """Back to ``queued`` with the attempt recorded; due ``delay`` seconds from now."""
    result.status = StepStatus.QUEUED
    result.attempts = (result.attempts or 0) + 1
    result.attempt_log = [*(result.attempt_log or []), entry]
    result.error = error
    result.claim_token = ""
    result.lease_expires_at = lease_until(delay + settings.FLOWPILOT_QUEUED_LEASE, now)
    result.save(
        update_fields=[
            "status",
            "attempts",
            "attempt_log",
            "attempt_limit",
            "error",
            "claim_token",
            "lease_expires_at",
            "updated_at",
        ]
    )
