"""runs.admin_approvals: the approval page shows what the run will send and takes the
decision; the list shows what waits for the signed-in person."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from runs.admin_approvals import form_values, values_form
from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.factories import UserFactory
from tests.runs.approval_support import FORM, TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    run = run_execute(run=run_create(workflow=activate(refund_flow()), trigger="api", inputs={}))
    yield run, ApprovalRequest.objects.get(run=run)
    fake.stop()


def signed_in(client, name: str):
    user = UserFactory(username=name)
    user.user_permissions.add(Permission.objects.get(codename="view_approvalrequest"))
    client.force_login(user)
    return client


def test_the_list_shows_what_waits_for_me_by_default(client, waiting):
    _, request = waiting
    page = signed_in(client, "alice").get("/admin/runs/approvalrequest/").content.decode()
    assert f"/admin/runs/approvalrequest/{request.pk}/change/" in page
    client.logout()
    other = signed_in(client, "mallory")
    assert (
        f"approvalrequest/{request.pk}/change/"
        not in other.get("/admin/runs/approvalrequest/").content.decode()
    )
    everyone = other.get("/admin/runs/approvalrequest/?for=all").content.decode()
    assert f"approvalrequest/{request.pk}/change/" in everyone


def test_the_page_shows_the_preview_and_approving_lets_the_run_go_on(client, waiting):
    run, request = waiting
    alice = signed_in(client, "alice")
    url = f"/admin/runs/approvalrequest/{request.pk}/change/"
    page = alice.get(url).content.decode()
    assert "POST" in page
    assert "/refunds" in page
    assert "&quot;amount&quot;: 30" in page
    assert TOKEN not in page
    assert 'name="value-note"' in page
    response = alice.post(
        url,
        {"_approve": "1", "value-note": "fine", "value-priority": '"high"',
         "preview_hash": request.preview_hash},
    )  # fmt: skip
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == "succeeded"
    request.refresh_from_db()
    assert request.output == {"note": "fine", "priority": "high"}
    assert request.decisions.get().via == "admin"


def test_a_refused_person_sees_why_and_no_form(client, waiting):
    _, request = waiting
    page = (
        signed_in(client, "mallory")
        .get(f"/admin/runs/approvalrequest/{request.pk}/change/")
        .content.decode()
    )
    assert "You cannot decide this request: mallory is not among the approvers" in page
    assert 'id="fp-approval-form"' not in page


def test_a_decision_the_service_refuses_is_shown_not_lost(client, waiting):
    run, request = waiting
    response = signed_in(client, "alice").post(
        f"/admin/runs/approvalrequest/{request.pk}/change/",
        {"_approve": "1", "value-note": "x", "preview_hash": "0" * 64},
    )
    assert "the preview you saw is not this request" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == "waiting"


def test_the_values_form_follows_the_schema():
    form = values_form(FORM, {"value-note": "n", "value-priority": '"high"'})
    assert form.is_valid(), form.errors
    assert form_values(FORM, form) == {"note": "n", "priority": "high"}
    assert not values_form(FORM, {"value-priority": '"low"'}).is_valid()  # note is required
    typed = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array"},
        },
    }
    form = values_form(typed, {"value-n": "3", "value-x": "1.5", "value-tags": '["a"]'})
    assert form.is_valid(), form.errors
    assert form_values(typed, form) == {"n": 3, "x": 1.5, "ok": False, "tags": ["a"]}
