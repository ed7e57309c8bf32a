"""Run and step states: the statuses, the moves allowed between them, and the one way to
write a status.

Every status write in the app goes through ``run_transition`` or ``step_transition``: a
conditional UPDATE that adds ``status IN (the states allowed to reach the target)`` to
whatever conditions the caller already has (a claim token, the run's status, a lease).
Two writers racing for the same row therefore never both win, and a row can never jump
to a state the tables below do not allow.

This module knows no model: the write functions take a queryset or a model instance,
so ``runs.models`` can declare its fields from the enums here without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import models

from tools.errors import FlowpilotError


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class RunTrigger(models.TextChoices):
    MANUAL = "manual", "Manual (admin)"
    API = "api", "API"
    CLI = "cli", "Command line"
    SCHEDULE = "schedule", "Schedule"
    VALIDATION = "validation", "Validation run"
    WORKFLOW = "workflow", "Workflow step (a child run)"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"


RUN_TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
STEP_TERMINAL = frozenset({StepStatus.SUCCEEDED, StepStatus.FAILED, StepStatus.SKIPPED})
# Handed to a worker (queued) or executing (running): a Celery run's steps hold a lease then.
STEP_IN_FLIGHT = frozenset({StepStatus.QUEUED, StepStatus.RUNNING})

RUN_TRANSITIONS: Mapping[str, frozenset[str]] = {
    RunStatus.PENDING: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED, RunStatus.FAILED}),
    # Back to pending: resuming a run whose process died (operator --force).
    RunStatus.RUNNING: frozenset(
        {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.PENDING}
    ),
    # Resume takes a failed or cancelled run back to pending, then running.
    RunStatus.FAILED: frozenset({RunStatus.PENDING}),
    RunStatus.CANCELLED: frozenset({RunStatus.PENDING}),
    RunStatus.SUCCEEDED: frozenset(),
}

STEP_TRANSITIONS: Mapping[str, frozenset[str]] = {
    # Queued for a worker, claimed in process, skipped (branch not taken, run cancelled),
    # or failed before any call (a reference or template error).
    StepStatus.PENDING: frozenset(
        {StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.SKIPPED, StepStatus.FAILED}
    ),
    # Claimed by a task, skipped (the run ended first), back to pending on resume, or
    # failed for review (a non-idempotent step interrupted).
    StepStatus.QUEUED: frozenset(
        {StepStatus.RUNNING, StepStatus.SKIPPED, StepStatus.PENDING, StepStatus.FAILED}
    ),
    # Finished; back to queued for a retry or after its worker was lost; skipped when the
    # run ended between the claim and the call; back to pending on a forced resume.
    StepStatus.RUNNING: frozenset(
        {
            StepStatus.SUCCEEDED,
            StepStatus.FAILED,
            StepStatus.QUEUED,
            StepStatus.SKIPPED,
            StepStatus.PENDING,
        }
    ),
    # Resume runs failed and skipped steps again; a succeeded step never runs again.
    StepStatus.FAILED: frozenset({StepStatus.PENDING}),
    StepStatus.SKIPPED: frozenset({StepStatus.PENDING}),
    StepStatus.SUCCEEDED: frozenset(),
}


def _sources(table: Mapping[str, frozenset[str]], to: str) -> list[str]:
    """The states ``to`` may be reached from, sorted (one stable SQL text per target)."""
    if to not in table:
        raise ValueError(f"unknown status {to!r}")
    return sorted(str(s) for s, targets in table.items() if to in targets)


def _transition(
    rows: models.QuerySet[Any] | models.Model,
    table: Mapping[str, frozenset[str]],
    to: str,
    fields: dict[str, Any],
) -> int:
    if isinstance(rows, models.Model):
        instance = rows
        rows = type(instance)._default_manager.filter(pk=instance.pk)
    else:
        instance = None
    updated = rows.filter(status__in=_sources(table, to)).update(status=to, **fields)
    if updated and instance is not None:
        instance.status = to  # type: ignore[attr-defined]
        for key, value in fields.items():
            setattr(instance, key, value)
    return updated


def run_transition(run: models.QuerySet[Any] | models.Model, to: str, **fields: Any) -> int:
    """Move a run (an instance, or the runs of a queryset) to ``to``, with ``fields``.

    Only rows in a state allowed to reach ``to`` change; returns how many did. An
    instance that changed gets the new values (expressions aside) set on it as well.
    """
    return _transition(run, RUN_TRANSITIONS, to, fields)


def step_transition(rows: models.QuerySet[Any] | models.Model, to: str, **fields: Any) -> int:
    """Move step results (an instance, or those of a queryset) to ``to``, with ``fields``.

    The caller's own conditions stay (filter the queryset); this adds the states allowed
    to reach ``to``. ``updated_at`` is written only when passed (an UPDATE skips
    ``auto_now``). Returns how many rows changed.
    """
    return _transition(rows, STEP_TRANSITIONS, to, fields)


# --- errors ---------------------------------------------------------------------------


class RunError(FlowpilotError):
    code = "run_error"


class RunStateError(RunError):
    code = "run_state_invalid"


class StepError(FlowpilotError):
    """An error the engine records on a step itself (not raised by a tool).

    ``record()`` is what the step's ``error`` column stores.
    """

    code = "step_error"

    def record(self) -> dict[str, Any]:
        return self.as_dict()


class InterruptedNonIdempotent(StepError):
    """A step stopped mid-call whose tool is not idempotent: repeating it blindly could
    do the call twice, so it is failed for review instead."""

    code = "interrupted_non_idempotent"
    retryable = False

    def __init__(self, step_id: str) -> None:
        super().__init__(
            f"step `{step_id}` was interrupted during a non-idempotent call; it was not "
            "repeated. Check the target system, then restart from this step."
        )


class WorkerLost(StepError):
    """The worker running a step stopped renewing its lease (killed, machine lost)."""

    code = "worker_lost"
    retryable = True


class StepUnstartable(StepError):
    """No run context could be built for a step: it fails at once, under the code of the
    error that prevented it, and is never retried."""

    retryable = False

    def __init__(self, cause: FlowpilotError) -> None:
        super().__init__(cause.message[:4000])
        self.code = cause.code
