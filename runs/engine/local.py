"""The in-process driver: ready steps run in parallel on a thread pool.

Only this coordinating thread touches the database (SQLite-friendly); worker
threads make the tool calls. After every finished step its StepResult is written
(the checkpoint) before anything new starts, so a crash loses at most the steps
that were in flight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from runs.engine import checkpoint
from runs.engine.attempt import StepOutcome, run_with_retries
from runs.engine.context import RunContext
from runs.engine.db_retry import with_db_retries
from runs.engine.readiness import Readiness, StepState
from runs.engine.resolve import resolve_step_call
from runs.models import Run, StepResult
from runs.state import RunStatus, StepStatus
from tools.errors import FlowpilotError
from workflows.references import StepRef, iter_refs
from workflows.schema import AnyStep

logger = logging.getLogger("flowpilot.engine")

Observer = Callable[[str, StepResult], None]


@dataclass(frozen=True)
class Driven:
    """How a run's steps ended: ``views`` are what each step's references read (full
    outputs, not the capped stored previews); ``results`` the rows as written, so
    finishing the run reads nothing back."""

    views: dict[str, Any]
    results: Mapping[str, StepResult]


def drive_local(ctx: RunContext, run: Run, *, observer: Observer | None = None) -> Driven | None:
    """Run every runnable step of ``run``; None when the run was cancelled.

    The checkpoint is read once; from then on each finished step touches only its
    children (``Readiness``), so a step costs the same at any position of any run.
    """
    spec = ctx.spec
    results = checkpoint.load_results(run)
    ready = Readiness(
        ctx.ready, {sid: checkpoint.state_of(r, spec.step(sid)) for sid, r in results.items()}
    )
    views: dict[str, Any] = {sid: checkpoint.view_of(r) for sid, r in results.items()}
    # Outputs read back from the checkpoint as capped previews cannot feed a step.
    previews = frozenset(
        sid for sid, r in results.items() if r.status == StepStatus.SUCCEEDED and r.output_truncated
    )
    notify = observer or (lambda event, result: None)
    futures: dict[Future, str] = {}
    cancel_check = _Every(CANCEL_CHECK_SECONDS)
    with ThreadPoolExecutor(
        max_workers=ctx.limits.max_parallel_steps, thread_name_prefix=f"run{run.pk}"
    ) as pool:
        while True:
            if cancel_check.due() and _cancelled(run):
                _settle_cancelled(ctx, futures, results, notify)
                return None
            actions = ready.next()
            skipped = [results[sid] for sid in actions.skip]
            if skipped:
                checkpoint.mark_skipped(skipped, ctx.now())
                for result in skipped:
                    notify(StepStatus.SKIPPED, result)
            for step_id in actions.start:
                future = _start(ctx, run, results[step_id], views, ready, pool, notify, previews)
                if future is not None:
                    futures[future] = step_id
            if not futures:
                if actions.done or not (actions.start or actions.skip):
                    return Driven(views, results)
                continue
            finished, _ = wait(futures, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: futures[f]):
                step_id = futures.pop(future)
                outcome: StepOutcome = future.result()
                result = results[step_id]
                with_db_retries(
                    lambda: checkpoint.mark_finished(ctx, result, outcome),  # noqa: B023
                    what=f"recording step `{step_id}` of run {run.pk}",
                )
                ready.settle(step_id, checkpoint.state_of(result, spec.step(step_id)))
                succeeded = outcome.status == StepStatus.SUCCEEDED
                views[step_id] = outcome.output if succeeded else {"error": outcome.error}
                notify(outcome.status, result)


def _settle_cancelled(
    ctx: RunContext, futures: dict[Future, str], results: Mapping[str, StepResult], notify: Observer
) -> None:
    """The run was cancelled: a step not yet started never starts (skipped); a step in
    flight finishes and its outcome is recorded, so none is left ``running``."""
    never_started = [results[sid] for future, sid in futures.items() if future.cancel()]
    if never_started:
        checkpoint.mark_skipped(never_started, ctx.now())
        for result in never_started:
            notify(StepStatus.SKIPPED, result)
    for future, step_id in sorted(futures.items(), key=lambda item: item[1]):
        if future.cancelled():
            continue
        outcome: StepOutcome = future.result()
        checkpoint.mark_finished(ctx, results[step_id], outcome)
        notify(outcome.status, results[step_id])


def _start(
    ctx: RunContext,
    run: Run,
    result: StepResult,
    views: dict[str, Any],
    ready: Readiness,
    pool: ThreadPoolExecutor,
    notify: Observer,
    previews: frozenset[str],
) -> Future | None:
    step = ctx.spec.step(result.step_id)
    try:
        _refuse_previews(step, ctx.parsed[step.id], previews)
        args, record = resolve_step_call(ctx, step, inputs=run.inputs, step_value=views.get)
    except FlowpilotError as exc:
        checkpoint.mark_failed_before_call(ctx, result, exc.as_dict())
        ready.settle(step.id, checkpoint.state_of(result, step))
        views[step.id] = checkpoint.view_of(result)
        notify(StepStatus.FAILED, result)
        return None
    if not checkpoint.mark_running(ctx, result, inputs_record=record):
        # The run was cancelled meanwhile: the step does not start (and is never retried here).
        pending = result.status == StepStatus.PENDING
        ready.settle(step.id, StepState(StepStatus.SKIPPED if pending else result.status))
        return None
    ready.settle(step.id, StepState(StepStatus.RUNNING))
    notify("started", result)
    logger.debug("run %s: step %s started", run.pk, step.id)
    return pool.submit(run_with_retries, ctx, step, args, first_attempt=(result.attempts or 0) + 1)


class CheckpointTruncated(FlowpilotError):
    code = "checkpoint_truncated"


def _refuse_previews(step: AnyStep, parsed: Mapping[str, Any], previews: frozenset[str]) -> None:
    """Fail clearly rather than pass null where a capped checkpoint preview stands."""
    for ref in iter_refs(dict(parsed)):
        if isinstance(ref, StepRef) and ref.step_id in previews:
            raise CheckpointTruncated(
                f"step `{step.id}` reads `{ref}`, but the output of `{ref.step_id}` was "
                "stored truncated (over FLOWPILOT_MAX_STORED_OUTPUT_BYTES), so this resumed "
                "run cannot read it; raise the limit and start a new run"
            )


CANCEL_CHECK_SECONDS = 0.2  # a cancel is seen within this long; not a query per step


class _Every:
    """True at most once per ``seconds`` (the first call is always due)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last: float | None = None

    def due(self) -> bool:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True


def _cancelled(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk, status=RunStatus.CANCELLED).exists()
