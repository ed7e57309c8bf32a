"""tools.permissions: the one permission check of state-changing services — a person
needs the permission and an active account; ``None`` is a trusted in-process caller."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory
from tools.permissions import PermissionRefused, permission_require

pytestmark = pytest.mark.django_db

APPROVE = "workflows.approve_workflow"


def test_a_trusted_caller_passes():
    permission_require(actor=None, permission=APPROVE, action="approve")


def test_a_person_with_the_permission_passes_and_one_without_is_refused_by_name():
    permission_require(actor=UserFactory(approver=True), permission=APPROVE, action="approve")
    clerk = UserFactory(username="clerk")
    with pytest.raises(PermissionRefused) as caught:
        permission_require(actor=clerk, permission=APPROVE, action="approve `w` v1")
    assert caught.value.message == (
        "clerk may not approve `w` v1 (needs the `workflows.approve_workflow` permission)"
    )
    assert caught.value.code == "permission_denied"


def test_an_inactive_account_is_refused_even_with_the_permission():
    approver = UserFactory(approver=True, is_active=False)
    with pytest.raises(PermissionRefused):
        permission_require(actor=approver, permission=APPROVE, action="approve")
