"""Approving a workflow version: the validation run that proves it.

The design phase ends here: a reviewer approves a *pending_review* version with
sample inputs; the version is frozen (``validating``), an ``Approval`` records
who approved which definition hash, and a validation run proves it. Green →
``active``; red → back to ``pending_review`` with the failed run attached to the
approval, so the failure is shown where the review happens.

The validation run goes through the same driver as every other run
(``run_enqueue``): on the Celery workers when a broker is configured, so approval
proves the workflow where it will run; in this process otherwise. The approval is
settled by ``validation_settle`` when the run finishes: called by the run-finished
hook (``review.hooks.run_finished``, through a task) and, when the run finished in
this process, right away as well — whichever comes first settles it, the other
finds nothing left to do.

Approving creates and executes a run, so it sits above ``runs``; rejecting and
editing as JSON need no run and live in ``workflows.revisions`` (with the
approval errors, re-exported here for the callers of this module).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from review.models import Approval, ApprovalStatus
from review.policy import (
    ApprovalPolicyRefused,
    Tally,
    approval_policy_check,
    approval_policy_for,
    approval_tally,
)
from runs.engine.secrets import inputs_refuse_secrets
from runs.models import RUN_TERMINAL, Run, RunStatus, RunTrigger
from runs.services import run_create, run_enqueue
from runs.state import run_transition
from tools.permissions import actor_user
from tools.registry import ToolRegistry
from workflows.inputs import resolve_inputs
from workflows.models import Workflow, WorkflowStatus
from workflows.pins import workflow_child_pins, workflow_tool_pins
from workflows.revisions import (
    ApprovalError,
    ApprovalForbidden,
    ApprovalStateError,
    DefinitionInvalid,
    DefinitionUnchanged,
    FeedbackRequired,
    permission_require,
)
from workflows.services import workflow_spec, workflow_transition
from workflows.validator import validate_workflow

if TYPE_CHECKING:
    from tools.permissions import Actor

__all__ = [
    "APPROVE_PERMISSION",
    "ApprovalError",
    "ApprovalForbidden",
    "ApprovalPolicyRefused",
    "ApprovalStateError",
    "DefinitionInvalid",
    "DefinitionUnchanged",
    "FeedbackRequired",
    "validation_settle",
    "workflow_approve",
    "workflow_reapprove",
]

logger = logging.getLogger("flowpilot.approval")

APPROVE_PERMISSION = "workflows.approve_workflow"


def workflow_approve(
    *,
    version: Workflow,
    approved_by: Actor,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry | None = None,
) -> Approval:
    """Approve a pending version; the approval that meets its policy proves it with a
    validation run (through the driver).

    Refuses (``ApprovalForbidden``) a user without ``workflows.approve_workflow``,
    (``ApprovalStateError``) a version that is not ``pending_review``, and
    (``ApprovalPolicyRefused``) what the approval policy forbids: the author where
    authors may not approve, the same person twice (``review.policy``). The
    version is validated against the tool registry and the sample inputs are
    checked *before* anything changes (``WorkflowInvalid`` / ``InputsInvalid``).
    While the policy still needs more approvers the approval is recorded
    ``pending`` (approver, time, definition hash) and the version stays in
    review. The approval that meets the policy goes on:
    ``pending_review → validating``, an ``Approval`` pinned to the
    definition hash, the hash of every tool the version allows recorded
    (``Workflow.tool_pins``: a later run refuses a changed tool), the validation
    run, enqueued like any run; green → ``active`` (approved_by/at set),
    red → ``pending_review`` with ``Approval.status = failed`` and the run's
    error summary. Returns the approval; its ``validation_run`` is the run. On the
    Celery workers the approval is still ``validating`` when this returns: the
    version changes state when the run finishes (``validation_settle``).
    """
    permission_require(
        user=approved_by, permission=APPROVE_PERMISSION, action=f"approve {version}"
    )
    with transaction.atomic():
        locked = Workflow.objects.select_for_update().get(pk=version.pk)
        if locked.status != WorkflowStatus.PENDING_REVIEW:
            raise ApprovalStateError(
                f"`{locked}` is {locked.status}; only a version pending review can be approved"
            )
        tally = approval_tally(version=locked)
        approval_policy_check(version=locked, user=approved_by, tally=tally)
        registry = registry if registry is not None else ToolRegistry.from_db()
        if tally.count + 1 < tally.policy.required:
            return _approval_pending(
                locked, approved_by=approved_by, sample_inputs=sample_inputs, registry=registry
            )
        run, approval = _validation_start(
            locked, approved_by=approved_by, sample_inputs=sample_inputs, registry=registry
        )
        spec = workflow_spec(locked)
        locked.tool_pins = workflow_tool_pins(spec=spec, registry=registry)
        locked.workflow_pins = workflow_child_pins(spec=spec)
        locked.save(update_fields=["tool_pins", "workflow_pins"])
        workflow_transition(workflow=locked, to=WorkflowStatus.VALIDATING, actor=approved_by)
    # Outside the transaction: the engine checkpoints every step as it goes.
    _validation_drive(run)
    version.refresh_from_db()
    approval.refresh_from_db()
    return approval


def workflow_reapprove(
    *,
    version: Workflow,
    approved_by: Actor,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry | None = None,
) -> Approval:
    """Approve an active version again, on its tools' current definitions.

    For a version refused with ``tool_changed`` or ``workflow_changed``: a validation run
    proves it with the tools and child workflows as they are now; green → the new hashes
    (kept on the approval until then) are recorded and it runs again; red → nothing
    changes (it stays refused). The version stays ``active`` throughout (its definition
    did not change). Same permission as approving; the run goes through the driver, as
    for an approval.
    """
    permission_require(
        user=approved_by, permission=APPROVE_PERMISSION, action=f"re-approve {version}"
    )
    registry = registry if registry is not None else ToolRegistry.from_db()
    with transaction.atomic():
        locked = Workflow.objects.select_for_update().get(pk=version.pk)
        if locked.status != WorkflowStatus.ACTIVE:
            raise ApprovalStateError(
                f"`{locked}` is {locked.status}; only an active version is re-approved"
            )
        # The definition was approved already; only the author rule applies again.
        policy = approval_policy_for(name=locked.name)
        approval_policy_check(version=locked, user=approved_by, tally=Tally(policy, ()))
        spec = workflow_spec(locked)
        pins = workflow_tool_pins(spec=spec, registry=registry)
        children = workflow_child_pins(spec=spec)
        run, approval = _validation_start(
            locked, approved_by=approved_by, sample_inputs=sample_inputs, registry=registry
        )
        approval.tool_pins, approval.workflow_pins = pins, children
        approval.save(update_fields=["tool_pins", "workflow_pins"])
    _validation_drive(run)
    version.refresh_from_db()
    approval.refresh_from_db()
    logger.info("re-approval %s of %s: %s", approval.pk, locked, approval.status)
    return approval


def validation_settle(*, run_id: int) -> Approval | None:
    """Settle the approval whose validation run ``run_id`` has finished.

    Green: an approval makes its version ``active``; a re-approval records the tool
    hashes it proved. Red: the version goes back to review (a re-approval changes
    nothing). Idempotent, under the approval's row lock: an approval already settled,
    a run not finished yet, or a run that is no validation run return None.
    """
    with transaction.atomic():
        approval = (
            Approval.objects.select_for_update()
            .select_related("validation_run", "workflow")
            .filter(validation_run_id=run_id, status=ApprovalStatus.VALIDATING)
            .first()
        )
        run = approval.validation_run if approval is not None else None
        if approval is None or run is None or run.status not in RUN_TERMINAL:
            return None
        passed = run.status == RunStatus.SUCCEEDED
        if approval.tool_pins is not None:
            _settle_reapproval(
                approval,
                approval.workflow,
                passed=passed,
                pins=approval.tool_pins,
                children=approval.workflow_pins or {},
            )
        else:
            _settle(approval, approval.workflow, passed=passed, actor=approval.approved_by)
    logger.info("approval %s of %s: %s", approval.pk, approval.workflow, approval.status)
    return approval


def _validation_drive(run: Run) -> None:
    """Enqueue the validation run; settle now when it finished in this process.

    When it cannot start (the run is left pending, or failed), it is failed and the
    approval settled red before the error propagates; a run that started on the
    workers but whose steps the broker refused stays with the sweeper, and the
    approval waits for it.
    """
    try:
        run = run_enqueue(run=run)
    except BaseException:
        run.refresh_from_db()
        if run.status == RunStatus.PENDING:
            run_transition(run, RunStatus.FAILED, finished_at=timezone.now(),
                           error_summary="the validation run could not start")  # fmt: skip
        validation_settle(run_id=run.pk)
        raise
    validation_settle(run_id=run.pk)


def _approval_pending(
    locked: Workflow,
    *,
    approved_by: Actor,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry,
) -> Approval:
    """An approval that does not meet the policy yet: checked like the last one (the
    version validates; the inputs fit and hold no secret value), then kept."""
    spec = workflow_spec(locked)
    validate_workflow(spec, registry=registry).raise_for_errors()
    resolved = resolve_inputs(spec.inputs, dict(sample_inputs or {}))
    inputs_refuse_secrets(inputs=resolved, registry=registry, env=os.environ, token_shapes=True)
    approval = Approval.objects.create(
        workflow=locked,
        definition_hash=locked.definition_hash,
        approved_by=actor_user(approved_by),
        sample_inputs=resolved,
        status=ApprovalStatus.PENDING,
    )
    logger.info(
        "approval %s of %s by %s: %s",
        approval.pk,
        locked,
        approved_by,
        approval_tally(version=locked).text(),
    )
    return approval


def _validation_start(
    locked: Workflow,
    *,
    approved_by: Actor,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry,
) -> tuple[Run, Approval]:
    """The validation run of an approval (pending) and the approval row. Sample inputs a
    reviewer typed are refused when they hold a token as well as a declared secret."""
    given = dict(sample_inputs or {})
    inputs_refuse_secrets(inputs=given, registry=registry, env=os.environ, token_shapes=True)
    run = run_create(
        workflow=locked,
        trigger=RunTrigger.VALIDATION,
        inputs=given,
        registry=registry,
        started_by=actor_user(approved_by),
    )
    approval = Approval.objects.create(
        workflow=locked,
        definition_hash=locked.definition_hash,
        approved_by=actor_user(approved_by),
        sample_inputs=run.inputs,
        validation_run=run,
    )
    return run, approval


def _settle_reapproval(
    approval: Approval,
    workflow: Workflow,
    *,
    passed: bool,
    pins: dict[str, str],
    children: dict[str, str],
) -> None:
    with transaction.atomic():
        _approval_finish(approval, passed=passed)
        if passed:
            Workflow.objects.filter(pk=workflow.pk).update(tool_pins=pins, workflow_pins=children)


def _approval_finish(approval: Approval, *, passed: bool) -> None:
    approval.status = ApprovalStatus.PASSED if passed else ApprovalStatus.FAILED
    approval.finished_at = timezone.now()
    approval.save(update_fields=["status", "finished_at"])


def _settle(
    approval: Approval, workflow: Workflow, *, passed: bool, actor: Actor | None
) -> None:
    with transaction.atomic():
        _approval_finish(approval, passed=passed)
        if passed:  # the approvals that waited for this one are proven with it
            Approval.objects.filter(
                workflow=workflow,
                definition_hash=approval.definition_hash,
                status=ApprovalStatus.PENDING,
            ).update(status=ApprovalStatus.PASSED, finished_at=approval.finished_at)
        workflow.refresh_from_db()
        target = WorkflowStatus.ACTIVE if passed else WorkflowStatus.PENDING_REVIEW
        workflow_transition(workflow=workflow, to=target, actor=actor)
