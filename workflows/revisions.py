"""New versions from a reviewer: reject with feedback, or edit as JSON.

Rejecting hands the reviewer's feedback to the planner (``plan_revise``), which
proposes the next version. Editing as JSON never touches a stored definition:
a valid edit is stored as a new version that needs approval again. Neither needs
a run, so both live here; approving (which starts a validation run) is
``review.services.workflow_approve``, above ``runs``.

The approval errors are declared here, the lowest layer that raises them.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction

from tools.data_limits import data_limit_problem
from tools.errors import FlowpilotError
from tools.jsondata import DuplicateKey, duplicate_key_location, loads_strict, storage_problem
from tools.permissions import actor_user
from tools.registry import ToolRegistry
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_import, workflow_transition
from workflows.validation.report import ValidationIssue
from workflows.validator import validate_workflow

if TYPE_CHECKING:

    from tools.permissions import Actor

logger = logging.getLogger("flowpilot.approval")

CHANGE_PERMISSION = "workflows.change_workflow"


class ApprovalError(FlowpilotError):
    code = "approval_error"


class ApprovalForbidden(ApprovalError):
    """The user lacks the permission the action needs."""

    code = "approval_forbidden"


class ApprovalStateError(ApprovalError):
    """The version is not in a state the action applies to."""

    code = "approval_state_invalid"


class FeedbackRequired(ApprovalError):
    code = "feedback_required"


class DefinitionInvalid(ApprovalError):
    """An edited definition does not parse or validate; ``issues`` lists every problem."""

    code = "definition_invalid"

    def __init__(self, issues: list[ValidationIssue]) -> None:
        count = len(issues)
        lines = "; ".join(f"{i.path or '(workflow)'}: {i.message}" for i in issues)
        super().__init__(f"the definition has {count} error{'s' if count != 1 else ''}: {lines}")
        self.issues = issues


class DefinitionUnchanged(ApprovalError):
    """An edit that is identical to a stored version; nothing to review."""

    code = "definition_unchanged"

    def __init__(self, existing: Workflow) -> None:
        super().__init__(
            f"nothing changed: the definition is identical to {existing} ({existing.status})"
        )
        self.existing = existing


def permission_require(*, user: Actor | None, permission: str, action: str) -> None:
    """Refuse (``ApprovalForbidden``) an anonymous or inactive user, or one lacking it."""
    if user is None or not user.is_active or not user.has_perm(permission):
        who = getattr(user, "get_username", lambda: "anonymous")()
        raise ApprovalForbidden(f"{who} may not {action} (needs the `{permission}` permission)")


def workflow_reject(*, version: Workflow, rejected_by: Actor | None, feedback: str) -> Workflow:
    """Reject a pending version with feedback; the planner proposes the next version.

    Calls ``plan_revise``, which marks this version ``rejected`` and stores the
    revision as a new ``pending_review`` version (returned). At the planner's
    round limit it raises ``PlanRoundsExhausted``; a failed revision raises
    ``PlanFailed``. Both leave this version as it was.
    """
    permission_require(user=rejected_by, permission=CHANGE_PERMISSION, action=f"reject {version}")
    feedback = (feedback or "").strip()
    if not feedback:
        raise FeedbackRequired("say what should change: the planner revises from your feedback")
    if version.status != WorkflowStatus.PENDING_REVIEW:
        raise ApprovalStateError(
            f"`{version}` is {version.status}; only a version pending review can be rejected"
        )
    from workflows.planner.services import plan_revise  # the planner loads when it is asked

    return plan_revise(workflow=version, feedback=feedback, user=rejected_by)


def workflow_edit_json(
    *,
    version: Workflow,
    definition: str,
    user: Actor | None,
    registry: ToolRegistry | None = None,
) -> Workflow:
    """Store an edited definition (JSON text) as a new ``pending_review`` version.

    Stored versions never change. The text must parse, keep the workflow's name
    and pass the validator against the tool registry; otherwise
    ``DefinitionInvalid`` lists every issue with its JSON path and nothing is
    saved. An edit of a pending version supersedes it (it becomes ``rejected``);
    an active version stays active until the new one is approved.
    """
    permission_require(user=user, permission=CHANGE_PERMISSION, action=f"edit {version}")
    data = _parse_json(definition)
    issues = []
    if isinstance(data, dict) and data.get("name", version.name) != version.name:
        issues.append(
            ValidationIssue(
                "name_changed",
                "name",
                f"the name must stay `{version.name}`: an edit makes a new version of this "
                "workflow (import a file to start another one)",
            )
        )
    report = validate_workflow(
        data, registry=registry if registry is not None else ToolRegistry.from_db()
    )
    issues += report.errors
    if issues:
        raise DefinitionInvalid(issues)
    with transaction.atomic():
        created_version, created = workflow_import(
            data=report.valid_spec(),
            owner=version.owner or actor_user(user),
            status=WorkflowStatus.PENDING_REVIEW,
        )
        if not created:
            raise DefinitionUnchanged(created_version)
        locked = Workflow.objects.select_for_update().get(pk=version.pk)
        if locked.status == WorkflowStatus.PENDING_REVIEW:
            workflow_transition(workflow=locked, to=WorkflowStatus.REJECTED, actor=user)
    logger.info("%s edited by %s as %s", version, user, created_version)
    return created_version


def _parse_json(text: str) -> Any:
    if not (text or "").strip():
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", "the definition is empty")])
    try:
        data = loads_strict(text)
    except DuplicateKey as exc:
        message = f"not accepted: {duplicate_key_location(text) or exc}"
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", message)]) from exc
    except json.JSONDecodeError as exc:
        message = f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", message)]) from exc
    except RecursionError as exc:
        message = "not accepted: the JSON nests too deeply"
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", message)]) from exc
    if not isinstance(data, dict):
        message = f"the definition must be a JSON object, not {type(data).__name__}"
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", message)])
    problem = data_limit_problem(data) or storage_problem(data)
    if problem:
        raise DefinitionInvalid([ValidationIssue("json_invalid", "", f"not accepted: {problem}")])
    return data
