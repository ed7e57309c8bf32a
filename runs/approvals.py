"""Deciding an ``approval`` step: who may, what a decision records, and how the run goes
on (docs/steps.md).

``approval_decide`` is the one way to approve or reject, from the admin, the REST API
and the MCP server. Under the request's row lock it checks the person — a named
approver (a user name, or a member of a named group), or, when the step names nobody,
a holder of ``runs.approve_run``; never the run's author when the step says so; once
per person — checks the values against the step's form, and records the decision
with what the person saw (the preview's hash). The ``required``-th distinct approval
approves the step (its output: the values of that approval); one rejection rejects it.
``approvals_expire`` (beat) decides the requests whose time is up, as ``on_timeout``
says.

Settling the step goes on with the run, under the run's row lock (the lock
``runs.engine.finish.run_wait`` takes to make a run wait, so a decision can never be
lost between the two):

- a **waiting** run on the Celery workers is taken back to running and the steps the
  decision freed are queued (``advance_locked``), from whichever process decided: the
  run resumes within a broker hop of the decision;
- a waiting run **in process** (no broker) goes back to pending and is executed on from
  its checkpoint in the deciding process;
- a run still **running** (other steps in flight): on Celery the freed steps are
  queued now; in process its driver finds the decision when it runs out of work.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from jsonschema import Draft202012Validator

from runs.engine.celery.advance import advance_locked
from runs.engine.celery.broker import in_process, publish_step
from runs.engine.celery.run import run_context
from runs.models import (
    ApprovalDecision,
    ApprovalRequest,
    ApprovalStatus,
    Run,
    RunStatus,
    StepResult,
    StepStatus,
)
from runs.services import run_execute
from runs.state import run_transition, step_transition
from tools.errors import FlowpilotError
from tools.jsondata import store_escape

logger = logging.getLogger("flowpilot.runs")

APPROVE_PERMISSION = "runs.approve_run"
VIA = ("admin", "api", "mcp", "link")


class ApprovalRefused(FlowpilotError):
    """This person may not decide this request (not an approver, the run's author, or
    decided already)."""

    code = "approval_refused"


class ApprovalInvalid(FlowpilotError):
    """The decision cannot be taken as given: the values do not fit the form, or the
    preview seen is not the request's."""

    code = "approval_invalid"


class ApprovalNotReady(FlowpilotError):
    """The request's step has not finished starting to wait: decide it a moment later."""

    code = "approval_not_ready"


class ApprovalDecided(FlowpilotError):
    """The request is decided already (approved, rejected, timed out or cancelled)."""

    code = "approval_decided"


