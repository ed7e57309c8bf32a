"""runs.approval_views: the page a signed link opens — no sign-in — shows the preview
and decides as the link's approver; a used or altered link shows why, and nothing else."""

from __future__ import annotations

import pytest

from runs.approval_links import approval_deciders, approval_link_make
from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.factories import UserFactory
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def link(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    UserFactory(username="alice")
    run = run_execute(run=run_create(workflow=activate(refund_flow()), trigger="api", inputs={}))
    request = ApprovalRequest.objects.get(run=run)
    yield request, approval_link_make(request, approval_deciders(request)[0]), fake
    fake.stop()


def test_the_link_page_shows_the_preview_and_decides_as_its_approver(client, link):
    request, token, fake = link
    page = client.get(f"/approvals/{token}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Deciding as <strong>alice</strong>" in text
    assert "&quot;amount&quot;: 30" in text
    assert TOKEN not in text
    done = client.post(
        f"/approvals/{token}/",
        {"_approve": "1", "value-note": "from the link", "preview_hash": request.preview_hash},
    )
    assert "You approved `confirm`" in done.content.decode()
    assert Run.objects.get(pk=request.run_id).status == "succeeded"
    assert fake.requests("refunds")[0].json()["note"] == "from the link"
    used = client.get(f"/approvals/{token}/")
    assert used.status_code == 404
    assert "used already" in used.content.decode()


def test_an_altered_link_shows_why_and_nothing_of_the_request(client, link):
    _, token, _ = link
    page = client.get(f"/approvals/{token[:-3]}abc/")
    assert page.status_code == 404
    text = page.content.decode()
    assert "not valid" in text
    assert "refund" not in text


def test_a_rejection_through_the_link(client, link):
    request, token, _ = link
    client.post(f"/approvals/{token}/", {"_reject": "1", "comment": "no"})
    request.refresh_from_db()
    assert (request.status, request.message) == ("rejected", "rejected by alice: no")


def test_a_link_whose_approver_may_no_longer_decide_shows_nothing(client, link):
    request, token, _ = link
    from runs.approvals import approval_decide

    alice = request.links.get().user
    approval_decide(request_id=request.pk, user=alice, approve=False, via="admin")
    page = client.get(f"/approvals/{token}/")
    assert page.status_code == 404  # decided: the link's request is no longer pending
    text = page.content.decode()
    assert "rejected already" in text
    assert "amount" not in text
