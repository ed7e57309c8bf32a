"""Claiming a step for a Celery task: one conditional ``UPDATE … RETURNING`` each.

- ``claim``: a *queued* step, by the task its message started (``queued → running``).
  Of two deliveries of the same message exactly one wins.
- ``claim_ready``: a *pending* step its parent's settle found ready, claimed in that
  settle's transaction for the same task to run next (``pending → running``, never
  ``queued``: no broker round trip, no commit of its own). The run row is locked by
  then, so a cancel either came first (the run is not running and nothing is claimed)
  or waits for the commit and finds the step in flight.

A claim stores the resolved inputs, a fresh ``claim_token`` and a step lease
(``FLOWPILOT_STEP_LEASE``), and reads back the attempt counters; every later write of
the step is conditional on that token.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from runs.engine.celery.broker import lease_until
from runs.engine.context import DEFAULT_CLOCK, Clock
from runs.models import Run, StepResult
from runs.state import RunStatus, StepStatus, step_transition_returning, step_update_returning
from tools.errors import FlowpilotError


@dataclass(frozen=True)
class Claim:
    """A step this task claimed, as the claim's ``UPDATE … RETURNING`` read it back."""

    token: str
    result: StepResult  # pk, run, step id, attempts, attempt limit and log, as claimed
    run_status: str
    # ``time.monotonic()`` just before the claim's statement was sent: the step lease it
    # wrote counts from then, so the heartbeat's first renewal is due a third of the
    # lease after it, however long resolving the inputs took (``heartbeat``).
    leased_at: float


@dataclass(frozen=True)
class Taken:
    """A ready child claimed in its parent's settle transaction, for this task to run next."""

    claim: Claim
    args: dict[str, Any]  # its resolved call arguments
    failure: FlowpilotError | None = None  # resolving them failed: it fails without a call


def _claim_fields(
    token: str, worker: str, inputs: Any, inputs_truncated: bool, now_at: datetime
) -> dict[str, Any]:
    """What a claim writes: its token and worker, a step lease, the resolved inputs."""
    return {
        "claim_token": token,
        "worker": worker[:255],
        "inputs": inputs,
        "inputs_truncated": inputs_truncated,
        "lease_expires_at": lease_until(settings.FLOWPILOT_STEP_LEASE, now_at),
        "started_at": now_at,
        "updated_at": now_at,
    }


def claim(
    step_result_id: int,
    *,
    worker: str,
    inputs: Any = None,
    inputs_truncated: bool = False,
    now: Clock = DEFAULT_CLOCK,
) -> Claim | None:
    """Take a queued step for this task, in one round trip. None if it lost.

    One conditional ``UPDATE … WHERE status='queued' RETURNING …``: of two deliveries
    of the same message, exactly one wins, and the winner reads back the row's attempt
    counters and its run's status with it. ``inputs`` is the resolved-inputs record as
    stored (``checkpoint.stored_inputs``).
    """
    token, leased_at = uuid.uuid4().hex, time.monotonic()
    row = step_transition_returning(
        StepResult,
        step_result_id,
        StepStatus.RUNNING,
        status=StepStatus.QUEUED,
        fields=_claim_fields(token, worker, inputs, inputs_truncated, now()),
        keep=frozenset({"started_at"}),
        returning=("run", "step_id", "attempts", "attempt_limit", "attempt_log"),
        returning_sql=(run_status_sql(lock=False),),
    )
    if row is None:
        return None
    run_id, step_id, attempts, limit, log, run_status = row
    result = StepResult(
        pk=step_result_id, run_id=run_id, step_id=step_id, status=StepStatus.RUNNING,
        attempts=attempts, attempt_limit=limit, attempt_log=log, claim_token=token,
    )  # fmt: skip
    return Claim(token, result, run_status, leased_at)


def claim_step(
    step_result_id: int,
    *,
    worker: str,
    inputs: Any = None,
    inputs_truncated: bool = False,
    now: Clock = DEFAULT_CLOCK,
) -> str | None:
    """``claim``, returning only the claim token (or None if it lost)."""
    won = claim(
        step_result_id, worker=worker, inputs=inputs, inputs_truncated=inputs_truncated, now=now
    )
    return won.token if won else None


def claim_ready(
    run_id: int,
    step_id: str,
    *,
    budget: int,
    worker: str,
    inputs: Any = None,
    inputs_truncated: bool = False,
    unless_failed: bool = False,
    now: Clock = DEFAULT_CLOCK,
) -> Claim | None:
    """Claim a pending step of a running run straight from ``pending``; the caller holds
    the run's row lock (it settled the step's parent).

    What ``advance.queue_ready`` and then ``claim`` would write, in one UPDATE: the
    retry budget (``attempt_limit`` = attempts + ``budget``), a fresh claim and a step
    lease, the resolved inputs. With ``unless_failed`` the UPDATE also requires that no
    step of the run has failed (the only other thing a lone child's readiness depends
    on). None when the step is not pending (or a step failed).
    """
    token, leased_at = uuid.uuid4().hex, time.monotonic()
    fields = _claim_fields(token, worker, inputs, inputs_truncated, now())
    row = step_update_returning(
        StepResult,
        StepStatus.RUNNING,
        status=StepStatus.PENDING,
        match={"run": run_id, "step_id": step_id},
        fields={**fields, "finished_at": None, "error": None},  # never started before
        plus={"attempt_limit": ("attempts", budget)},
        **(no_failed_step(run_id) if unless_failed else {}),
        returning=("id", "attempts", "attempt_limit", "attempt_log"),
    )
    if row is None:
        return None
    pk, attempts, limit, log = row
    result = StepResult(
        pk=pk, run_id=run_id, step_id=step_id, status=StepStatus.RUNNING,
        attempts=attempts, attempt_limit=limit, attempt_log=log, claim_token=token,
    )  # fmt: skip
    return Claim(token, result, RunStatus.RUNNING, leased_at)


# Table names come from the models' metadata (no input); every value is a parameter.
_RUNS, _STEPS = Run._meta.db_table, StepResult._meta.db_table


def run_status_sql(*, lock: bool) -> str:
    """The step row's run status, as a ``RETURNING`` expression of an UPDATE of the step
    table; with ``lock`` the run row is locked too (``FOR UPDATE``, where the database
    has row locks; SQLite's UPDATE already holds the database's write lock)."""
    locking = " FOR UPDATE" if lock and connection.features.has_select_for_update else ""
    return f"(SELECT status FROM {_RUNS} WHERE id = {_STEPS}.run_id{locking})"  # noqa: S608


def no_failed_step(run_id: int) -> dict[str, Any]:
    """``step_update_returning`` guard: no step of the run has failed. Answered by the
    partial index ``step_failed_by_run_idx`` (the failed steps, by run), so it costs
    the same whatever the size of the run and of the table."""
    return {
        "guard_sql": f"NOT EXISTS (SELECT 1 FROM {_STEPS} AS failed "  # noqa: S608
        "WHERE failed.run_id = %s AND failed.status = %s)",
        "guard_params": [run_id, StepStatus.FAILED.value],
    }
