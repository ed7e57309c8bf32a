"""Activating an imported version without review: a superuser's shortcut, recorded loudly.

``importflow --activate --as USER`` is for flows an operator wrote and checked by
hand. It does not go through the approval policy and runs no validation run, so
it is restricted to an active superuser, and it is recorded as what it is: an
``Approval`` of kind ``import_superuser`` (approver, time, definition hash; it never
counts towards a policy), a line in the log (INFO) and a warning on the command's stderr.
"""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from review.models import Approval, ApprovalKind, ApprovalStatus
from workflows.models import Workflow, WorkflowStatus
from workflows.revisions import ApprovalForbidden
from workflows.services import workflow_activate_trusted

logger = logging.getLogger("flowpilot.approval")


def import_superuser(*, username: str | None) -> User:
    """The active superuser ``username``, or ``ApprovalForbidden`` saying why not."""
    if not username:
        raise ApprovalForbidden(
            "--activate bypasses review and the validation run; name the superuser "
            "responsible with --as USERNAME"
        )
    user = get_user_model().objects.filter(username=username).first()
    if user is None or not user.is_active or not user.is_superuser:
        raise ApprovalForbidden(
            f"--as {username}: no active superuser of that name; only a superuser may "
            "activate a version without review"
        )
    return user


def workflow_activate_imported(*, version: Workflow, superuser: User) -> Approval | None:
    """Draft → active without review, recorded as an ``import_superuser`` approval.

    Returns the approval row, or ``None`` when the version was active already (an
    unchanged file imported again records nothing new).
    """
    if not getattr(superuser, "is_superuser", False):
        raise ApprovalForbidden(f"{superuser} is not a superuser; the import activates nothing")
    if version.status == WorkflowStatus.ACTIVE:
        return None
    with transaction.atomic():
        workflow_activate_trusted(workflow=version, actor=superuser)
        approval = Approval.objects.create(
            workflow=version,
            definition_hash=version.definition_hash,
            approved_by=superuser,
            kind=ApprovalKind.IMPORT_SUPERUSER,
            status=ApprovalStatus.PASSED,
            finished_at=timezone.now(),
        )
    # INFO: the command prints the warning itself (a WARNING record would print it twice)
    logger.info(
        "%s activated by superuser %s on import, without review or a validation run "
        "(approval %s, kind import_superuser)",
        version,
        superuser.get_username(),
        approval.pk,
    )
    return approval
