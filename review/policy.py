"""The approval policy: how many distinct people approve a version, and may its author.

The policy of a workflow is its own ``ApprovalPolicy`` row (by name, every version)
where a field is set, else the settings ``FLOWPILOT_APPROVALS_REQUIRED`` (default 1)
and ``FLOWPILOT_AUTHOR_MAY_APPROVE`` (default true). ``workflow_approve`` asks
``approval_policy_check`` before it records an approval; ``approval_tally`` says how
many approvals count so far. An approval counts only for the definition hash it
names, only while it is ``pending``, ``validating`` or ``passed``, and only if it is
a reviewer's (an import by a superuser is recorded, never counted), so an edit (a
new hash) starts from zero and a failed validation run's approval is given again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db.models import QuerySet

from review.models import Approval, ApprovalKind, ApprovalPolicy, ApprovalStatus
from workflows.models import Workflow
from workflows.revisions import ApprovalForbidden

if TYPE_CHECKING:
    from tools.permissions import Actor

COUNTING = (ApprovalStatus.PENDING, ApprovalStatus.VALIDATING, ApprovalStatus.PASSED)


class ApprovalPolicyRefused(ApprovalForbidden):
    """The approval breaks the policy: the author where authors may not approve, or a
    second approval by the same person."""

    code = "approval_policy_refused"


@dataclass(frozen=True)
class Policy:
    required: int
    author_may_approve: bool
    source: str  # "settings" or "workflow" (at least one field of its own row)

    def describe(self) -> str:
        who = "the author may approve" if self.author_may_approve else "not by the author"
        people = "approver" if self.required == 1 else "distinct approvers"
        return f"{self.required} {people}, {who} ({self.source} policy)"


@dataclass(frozen=True)
class Approver:
    username: str
    user_id: int | None
    at: datetime


@dataclass(frozen=True)
class Tally:
    policy: Policy
    approvers: tuple[Approver, ...]  # in the order they approved

    @property
    def count(self) -> int:
        return len(self.approvers)

    def text(self) -> str:
        names = ", ".join(a.username for a in self.approvers)
        return f"{self.count} of {self.policy.required} approvals" + (
            f" ({names})" if names else ""
        )


def approval_policy_for(*, name: str) -> Policy:
    """The policy of the workflow ``name``: its own row's fields, else the settings."""
    return approval_policy_of(ApprovalPolicy.objects.filter(workflow_name=name).first())


def approval_policy_of(own: ApprovalPolicy | None) -> Policy:
    """The policy a workflow's own row (``None``: it has none) puts in effect."""
    required = int(settings.FLOWPILOT_APPROVALS_REQUIRED)
    author = bool(settings.FLOWPILOT_AUTHOR_MAY_APPROVE)
    source = "settings"
    if own is not None and own.approvals_required is not None:
        required, source = own.approvals_required, "workflow"
    if own is not None and own.author_may_approve is not None:
        author, source = own.author_may_approve, "workflow"
    return Policy(required=max(required, 1), author_may_approve=author, source=source)


def counting_approvals() -> QuerySet[Approval]:
    """Approvals that may count (review approvals that passed), with their approvers,
    oldest first: of one version, or prefetched for many (``approval_tally(rows=…)``)."""
    return (
        Approval.objects.filter(kind=ApprovalKind.REVIEW, status__in=COUNTING)
        .select_related("approved_by")
        .order_by("created_at", "id")
    )


def approval_tally(
    *, version: Workflow, policy: Policy | None = None, rows: Iterable[Approval] | None = None
) -> Tally:
    """The approvals that count towards ``version`` under its policy, oldest first.

    One per person (the first); an author's approval does not count where the policy
    refuses authors (it may have been given before the policy changed). ``rows``: the
    version's ``counting_approvals()`` when already read (a list page reads them for
    all its versions at once); only those of its current definition count.
    """
    policy = policy if policy is not None else approval_policy_for(name=version.name)
    if rows is None:
        rows = counting_approvals().filter(
            workflow=version, definition_hash=version.definition_hash
        )
    rows = [row for row in rows if row.definition_hash == version.definition_hash]
    seen: set[int | None] = set()
    approvers = []
    for row in rows:
        user_id = row.approved_by_id
        if user_id is None or user_id in seen:
            continue  # a deleted user no longer vouches for anything
        if not policy.author_may_approve and user_id == version.owner_id:
            continue
        seen.add(user_id)
        approver = row.approved_by
        if approver is None:
            continue
        approvers.append(Approver(approver.get_username(), user_id, row.created_at))
    return Tally(policy=policy, approvers=tuple(approvers))


def approval_policy_check(*, version: Workflow, user: Actor, tally: Tally) -> None:
    """Refuse (``ApprovalPolicyRefused``) an approval the policy does not accept."""
    policy = tally.policy
    if not policy.author_may_approve and user.pk == version.owner_id:
        raise ApprovalPolicyRefused(
            f"{user.get_username()} is the author of `{version}`, and its policy "
            f"({policy.describe()}) needs approvers other than the author"
        )
    if any(a.user_id == user.pk for a in tally.approvers):
        raise ApprovalPolicyRefused(
            f"{user.get_username()} already approved `{version}` (definition "
            f"{version.definition_hash[:12]}); {tally.text()}: it needs another person"
        )
