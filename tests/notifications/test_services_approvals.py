"""notifications.services: an approval step's ``notify`` — a real SMTP conversation on
loopback and a webhook receiver that checks the signature — each recipient who may
decide gets a link that decides as them, once; the links are never stored."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group

from notifications.models import Delivery
from notifications.services import notification_approval_requested
from runs.approval_links import approval_link_decide
from runs.models import ApprovalLink, ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.factories import UserFactory
from tests.notifications.support import SMTPServer, WebhookReceiver
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "notice-key-1f2e3d"


@pytest.fixture
def smtp(settings):
    with SMTPServer() as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        yield server


@pytest.fixture
def api(monkeypatch, settings):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    monkeypatch.setenv("NOTICE_KEY", KEY)
    settings.FLOWPILOT_PUBLIC_URL = "https://flowpilot.example.com"
    fake = refunds_api()
    yield fake
    fake.stop()


def waiting(notify: dict) -> Run:
    finance = Group.objects.create(name="finance")
    UserFactory(username="alice", email="alice@example.com")
    carol = UserFactory(username="carol", email="carol@example.com")
    carol.groups.add(finance)
    workflow = activate(refund_flow(notify=notify))
    return run_execute(run=run_create(workflow=workflow, trigger="api", inputs={}))


def test_each_approver_gets_a_link_deciding_as_them_and_others_the_page(api, smtp):
    run = waiting({"email": ["alice@example.com", "ops@example.com", "carol@example.com"]})
    # The run's request told its recipients once its row committed (in process: now).
    assert {m["To"] for m in smtp.messages} == {
        "alice@example.com", "ops@example.com", "carol@example.com",
    }  # fmt: skip
    by_to = {m["To"]: m.get_content() for m in smtp.messages}
    assert "approval needed: refunds v1 run" in smtp.messages[0]["Subject"]
    assert "refund: POST" in by_to["ops@example.com"]
    assert TOKEN not in by_to["ops@example.com"]
    request = ApprovalRequest.objects.get(run=run)
    page = f"https://flowpilot.example.com/admin/runs/approvalrequest/{request.pk}/change/"
    assert f"Approval page: {page}" in by_to["ops@example.com"]
    assert "Decide as" not in by_to["ops@example.com"]
    alice_link = re.search(r"Decide as alice: (\S+)", by_to["alice@example.com"]).group(1)
    assert alice_link.startswith("https://flowpilot.example.com/approvals/")
    assert "Decide as carol:" in by_to["carol@example.com"]  # a member of a named group
    delivery = Delivery.objects.get(approval_request=request)
    assert (delivery.status, delivery.event, delivery.channel) == ("sent", "approval", "email")
    assert "approvals/" not in str(delivery.payload)  # the links are not stored
    assert ApprovalLink.objects.count() == 2

    token = alice_link.rstrip("/").rsplit("/", 1)[1]
    approval_link_decide(token=token, approve=True, values={"note": "by mail"})
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    assert request.decisions.get().via == "link"

    assert notification_approval_requested(request_id=request.pk) == []  # decided: no notice


def test_the_webhook_gets_a_signed_notice_with_a_link_per_approver(api, smtp):
    with WebhookReceiver(KEY) as receiver:
        run = waiting({"webhook": receiver.url, "webhook_secret_env": "NOTICE_KEY"})
        (posted,) = receiver.received
    assert posted["verified"]
    body = posted["body"]
    assert (body["event"], body["run"], body["step"], body["required"]) == (
        "approval", run.pk, "confirm", 1,
    )  # fmt: skip
    assert [link["user"] for link in body["links"]] == ["alice", "carol"]
    assert body["preview"][0]["method"] == "POST"
    request = ApprovalRequest.objects.get(run=run)
    again = notification_approval_requested(request_id=request.pk)
    assert again == []  # one notice per request and channel
    assert Delivery.objects.filter(approval_request=request).count() == 1
