"""Signed, single-use, expiring links that decide an approval request as one of its
approvers: what the step's ``notify`` sends (docs/steps.md).

A link is ``/approvals/<token>/`` under ``FLOWPILOT_PUBLIC_URL``. The token is signed
(Django's signing, with ``SECRET_KEY`` and a salt of its own) and carries the link's id
and a random nonce; only the nonce's hash is stored (``ApprovalLink``), so the database
alone cannot make a link. A link acts as the approver it was made for — the same rules
as every surface (``runs.approvals.approval_decide``) — and works once, until the
earlier of ``FLOWPILOT_APPROVAL_LINK_HOURS`` and the request's own deadline, and only
while the request waits. A link is made only for a person who may decide the request
now (a named approver or a member of a named group): a step that names nobody sends
the page's address, not a link.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.approvals import approval_decide, approval_refusal
from runs.models import ApprovalLink, ApprovalRequest, ApprovalStatus
from tools.errors import FlowpilotError

SALT = "flowpilot.approval-link"


class ApprovalLinkInvalid(FlowpilotError):
    """The link was altered, has expired, was used, or its request is decided."""

    code = "approval_link_invalid"


def approval_deciders(request: ApprovalRequest) -> list[Any]:
    """The users who may decide ``request`` now and can be named: its named approvers
    and the members of its named groups (none when it names nobody)."""
    names = [a for a in request.approvers if not a.startswith("group:")]
    groups = [a.removeprefix("group:") for a in request.approvers if a.startswith("group:")]
    if not request.approvers:
        return []
    users = (
        get_user_model()
        .objects.filter(Q(username__in=names) | Q(groups__name__in=groups), is_active=True)
        .distinct()
        .order_by("username")
    )
    return [user for user in users if approval_refusal(request, user) is None]


def approval_link_make(request: ApprovalRequest, user: Any) -> str:
    """A new link's token deciding ``request`` as ``user``."""
    nonce = secrets.token_urlsafe(24)
    expires = timezone.now() + timedelta(hours=settings.FLOWPILOT_APPROVAL_LINK_HOURS)
    if request.expires_at is not None:
        expires = min(expires, request.expires_at)
    link = ApprovalLink.objects.create(
        request=request, user=user, nonce_hash=_hash(nonce), expires_at=expires
    )
    return signing.dumps({"l": link.pk, "n": nonce}, salt=SALT, compress=True)


def approval_link_url(token: str) -> str:
    """The link's address under ``FLOWPILOT_PUBLIC_URL`` (a path when it is unset)."""
    public = str(settings.FLOWPILOT_PUBLIC_URL or "").rstrip("/")
    return f"{public}/approvals/{token}/"


def approval_link_read(token: str) -> ApprovalLink:
    """The link ``token`` names, if it may still decide; else ``ApprovalLinkInvalid``
    saying why (never whether another request exists)."""
    try:
        data = signing.loads(token, salt=SALT)
        link = (
            ApprovalLink.objects.select_related("request__run__workflow", "user")
            .filter(pk=int(data["l"]), nonce_hash=_hash(str(data["n"])))
            .first()
        )
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        link = None
    if link is None:
        raise ApprovalLinkInvalid("this approval link is not valid (altered or unknown)")
    if link.used_at is not None:
        raise ApprovalLinkInvalid("this approval link was used already: each works once")
    if link.expires_at <= timezone.now():
        raise ApprovalLinkInvalid("this approval link has expired")
    if link.request.status != ApprovalStatus.PENDING:
        status = link.request.get_status_display().lower()
        raise ApprovalLinkInvalid(f"this approval request is {status} already")
    return link


def approval_link_decide(
    *,
    token: str,
    approve: bool,
    values: dict[str, Any] | None = None,
    comment: str = "",
    preview_hash: str = "",
) -> ApprovalRequest:
    """Decide through a link, as its approver; the link is used up with the decision."""
    with transaction.atomic():
        link = approval_link_read(token)
        used = ApprovalLink.objects.filter(pk=link.pk, used_at__isnull=True).update(
            used_at=timezone.now()
        )
        if not used:  # another use of the same link came first
            raise ApprovalLinkInvalid("this approval link was used already: each works once")
        return approval_decide(
            request_id=link.request_id, user=link.user, approve=approve, values=values,
            comment=comment, preview_hash=preview_hash, via="link",
        )  # fmt: skip


def _hash(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()
