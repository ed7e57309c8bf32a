"""Reading and writing the checkpoint: StepResult rows.

Every driver (in-process or Celery) uses these, so a run's history looks the same
whichever way it ran. This is the boundary where a run's data is stored: inputs,
outputs, errors and attempt logs are scrubbed of secret values, capped in size (a
flagged preview) and escaped for the database (``tools.jsondata.store_escape``: NUL
characters, which PostgreSQL cannot hold, are stored as ``␀0``). Whatever reads a
stored value back into a run (``view_of``: a resume, a Celery step reading its
upstream outputs, the run outputs) unescapes it, so every driver sees the same data.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from runs.engine.attempt import StepOutcome
from runs.engine.context import RunContext
from runs.engine.kinds import KINDS
from runs.engine.readiness import StepState
from runs.engine.resolve import DONE_KEY, step_view_value
from runs.engine.tries import AttemptRecord, capped_error
from runs.models import Run, StepResult
from runs.state import (
    RowWrite,
    RunStatus,
    StepStatus,
    rows_write,
    step_claim_write,
    step_transition,
    step_write,
)
from tools.jsondata import store_escape, store_unescape
from workflows.schema import AnyStep

PREVIEW_BYTES = 4096  # what a capped record keeps, and what the admin shows at most


def storable(value: Any) -> Any:
    """The stored form of a value already scrubbed: escaped for the database."""
    return store_escape(value)


def stored_output(ctx: RunContext, output: Any) -> tuple[Any, bool]:
    """The scrubbed, escaped output, or a flagged preview when it is over the size cap.

    Used for step inputs records and run outputs too: every record of a run's data is
    capped the same way.
    """
    scrubbed = storable(ctx.redactor.scrub(output))
    text = json.dumps(scrubbed, ensure_ascii=False, default=str)
    limit = ctx.limits.max_stored_output_bytes
    if len(text.encode()) <= limit:
        return scrubbed, False
    preview = text.encode()[: min(limit, PREVIEW_BYTES)].decode(errors="ignore")
    return {"_truncated": True, "_stored_limit_bytes": limit, "preview": preview}, True


def outcome_output(ctx: RunContext, outcome: StepOutcome) -> tuple[Any, bool]:
    """The output an outcome stores: a success's output, or the progress a failed step
    kept (``StepFailedWithProgress``); else none."""
    if outcome.status == StepStatus.SUCCEEDED or outcome.output is not None:
        return stored_output(ctx, outcome.output)
    return None, False


def with_progress(
    step: AnyStep, result: StepResult, args: dict[str, Any], record: dict[str, Any] | None
) -> dict[str, Any]:
    """The arguments of ``step`` started with the progress its row holds (a resumed
    step's failed try, or what a restart seeded: ``runs.restart``), as its kind carries
    it (``StepKind.carry``); ``args`` as they are when the row holds none. ``record``
    (the inputs record) notes how many results were carried."""
    if result.reused or result.output is None or result.output_truncated:
        return args
    carried = KINDS[step.kind].carry(step, store_unescape(result.output), args)
    done = carried.get(DONE_KEY)
    if record is not None and isinstance(done, list):
        record["carried over (not called again)"] = sum(1 for d in done if d is not None)
    return carried


def stored_inputs(ctx: RunContext, record: dict[str, Any] | None) -> tuple[Any, bool]:
    """A step's resolved-inputs record as stored (already scrubbed by the resolver)."""
    if record is None:
        return None, False
    text = json.dumps(storable(record), ensure_ascii=False, default=str)
    if len(text.encode()) <= ctx.limits.max_stored_output_bytes:
        return storable(record), False
    return stored_output(ctx, record)


def stored_entries(records: Iterable[AttemptRecord]) -> list[dict[str, Any]]:
    """New tries as attempt-log entries, as stored (entries read from the row are
    stored already)."""
    return [storable(record.entry()) for record in records]


def load_results(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def state_of(result: StepResult, step: AnyStep) -> StepState:
    return StepState(
        status=result.status,
        branch=step.branch_of(result.output),
        continued=result.status == StepStatus.FAILED and step.on_error == "continue",
    )


def view_of(result: StepResult) -> Any:
    """What a later step reads of a stored result: unescaped, as the step produced it."""
    return store_unescape(step_view_value(result.status, result.output, result.error))


def mark_running(
    ctx: RunContext,
    result: StepResult,
    *,
    inputs_record: dict,
    into: list[RowWrite] | None = None,
    behind_start: bool = False,
) -> bool | None:
    """Claim a pending step of a running run. False when it was not pending any more
    (a cancel skipped it, or another driver took it): then it must not start.

    With ``into`` the claim is only prepared, appended there for the caller to send
    with others (``runs.state.rows_write``, which tells whether it landed): None.
    ``behind_start``: the claim goes in that write behind the run's own start, which
    stands for its condition on the run's status (``runs.state.step_claim_write``).
    """
    if behind_start and into is None:
        raise ValueError("a claim behind the run's start is sent with it, never alone")
    write = _running_write(ctx, result, inputs_record=inputs_record, behind_start=behind_start)
    if into is not None:
        into.append(write)
        return None
    (claimed,) = rows_write([write])
    if not claimed:
        result.refresh_from_db()
    return bool(claimed)


def _running_write(
    ctx: RunContext, result: StepResult, *, inputs_record: dict, behind_start: bool = False
) -> RowWrite:
    now = ctx.now()
    inputs, capped = stored_inputs(ctx, inputs_record)
    return step_claim_write(
        result, run_status=None if behind_start else RunStatus.RUNNING,
        inputs=inputs, inputs_truncated=capped, started_at=now, finished_at=None, error=None,
        updated_at=now,
    )  # fmt: skip


def mark_skipped(
    results: list[StepResult], now: datetime, *, into: list[RowWrite] | None = None
) -> None:
    """Skip steps that never started (pending, or claimed but not yet called).

    With ``into``, one write per row is prepared and appended there (``mark_running``).
    The rows' in-memory copies are marked skipped either way, whether or not a row was
    still in a state that can be skipped.
    """
    if into is not None:
        into += [step_write(r, StepStatus.SKIPPED, finished_at=now) for r in results]
    else:
        step_transition(
            StepResult.objects.filter(pk__in=[r.pk for r in results]), StepStatus.SKIPPED,
            finished_at=now,
        )  # fmt: skip
    for result in results:
        result.status = StepStatus.SKIPPED
        result.finished_at = now


def mark_finished(
    ctx: RunContext,
    result: StepResult,
    outcome: StepOutcome,
    *,
    into: list[RowWrite] | None = None,
) -> None:
    """Write the outcome of a step (its checkpoint); with ``into``, only prepare the
    write and append it there (``mark_running``)."""
    write = _finished_write(ctx, result, outcome)
    if into is not None:
        into.append(write)
    else:
        rows_write([write])


def _finished_write(ctx: RunContext, result: StepResult, outcome: StepOutcome) -> RowWrite:
    output, capped = outcome_output(ctx, outcome)
    now = ctx.now()
    return step_write(
        result,
        outcome.status,
        output=output,
        output_truncated=capped or outcome.truncated,
        output_bytes=outcome.size,
        error=storable(outcome.error),
        attempts=(result.attempts or 0) + len(outcome.attempts),
        attempt_log=[*(result.attempt_log or []), *stored_entries(outcome.attempts)],
        finished_at=None if outcome.status == StepStatus.WAITING else now,
        updated_at=now,
    )


def mark_failed_before_call(
    ctx: RunContext,
    result: StepResult,
    error: dict,
    inputs_record: dict[str, Any] | None = None,
    *,
    into: list[RowWrite] | None = None,
) -> None:
    """A step that failed before its tool was called (a reference or template error);
    with ``into``, only prepare the write and append it there (``mark_running``)."""
    write = _failed_before_call_write(ctx, result, error, inputs_record)
    if into is not None:
        into.append(write)
    else:
        rows_write([write])


def _failed_before_call_write(
    ctx: RunContext, result: StepResult, error: dict, inputs_record: dict[str, Any] | None = None
) -> RowWrite:
    now = ctx.now()
    inputs, capped = stored_inputs(ctx, inputs_record)
    return step_write(
        result,
        StepStatus.FAILED,
        error=storable(capped_error(ctx.redactor.scrub(error))),
        inputs=inputs,
        inputs_truncated=capped,
        started_at=result.started_at or now,
        finished_at=now,
        updated_at=now,
    )
