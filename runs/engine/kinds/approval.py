"""`approval` steps: the run waits for a person (docs/steps.md).

A try of the step records an ``ApprovalRequest`` — who may decide, the form, the
deadline, and the preview of the requests the next steps that change something will
send (``runs.engine.preview``) — has its ``notify`` recipients told once that has
committed (``FLOWPILOT_APPROVAL_REQUESTED_HOOKS``), and returns a waiting ``Attempt``:
the step's outcome is ``waiting``, neither in flight nor finished. With nothing else
to do the run waits too (``runs.engine.finish.run_wait``), holding no task, thread or
connection. The decision (``runs.approvals``) settles the step — approved: the form's values are its
output; rejected or timed out: failed, skipped or continued as ``on_timeout`` says —
and the run goes on. A step tried again (a pending request already recorded: its
process died after the write) takes up that request instead of asking twice.

A replay answers from the recorded decision of the validation run it replays.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction

from runs.engine.context import RunContext
from runs.engine.kinds.base import Attempt, Describe, StepKind
from runs.engine.preview import preview_hash, side_effect_preview
from runs.models import ApprovalRequest, ApprovalStatus, Run, RunStatus, StepResult
from tools.errors import FlowpilotError
from tools.hooks import hooks_announce
from workflows.graph import FlowGraph
from workflows.schema import ApprovalStep


class ApprovalRejected(FlowpilotError):
    """A person rejected the step, or its time ran out (``on_timeout: fail``)."""

    code = "approval_rejected"

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def execute_approval_step(ctx: RunContext, step: ApprovalStep, args: dict[str, Any]) -> Attempt:
    try:
        run = Run.objects.get(pk=ctx.run_id)
        if run.replay_of_id is not None:
            return _recorded(step, run.replay_of_id)
        if run.status != RunStatus.RUNNING:  # cancelled or failed meanwhile: nobody to ask
            raise ApprovalRejected(f"step `{step.id}`: the run is {run.status}; nothing waits")
        result = StepResult.objects.get(run_id=ctx.run_id, step_id=step.id)
        if not ApprovalRequest.objects.filter(
            step_result=result, status=ApprovalStatus.PENDING
        ).exists():
            _request(ctx, step, run, result)
        return Attempt(output=None, waiting=True)
    finally:
        if ctx.run_child is not None:  # in process, on a pool thread: its own connection
            connection.close()


def _request(ctx: RunContext, step: ApprovalStep, run: Run, result: StepResult) -> None:
    preview = side_effect_preview(ctx, run, step.id)
    now = ctx.now()
    try:
        with transaction.atomic():
            request = ApprovalRequest.objects.create(
                run=run,
                step_result=result,
                step_id=step.id,
                approvers=list(step.approvers),
                required=step.required,
                author_may_approve=step.author_may_approve,
                author_id=_author(run),
                form=step.form,
                preview=preview,
                preview_hash=preview_hash(preview),
                expires_at=None if step.timeout is None else now + timedelta(seconds=step.timeout),
                on_timeout=step.on_timeout,
            )
    except IntegrityError:
        return  # another try of the same step recorded it first: one request waits
    if step.notify.has_channels():  # told once its row has committed (``notify``)
        hooks_announce(setting="FLOWPILOT_APPROVAL_REQUESTED_HOOKS", request_id=request.pk)


# Sub-workflow levels followed up to a run's top-level run (far above any valid nesting).
MAX_PARENTS = 100


def _author(run: Run) -> int | None:
    """Who started the run — for a child run of a `workflow` step, who started its
    top-level run: the author rule holds through sub-workflows."""
    top = run
    for _ in range(MAX_PARENTS):
        if top.parent_run_id is None:
            break
        parent = Run.objects.filter(pk=top.parent_run_id).only("started_by", "parent_run").first()
        if parent is None:
            break
        top = parent
    return top.started_by_id


def _recorded(step: ApprovalStep, validation_run_id: int) -> Attempt:
    """A replay's answer: the decision the validation run's request got."""
    decided = (
        ApprovalRequest.objects.filter(run_id=validation_run_id, step_id=step.id)
        .exclude(status__in=[ApprovalStatus.PENDING, ApprovalStatus.CANCELLED])
        .order_by("-id")
        .first()
    )
    if decided is None:
        raise ApprovalRejected(
            f"step `{step.id}`: the validation run {validation_run_id} recorded no decision "
            "of this approval to replay"
        )
    if decided.status == ApprovalStatus.APPROVED:
        return Attempt(output=decided.output or {})
    if decided.status == ApprovalStatus.TIMED_OUT and step.on_timeout == "continue":
        return Attempt(output=step.form_defaults())
    raise ApprovalRejected(f"step `{step.id}`: {decided.message or 'rejected'} (recorded)")


def _plan(step: ApprovalStep, graph: FlowGraph, describe: Describe) -> list[str]:
    who = ", ".join(step.approvers) or "anyone who may approve runs"
    lines = [f"        waits for {step.required} approval(s) of {who}"]
    if step.timeout is not None:
        lines.append(f"        after {step.timeout:g} s without a decision: {step.on_timeout}")
    return lines


KIND = StepKind(model=ApprovalStep, execute=execute_approval_step, plan=_plan)
