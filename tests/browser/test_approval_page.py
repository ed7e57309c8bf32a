"""An approval step in a real browser: the run waits; its author is refused; a first
approver checks the previewed request body and approves, and the page asks for a
second; the second approval lets the run finish, and the request sent is the one
previewed (with the approver's note).

The run is real (an http tool POSTing to a loopback API); chromium (Debian's, through
Playwright) reads the admin served by ``live_server``, which decides in process: the
run goes on in the request that approved it.
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth.models import Group, Permission

from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.browser.test_review_flow import log_in
from tests.factories import UserFactory
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


def approver(name: str, *groups: Group):
    user = UserFactory(username=name)
    user.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    user.groups.add(*groups)
    return user


def test_two_approvers_approve_from_the_page_after_reading_the_preview(
    live_server, page, monkeypatch, artifacts
):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    try:
        finance = Group.objects.create(name="finance")
        alice = approver("alice")
        approver("bob")
        approver("carol", finance)
        workflow = activate(refund_flow(required=2, author_may_approve=False))
        run = run_execute(
            run=run_create(workflow=workflow, trigger="api", inputs={"amount": 21},
                           started_by=alice)
        )  # fmt: skip
        assert run.status == "waiting"
        request = ApprovalRequest.objects.get(run=run)
        url = f"{live_server.url}/admin/runs/approvalrequest/{request.pk}/change/"

        # The author is refused, and sees why.
        log_in(page, live_server, alice.username)
        page.goto(url)
        assert "alice started this run" in page.inner_text("#fp-approval-refusal")
        assert page.query_selector("#fp-approval-form") is None
        page.context.clear_cookies()

        # Bob finds it waiting for him, reads the request about to be sent, approves.
        log_in(page, live_server, "bob")
        page.goto(f"{live_server.url}/admin/runs/approvalrequest/")
        page.click(f"a[href$='/approvalrequest/{request.pk}/change/']")
        assert page.inner_text("#fp-preview-refund h3") == "refund · send_refund"
        body = json.loads(page.inner_text("#fp-preview-refund .fp-preview-body"))
        assert body == {"amount": 42, "note": None}
        assert page.inner_text("#fp-preview-refund .fp-preview-request") == (
            f"POST {fake.url}/refunds"
        )
        assert TOKEN not in page.content()
        page.screenshot(path=str(artifacts / "approval_page.png"), full_page=True)
        page.fill("#id_value-note", "checked the amount")
        page.click("#fp-approve")
        page.wait_for_selector("#fp-approval-decisions")
        assert "1 of 2 approvals" in page.inner_text("#fp-approval-summary")
        assert Run.objects.get(pk=run.pk).status == "waiting"  # a second one is needed
        assert "bob has decided this request already" in page.inner_text("#fp-approval-refusal")
        page.context.clear_cookies()

        # Carol (of the finance group) gives the second approval: the run finishes.
        log_in(page, live_server, "carol")
        page.goto(url)
        page.fill("#id_value-note", "refund approved")
        page.select_option("#id_value-priority", label="high")
        clicked = time.monotonic()
        page.click("#fp-approve")
        page.wait_for_selector("#fp-approval-decisions")
        finished = Run.objects.get(pk=run.pk)
        took = time.monotonic() - clicked
        assert finished.status == "succeeded", finished.error_summary
        assert page.inner_text("#fp-approval-status") == "Approved"
        (sent,) = fake.requests("refunds")
        assert sent.json() == {"amount": 42, "note": "refund approved"}
        print(f"second approval to the run's end, page answered: {took:.2f} s")
    finally:
        fake.stop()
