"""Approval requests over the REST API: listed (yours with ``mine=true``), read with the
preview, approved with the form's values, rejected; refusals in the one error shape."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_execute
from tests.api.conftest import assert_error, client_for
from tests.factories import UserFactory
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    run = run_execute(run=run_create(workflow=activate(refund_flow()), trigger="api", inputs={}))
    yield run, ApprovalRequest.objects.get(run=run), fake
    fake.stop()


def person(name: str, *perms: str):
    user = UserFactory(username=name)
    codenames = [p.split(".")[1] for p in ("runs.view_approvalrequest", *perms)]
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return client_for(type(user).objects.get(pk=user.pk))


def test_an_approver_lists_reads_and_approves_and_the_run_goes_on(waiting):
    run, request, fake = waiting
    alice = person("alice")
    listed = alice.get("/api/v1/approvals/", {"mine": "true"}).json()
    assert [a["id"] for a in listed["results"]] == [request.pk]
    shown = alice.get(f"/api/v1/approvals/{request.pk}/").json()
    assert (shown["status"], shown["refusal"], shown["approvals_given"]) == ("pending", None, 0)
    assert shown["preview"][0]["body"] == {"amount": 30, "note": None}
    assert TOKEN not in str(shown)

    response = alice.post(
        f"/api/v1/approvals/{request.pk}/approve/",
        {"values": {"note": "ok by me"}, "preview_hash": shown["preview_hash"]},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "approved"
    assert response.json()["decisions"][0]["via"] == "api"
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    assert fake.requests("refunds")[0].json()["note"] == "ok by me"


def test_someone_else_sees_it_but_may_not_decide(waiting):
    _, request, _ = waiting
    mallory = person("mallory")
    assert mallory.get("/api/v1/approvals/", {"mine": "true"}).json()["count"] == 0
    assert mallory.get("/api/v1/approvals/").json()["count"] == 1
    shown = mallory.get(f"/api/v1/approvals/{request.pk}/").json()
    assert "mallory is not among the approvers" in shown["refusal"]
    refused = mallory.post(
        f"/api/v1/approvals/{request.pk}/approve/", {"values": {"note": "x"}}, format="json"
    )
    assert_error(refused, 403, "approval_refused")


def test_bad_values_a_second_decision_and_a_reject(waiting):
    run, request, _ = waiting
    bob = person("bob")
    bad = bob.post(f"/api/v1/approvals/{request.pk}/approve/", {"values": {}}, format="json")
    body = assert_error(bad, 400, "approval_invalid")
    assert "'note' is a required property" in body["message"]
    rejected = bob.post(
        f"/api/v1/approvals/{request.pk}/reject/", {"comment": "not this week"}, format="json"
    )
    assert rejected.status_code == 200
    assert rejected.json()["message"] == "rejected by bob: not this week"
    assert Run.objects.get(pk=run.pk).status == "failed"
    again = person("alice").post(
        f"/api/v1/approvals/{request.pk}/approve/", {"values": {"note": "x"}}, format="json"
    )
    assert_error(again, 409, "approval_decided")


def test_reading_needs_the_view_permission(waiting):
    _, request, _ = waiting
    outsider = client_for(_bare("outsider"))
    assert outsider.get("/api/v1/approvals/").status_code == 403
    assert outsider.get(f"/api/v1/approvals/{request.pk}/").status_code == 403
    decided = outsider.post(f"/api/v1/approvals/{request.pk}/reject/", {}, format="json")
    assert decided.status_code == 403


def _bare(name: str):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=name, password="x")


def test_filters_are_checked(waiting):
    client = person("alice")
    assert_error(client.get("/api/v1/approvals/", {"status": "maybe"}), 400, "invalid")
    assert_error(client.get("/api/v1/approvals/", {"mine": "perhaps"}), 400, "invalid")
    assert client.get("/api/v1/approvals/", {"status": "pending"}).json()["count"] == 1
    assert client.get("/api/v1/approvals/", {"workflow": "other"}).json()["count"] == 0
