"""runs.approval_links: a signed link decides as the approver it was made for, once,
until it expires, while the request waits; an altered link decides nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing

from runs.approval_links import (
    SALT,
    ApprovalLinkInvalid,
    approval_deciders,
    approval_link_decide,
    approval_link_make,
    approval_link_read,
    approval_link_url,
)
from runs.models import ApprovalLink, ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.factories import UserFactory
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def request_(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    UserFactory(username="alice")
    UserFactory(username="bob")
    run = run_execute(run=run_create(workflow=activate(refund_flow(required=2)), trigger="api",
                                     inputs={}))  # fmt: skip
    yield ApprovalRequest.objects.get(run=run)
    fake.stop()


def test_a_link_decides_as_its_approver_once(request_):
    alice = next(u for u in approval_deciders(request_) if u.username == "alice")
    token = approval_link_make(request_, alice)
    assert approval_link_read(token).user == alice
    approval_link_decide(token=token, approve=True, values={"note": "a"})
    assert request_.decisions.get().username == "alice"
    with pytest.raises(ApprovalLinkInvalid, match="used already"):
        approval_link_decide(token=token, approve=True, values={"note": "again"})
    assert Run.objects.get(pk=request_.run_id).status == "waiting"  # 1 of 2


def test_an_altered_expired_or_decided_link_decides_nothing(request_, settings):
    bob = next(u for u in approval_deciders(request_) if u.username == "bob")
    token = approval_link_make(request_, bob)
    data = signing.loads(token, salt=SALT)
    forged = signing.dumps({**data, "n": "guess"}, salt=SALT, compress=True)
    for bad in (token[:-2] + "xx", forged, "nonsense"):
        with pytest.raises(ApprovalLinkInvalid, match="not valid"):
            approval_link_read(bad)
    ApprovalLink.objects.update(expires_at=request_.created_at - timedelta(seconds=1))
    with pytest.raises(ApprovalLinkInvalid, match="expired"):
        approval_link_read(token)
    fresh = approval_link_make(request_, bob)
    ApprovalRequest.objects.filter(pk=request_.pk).update(status="cancelled")
    with pytest.raises(ApprovalLinkInvalid, match="cancelled"):
        approval_link_read(fresh)


def test_links_are_for_the_named_approvers_and_end_with_the_request(request_, settings):
    assert [u.username for u in approval_deciders(request_)] == ["alice", "bob"]
    request_.expires_at = request_.created_at + timedelta(minutes=5)
    link = ApprovalLink.objects.get(
        nonce_hash__isnull=False,
        pk=signing.loads(approval_link_make(request_, approval_deciders(request_)[0]), salt=SALT)[
            "l"
        ],
    )
    assert link.expires_at == request_.expires_at  # never past the step's own deadline
    settings.FLOWPILOT_PUBLIC_URL = "https://fp.example.com/"
    assert approval_link_url("abc") == "https://fp.example.com/approvals/abc/"
    nobody = ApprovalRequest(approvers=[], run=request_.run, step_result=request_.step_result)
    assert approval_deciders(nobody) == []
