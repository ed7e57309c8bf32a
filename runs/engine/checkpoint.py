"""Reading and writing the checkpoint: StepResult rows.

Every driver (in-process or Celery) uses these, so a run's history looks the same
whichever way it ran. Outputs are scrubbed of secret values and capped in size
before they are stored.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from runs.engine.attempt import StepOutcome, capped_error
from runs.engine.context import RunContext
from runs.engine.readiness import StepState
from runs.engine.resolve import step_view_value
from runs.models import Run, StepResult
from runs.state import RunStatus, StepStatus, step_transition
from workflows.schema import AnyStep


def stored_output(ctx: RunContext, output: Any) -> tuple[Any, bool]:
    """The scrubbed output, or a flagged preview when it is over the stored-size cap."""
    scrubbed = ctx.redactor.scrub(output)
    text = json.dumps(scrubbed, ensure_ascii=False, default=str)
    limit = ctx.limits.max_stored_output_bytes
    if len(text.encode()) <= limit:
        return scrubbed, False
    preview = text.encode()[: min(limit, 4096)].decode(errors="ignore")
    return {"_truncated": True, "_stored_limit_bytes": limit, "preview": preview}, True


def load_results(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def state_of(result: StepResult, step: AnyStep) -> StepState:
    return StepState(
        status=result.status,
        branch=step.branch_of(result.output),
        continued=result.status == StepStatus.FAILED and step.on_error == "continue",
    )


def view_of(result: StepResult) -> Any:
    return step_view_value(result.status, result.output, result.error)


def mark_running(ctx: RunContext, result: StepResult, *, inputs_record: dict) -> bool:
    """Claim a pending step of a running run. False when it was not pending any more
    (a cancel skipped it, or another driver took it): then it must not start."""
    now = ctx.now()
    claimed = step_transition(
        StepResult.objects.filter(
            pk=result.pk, status=StepStatus.PENDING, run__status=RunStatus.RUNNING
        ),
        StepStatus.RUNNING,
        inputs=inputs_record, started_at=now, finished_at=None, error=None, updated_at=now,
    )  # fmt: skip
    if claimed:
        result.status, result.inputs, result.started_at = StepStatus.RUNNING, inputs_record, now
        result.finished_at, result.error = None, None
    else:
        result.refresh_from_db()
    return bool(claimed)


def mark_skipped(results: list[StepResult], now: datetime) -> None:
    """Skip steps that never started (pending, or claimed but not yet called)."""
    step_transition(
        StepResult.objects.filter(pk__in=[r.pk for r in results]), StepStatus.SKIPPED,
        finished_at=now,
    )  # fmt: skip
    for result in results:
        result.status = StepStatus.SKIPPED
        result.finished_at = now


def mark_finished(ctx: RunContext, result: StepResult, outcome: StepOutcome) -> None:
    """Write the outcome of a step (its checkpoint)."""
    output, capped = (None, False)
    if outcome.status == StepStatus.SUCCEEDED:
        output, capped = stored_output(ctx, outcome.output)
    now = ctx.now()
    step_transition(
        result,
        outcome.status,
        output=output,
        output_truncated=capped or outcome.truncated,
        error=outcome.error,
        attempts=(result.attempts or 0) + len(outcome.attempts),
        attempt_log=[*(result.attempt_log or []), *outcome.attempts],
        finished_at=now,
        updated_at=now,
    )


def mark_failed_before_call(
    ctx: RunContext, result: StepResult, error: dict, inputs_record: dict[str, Any] | None = None
) -> None:
    """A step that failed before its tool was called (a reference or template error)."""
    now = ctx.now()
    step_transition(
        result,
        StepStatus.FAILED,
        error=capped_error(ctx.redactor.scrub(error)),
        inputs=inputs_record,
        started_at=result.started_at or now,
        finished_at=now,
        updated_at=now,
    )
