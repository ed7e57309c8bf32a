"""The API's own services and error handler, beyond what the endpoint tests reach."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.exceptions import ValidationError

import api.services.plans as plans
from api.errors import validation_details
from api.models import PlanKind, PlanRequest, WebhookDelivery
from api.services.plans import plan_request_create, plan_request_execute
from api.services.webhooks import webhook_create, webhook_deliver, webhook_sign
from tests.factories import UserFactory, WorkflowFactory, pending_version
from workflows.planner import PlanError

pytestmark = pytest.mark.django_db


def test_a_plan_request_is_planned_once_even_when_its_task_is_delivered_twice(planner_llm):
    from tests.factories import digest_plan

    planner_llm.reply_json(digest_plan())
    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    again = plan_request_execute(request_id=plan.pk)

    assert (again.status, again.workflow_id) == ("succeeded", plan.workflow_id)
    assert len(planner_llm.requests) == 1


def test_a_broker_that_is_down_fails_the_request_not_the_call(monkeypatch):
    def refuse(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(plans, "in_process", lambda: False)
    monkeypatch.setattr("api.tasks.plan_execute.delay", refuse)

    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    assert plan.status == "failed"
    assert plan.error == {
        "code": "broker_unavailable",
        "message": "broker unreachable",
        "details": [],
    }


def test_an_unexpected_error_is_recorded_on_the_request(monkeypatch):
    def explode(request):
        raise RuntimeError("boom")

    monkeypatch.setattr(plans, "_plan", explode)

    plan = plan_request_create(kind=PlanKind.CREATE, user=None, goal="digest")

    assert (plan.status, plan.error["code"]) == ("failed", "internal_error")
    assert "RuntimeError: boom" in plan.error["message"]


def test_a_revision_whose_version_was_deleted_fails_cleanly(monkeypatch):
    version = pending_version()
    monkeypatch.setattr(plans, "in_process", lambda: False)
    monkeypatch.setattr("api.tasks.plan_execute.delay", lambda pk: None)
    plan = plan_request_create(kind=PlanKind.REVISE, user=None, feedback="more", based_on=version)
    PlanRequest.objects.filter(pk=plan.pk).update(based_on=None)

    done = plan_request_execute(request_id=plan.pk)

    assert (done.status, done.error["code"]) == ("failed", "plan_failed")


def test_the_task_plans_the_request(planner_llm):
    from api.tasks import plan_execute
    from tests.factories import digest_plan

    planner_llm.reply_json(digest_plan())
    plan = PlanRequest.objects.create(kind=PlanKind.CREATE, goal="digest")

    assert plan_execute(plan.pk) == "succeeded"


def test_a_goal_is_required():
    with pytest.raises(PlanError, match="a goal is needed"):
        plan_request_create(kind=PlanKind.CREATE, user=None, goal="  ")


def test_deliveries_older_than_twice_the_window_are_forgotten(output_dir, settings):
    WorkflowFactory(status="active")
    trigger = webhook_create(workflow_name="sales_report", user=UserFactory())
    old = WebhookDelivery.objects.create(trigger=trigger, signature="0" * 64, timestamp=1)
    WebhookDelivery.objects.filter(pk=old.pk).update(
        received_at=timezone.now() - timedelta(seconds=3 * settings.FLOWPILOT_WEBHOOK_WINDOW)
    )
    now = int(time.time())

    run = webhook_deliver(
        public_id=trigger.public_id,
        timestamp=str(now),
        signature=webhook_sign(secret=trigger.secret, timestamp=now, body=b"{}"),
        body=b"{}",
    )

    assert list(WebhookDelivery.objects.values_list("run", flat=True)) == [run.pk]


def test_validation_details_give_json_paths_of_nested_problems():
    exc = ValidationError({"inputs": {"rows": [{"x": ["bad"]}, {}]}, "non_field_errors": ["no"]})

    rows = validation_details(exc.detail)

    assert rows == [
        {"path": "inputs.rows[0].x", "code": "invalid", "message": "bad"},
        {"path": "", "code": "invalid", "message": "no"},
    ]


def test_unmatched_paths_are_json_under_api_and_django_pages_elsewhere():
    client = Client()

    api = client.get("/api/v1/no/such/thing/")
    other = client.get("/nowhere/")

    assert api.status_code == other.status_code == 404
    assert api.json() == {"code": "not_found", "message": "No such resource.", "details": []}
    assert other["Content-Type"].startswith("text/html")


def test_text_a_database_cannot_store_is_a_400_with_its_path(admin_client_api):
    for body in (
        b'{"goal": "a\\u0000b"}',
        b'{"goal": "ok", "sample_inputs": {"k\\ud800": 1}}',
    ):
        response = admin_client_api.post("/api/v1/plans/", body, content_type="application/json")

        assert response.status_code == 400, response.json()
        assert response.json()["code"] == "parse_error"
        assert response.json()["details"][0]["code"] == "text_unstorable"
    assert response.json()["details"][0]["path"] == "sample_inputs['k\\ud800']"
    assert not PlanRequest.objects.exists()


def test_a_webhook_body_with_unstorable_text_is_refused(output_dir):
    from api.services.webhooks import WebhookBodyInvalid

    WorkflowFactory(status="active")
    trigger = webhook_create(workflow_name="sales_report", user=None)
    body = b'{"csv_path": "x\\u0000"}'
    now = int(time.time())

    with pytest.raises(WebhookBodyInvalid, match="csv_path: text with a NUL"):
        webhook_deliver(
            public_id=trigger.public_id,
            timestamp=str(now),
            signature=webhook_sign(secret=trigger.secret, timestamp=now, body=body),
            body=body,
        )
