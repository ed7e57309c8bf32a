"""api.serializers.approvals: a request as the API shows it — approvals given, the
refusal for the reader — and what deciding takes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import AnonymousUser

from api.serializers.approvals import ApprovalSerializer, ApproveSerializer
from runs.models import ApprovalDecision, ApprovalRequest, StepResult
from tests.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


class Asking:
    def __init__(self, user) -> None:
        self.user = user


def a_request(**fields) -> ApprovalRequest:
    run = RunFactory()
    step = StepResult.objects.create(run=run, step_id="confirm", status="waiting")
    return ApprovalRequest.objects.create(
        run=run, step_result=step, step_id="confirm", approvers=["alice"], required=2, **fields
    )


def test_the_approvals_given_and_the_readers_refusal():
    request = a_request()
    alice = UserFactory(username="alice")
    ApprovalDecision.objects.create(request=request, user=alice, username="alice",
                                    approved=True, via="api")  # fmt: skip
    as_alice = ApprovalSerializer(request, context={"request": Asking(alice)}).data
    assert as_alice["approvals_given"] == 1
    assert as_alice["refusal"] == "alice has decided this request already"
    anonymous = ApprovalSerializer(request, context={"request": Asking(AnonymousUser())}).data
    assert anonymous["refusal"] == "only a signed-in, active user may decide an approval"
    request.status = "approved"
    assert ApprovalSerializer(request, context={}).data["refusal"] == "it is approved"


def test_deciding_takes_values_a_comment_and_the_preview_seen():
    given = ApproveSerializer(data={"values": {"note": "x"}, "preview_hash": "a" * 64})
    assert given.is_valid(), given.errors
    expected = {"values": {"note": "x"}, "comment": "", "preview_hash": "a" * 64}
    assert given.validated_data == expected
    assert not ApproveSerializer(data={"values": [1]}).is_valid()
    assert not ApproveSerializer(data={"preview_hash": "a" * 65}).is_valid()
