"""Approving a workflow version: the validation run that proves it.

The design phase ends here: a reviewer approves a *pending_review* version with
sample inputs; the version is frozen (``validating``), an ``Approval`` records
who approved which definition hash, and a validation run proves it. Green →
``active``; red → back to ``pending_review`` with the failed run attached to the
approval, so the failure is shown where the review happens.

Approving creates and executes a run, so it sits above ``runs``; rejecting and
editing as JSON need no run and live in ``workflows.revisions`` (with the
approval errors, re-exported here for the callers of this module).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from review.models import Approval, ApprovalStatus
from runs.models import Run, RunStatus, RunTrigger
from runs.services import run_create, run_execute
from tools.registry import ToolRegistry
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

__all__ = [
    "APPROVE_PERMISSION",
    "ApprovalError",
    "ApprovalForbidden",
    "ApprovalStateError",
    "DefinitionInvalid",
    "DefinitionUnchanged",
    "FeedbackRequired",
    "workflow_approve",
    "workflow_reapprove",
]

logger = logging.getLogger("flowpilot.approval")

APPROVE_PERMISSION = "workflows.approve_workflow"


def workflow_approve(
    *,
    version: Workflow,
    approved_by,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry | None = None,
) -> Approval:
    """Approve a pending version and prove it with a validation run (in this process).

    Refuses (``ApprovalForbidden``) a user without ``workflows.approve_workflow``
    and (``ApprovalStateError``) a version that is not ``pending_review``. The
    version is validated against the tool registry and the sample inputs are
    checked *before* anything changes (``WorkflowInvalid`` / ``InputsInvalid``).
    Then: ``pending_review → validating``, an ``Approval`` pinned to the
    definition hash, the hash of every tool the version allows recorded
    (``Workflow.tool_pins``: a later run refuses a changed tool), the validation
    run; green → ``active`` (approved_by/at set),
    red → ``pending_review`` with ``Approval.status = failed`` and the run's
    error summary. Returns the approval; its ``validation_run`` is the run.
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
        registry = registry if registry is not None else ToolRegistry.from_db()
        run, approval = _validation_start(
            locked, approved_by=approved_by, sample_inputs=sample_inputs, registry=registry
        )
        spec = workflow_spec(locked)
        locked.tool_pins = workflow_tool_pins(spec=spec, registry=registry)
        locked.workflow_pins = workflow_child_pins(spec=spec)
        locked.save(update_fields=["tool_pins", "workflow_pins"])
        workflow_transition(workflow=locked, to=WorkflowStatus.VALIDATING, actor=approved_by)
    # Outside the transaction: the engine checkpoints every step as it goes.
    try:
        run = run_execute(run=run)
    except BaseException:
        _settle(approval, locked, passed=False, actor=approved_by)
        raise
    _settle(approval, locked, passed=run.status == RunStatus.SUCCEEDED, actor=approved_by)
    version.refresh_from_db()
    return approval


def workflow_reapprove(
    *,
    version: Workflow,
    approved_by,
    sample_inputs: Mapping[str, Any] | None,
    registry: ToolRegistry | None = None,
) -> Approval:
    """Approve an active version again, on its tools' current definitions.

    For a version refused with ``tool_changed`` or ``workflow_changed``: a validation run
    proves it with the tools and child workflows as they are now; green → the new hashes
    are recorded and it runs
    again; red → nothing changes (it stays refused). The version stays ``active``
    throughout (its definition did not change). Same permission as approving.
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
        spec = workflow_spec(locked)
        pins = workflow_tool_pins(spec=spec, registry=registry)
        children = workflow_child_pins(spec=spec)
        run, approval = _validation_start(
            locked, approved_by=approved_by, sample_inputs=sample_inputs, registry=registry
        )
    passed = False
    try:
        passed = run_execute(run=run).status == RunStatus.SUCCEEDED
    finally:
        _settle_reapproval(approval, locked, passed=passed, pins=pins, children=children)
    version.refresh_from_db()
    logger.info("re-approval %s of %s: %s", approval.pk, locked, approval.status)
    return approval


def _validation_start(
    locked: Workflow, *, approved_by, sample_inputs: Mapping[str, Any] | None, registry
) -> tuple[Run, Approval]:
    """The validation run of an approval (pending) and the approval row."""
    run = run_create(
        workflow=locked,
        trigger=RunTrigger.VALIDATION,
        inputs=dict(sample_inputs or {}),
        registry=registry,
    )
    approval = Approval.objects.create(
        workflow=locked,
        definition_hash=locked.definition_hash,
        approved_by=approved_by,
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


def _settle(approval: Approval, workflow: Workflow, *, passed: bool, actor) -> None:
    with transaction.atomic():
        _approval_finish(approval, passed=passed)
        workflow.refresh_from_db()
        target = WorkflowStatus.ACTIVE if passed else WorkflowStatus.PENDING_REVIEW
        workflow_transition(workflow=workflow, to=target, actor=actor)
    logger.info("approval %s of %s: %s", approval.pk, workflow, approval.status)