def approval_refusal(request: ApprovalRequest, user: Any) -> str | None:
    """Why ``user`` may not decide ``request`` now (None: they may)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return "only a signed-in, active user may decide an approval"
    names = [a for a in request.approvers if not a.startswith("group:")]
    groups = [a.removeprefix("group:") for a in request.approvers if a.startswith("group:")]
    if request.approvers:
        named = user.get_username() in names or (
            bool(groups) and user.groups.filter(name__in=groups).exists()
        )
        if not named:
            named_ones = ", ".join(request.approvers)
            return f"{user.get_username()} is not among the approvers ({named_ones})"
    elif not user.has_perm(APPROVE_PERMISSION):
        return f"{user.get_username()} may not approve runs (the `{APPROVE_PERMISSION}` permission)"
    if not request.author_may_approve and request.author_id == user.pk:
        return f"{user.get_username()} started this run, and its author may not decide it"
    # Read through ``decisions.all()``: a list that prefetched them asks nothing more.
    if any(d.username == user.get_username() for d in request.decisions.all()):
        return f"{user.get_username()} has decided this request already"
    return None


def approvals_pending_for(user: Any) -> list[ApprovalRequest]:
    """The pending requests ``user`` may decide now, oldest first."""
    pending = (
        ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
        .select_related("run__workflow")
        .prefetch_related("decisions")
    )
    return [r for r in pending.order_by("created_at", "id") if approval_refusal(r, user) is None]


def approval_decide(
    *,
    request_id: int,
    user: Any,
    approve: bool,
    values: Mapping[str, Any] | None = None,
    comment: str = "",
    preview_hash: str = "",
    via: str,
) -> ApprovalRequest:
    """Record ``user``'s decision; settle the step when it is the deciding one, and go on
    with the run. ``preview_hash``: the preview the person was shown (refused when it
    is not this request's: they saw another one); empty, the request's own."""
    if via not in VIA:
        raise ValueError(f"via must be one of {', '.join(VIA)}")
    given = dict(values or {})
    with transaction.atomic():
        request = _locked(request_id)
        if request.status != ApprovalStatus.PENDING:
            raise ApprovalDecided(f"{request} is {request.get_status_display().lower()} already")
        _require_waiting(request)
        refusal = approval_refusal(request, user)
        if refusal is not None:
            raise ApprovalRefused(refusal)
        if preview_hash and preview_hash != request.preview_hash:
            raise ApprovalInvalid(
                "the preview you saw is not this request's (it changed, or belongs to another "
                "request): reload the approval page"
            )
        if approve:
            _check_values(request, given)
        ApprovalDecision.objects.create(
            request=request,
            user=user,
            username=user.get_username(),
            approved=approve,
            values=given if approve else None,
            comment=comment,
            preview_hash=request.preview_hash,
            via=via,
        )
        if not approve:
            reason = f"rejected by {user.get_username()}" + (f": {comment}" if comment else "")
            _settle(request, ApprovalStatus.REJECTED, message=reason)
        elif request.decisions.filter(approved=True).count() >= request.required:
            _settle(request, ApprovalStatus.APPROVED, output=given)
    logger.info(
        "run %s step %s: %s %s via %s",
        request.run_id, request.step_id, user.get_username(),
        "approved" if approve else "rejected", via,
        extra={"run_id": request.run_id, "step_id": request.step_id},
    )  # fmt: skip
    return request


def _check_values(request: ApprovalRequest, values: dict[str, Any]) -> None:
    if request.form is None:
        if values:
            raise ApprovalInvalid("this approval has no form: it takes no values")
        return
    errors = sorted(
        Draft202012Validator(request.form).iter_errors(values), key=lambda e: list(e.path)
    )
    if errors:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or 'values'}: {e.message}" for e in errors[:5]
        )
        raise ApprovalInvalid(f"the values do not fit the form: {problems}")


def approvals_expire(*, now: datetime | None = None, limit: int = 200) -> int:
    """Decide the pending requests whose time is up, as each step's ``on_timeout``
    says: fail the step, skip it, or continue with the form's defaults. How many."""
    now = now or timezone.now()
    due = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
    count = 0
    for pk in list(due.order_by("expires_at").values_list("pk", flat=True)[:limit]):
        with transaction.atomic():
            request = _locked(pk)
            if request.status != ApprovalStatus.PENDING or not _waiting(request):
                continue  # decided meanwhile, or its step not waiting yet: the next sweep
            waited = (now - request.created_at).total_seconds()
            message = f"no decision within {waited:.0f} s ({request.on_timeout} on timeout)"
            _settle(request, ApprovalStatus.TIMED_OUT, message=message, output=_defaults(request))
            count += 1
        logger.warning("run %s step %s: %s", request.run_id, request.step_id, message)
    return count


def _locked(request_id: int) -> ApprovalRequest:
    """The request under its run's row lock, then its own: the order ``run_cancel`` and
    ``run_wait`` take them in (the run first), so no two writers wait on each other."""
    run_id = ApprovalRequest.objects.values_list("run_id", flat=True).get(pk=request_id)
    Run.objects.select_for_update().filter(pk=run_id).first()
    return ApprovalRequest.objects.select_for_update().get(pk=request_id)


def _waiting(request: ApprovalRequest) -> bool:
    return StepResult.objects.filter(pk=request.step_result_id, status=StepStatus.WAITING).exists()


def _require_waiting(request: ApprovalRequest) -> None:
    """A request is decided once its step waits: until its try has ended, the step's
    outcome is not written yet, and a decision then would be lost with it."""
    if not _waiting(request):
        raise ApprovalNotReady(
            f"{request} is not waiting yet (its step is still starting to wait): try again "
            "in a moment"
        )


def _defaults(request: ApprovalRequest) -> dict[str, Any]:
    properties = (request.form or {}).get("properties") or {}
    return {
        k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v
    }


def _settle(
    request: ApprovalRequest,
    status: str,
    *,
    output: dict[str, Any] | None = None,
    message: str = "",
) -> None:
    """Decide ``request`` and its step, then go on with the run (the caller's
    transaction; the run's row lock taken here, as ``run_wait`` takes it)."""
    now = timezone.now()
    run = Run.objects.select_for_update().get(pk=request.run_id)
    request.status, request.decided_at, request.message = status, now, message
    request.output = output if status == ApprovalStatus.APPROVED else None
    request.save(update_fields=["status", "decided_at", "message", "output"])
    to, fields = _step_outcome(request, status, output, message)
    result = StepResult.objects.get(pk=request.step_result_id)
    entry = {"status": to, "decided": status, "at": now.isoformat(), "message": message}
    settled = step_transition(
        StepResult.objects.filter(pk=result.pk, status=StepStatus.WAITING),
        to,
        finished_at=now,
        updated_at=now,
        attempt_log=[*(result.attempt_log or []), store_escape(entry)],
        **fields,
    )
    if settled:
        _go_on(run, now)


def _step_outcome(
    request: ApprovalRequest, status: str, output: dict[str, Any] | None, message: str
) -> tuple[str, dict[str, Any]]:
    """The step's new status and fields for a decision."""
    if status == ApprovalStatus.APPROVED or (
        status == ApprovalStatus.TIMED_OUT and request.on_timeout == "continue"
    ):
        return StepStatus.SUCCEEDED, {"output": store_escape(output or {}), "error": None}
    if status == ApprovalStatus.TIMED_OUT and request.on_timeout == "skip":
        return StepStatus.SKIPPED, {}
    error = {"type": "ApprovalRejected", "message": message, "retryable": False}
    if status == ApprovalStatus.TIMED_OUT:
        error["type"] = "ApprovalTimedOut"
    return StepStatus.FAILED, {"error": error}


def _go_on(run: Run, now: datetime) -> None:
    """The run after a step was decided (its row lock held; see the module's text)."""
    if run.status == RunStatus.WAITING:
        if in_process():
            if run_transition(run, RunStatus.PENDING):
                run_id = run.pk
                transaction.on_commit(lambda: _execute_here(run_id))
            return
        run_transition(run, RunStatus.RUNNING)
    elif run.status != RunStatus.RUNNING or in_process():
        return  # finished or cancelled meanwhile; or in process: its driver finds it
    with run_context(run) as ctx:
        advance_locked(ctx, run, publish=publish_step, now=now)


def _execute_here(run_id: int) -> None:
    """In process: the decided run goes on here, from its checkpoint."""
    run = Run.objects.get(pk=run_id)
    if run.status == RunStatus.PENDING:
        run_execute(run=run)
