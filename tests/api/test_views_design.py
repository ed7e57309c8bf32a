"""The design phase over the API: plan (polled), revise, reject, approve; refusals.

The planner talks to the loopback OpenAI-compatible fake; Celery is eager, so a plan
request has finished when its 202 arrives — the tests still read it by polling.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from review.models import PlanRequest
from tests.api.conftest import assert_error
from tests.factories import DIGEST_GOAL, PASSWORD, digest_plan, pending_version
from workflows.models import Workflow

pytestmark = pytest.mark.django_db

VIEW = "workflows.view_workflow"
CHANGE = "workflows.change_workflow"
APPROVE = "workflows.approve_workflow"
PENDING = "/api/v1/workflows/sales_report/versions/1/"


def test_plan_answers_a_record_to_poll_with_the_proposed_version(make_client, planner_llm):
    planner_llm.reply_json(digest_plan())
    client = make_client(VIEW, "workflows.add_workflow")

    response = client.post(
        "/api/v1/plans/", {"goal": DIGEST_GOAL, "sample_inputs": {"threshold": 5}}, format="json"
    )

    assert response.status_code == 202, response.json()
    polled = client.get(response.json()["url"]).json()
    assert polled["status"] == "succeeded"
    assert polled["kind"] == "create"
    assert (polled["workflow"]["name"], polled["workflow"]["status"]) == (
        "sales_digest",
        "pending_review",
    )
    assert len(polled["attempts"]) == 1
    assert polled["error"] is None
    assert "threshold" in planner_llm.requests[0].text
    listed = client.get("/api/v1/plans/").json()["results"]
    assert [p["id"] for p in listed] == [polled["id"]]


def test_a_failed_plan_is_recorded_on_the_request_with_its_attempts(make_client, planner_llm):
    planner_llm.reply_json({"name": "x", "steps": []})
    planner_llm.reply_json({"name": "x", "steps": []})
    planner_llm.reply_json({"name": "x", "steps": []})
    client = make_client(VIEW, "workflows.add_workflow")

    plan = client.post("/api/v1/plans/", {"goal": DIGEST_GOAL}, format="json").json()

    assert plan["status"] == "failed"
    assert plan["workflow"] is None
    assert plan["error"]["code"] == "plan_failed"
    assert len(plan["attempts"]) == 3
    assert plan["error"]["details"]
    assert plan["error"]["details"][0]["path"] is not None
    body = assert_error(
        client.post("/api/v1/plans/", {"goal": "  "}, format="json"), 400, "invalid"
    )
    assert body["details"] == [
        {"path": "goal", "code": "blank", "message": "This field may not be blank."}
    ]


def test_plan_needs_add_permission(make_client):
    assert_error(make_client(VIEW).post("/api/v1/plans/", {"goal": "g"}), 403, "permission_denied")


def test_reject_revises_into_the_next_version(make_client, planner_llm):
    pending_version()
    revised = digest_plan()
    revised["name"] = "sales_report"
    planner_llm.reply_json(revised)
    client = make_client(VIEW, CHANGE)

    assert_error(client.post(PENDING + "reject/", {"feedback": " "}), 400, "invalid")
    plan = client.post(PENDING + "reject/", {"feedback": "add a digest"}, format="json").json()

    assert plan["status"] == "succeeded", plan
    assert (plan["kind"], plan["based_on"]["version"], plan["workflow"]["version"]) == (
        "reject",
        1,
        2,
    )
    assert Workflow.objects.get(name="sales_report", version=1).status == "rejected"
    assert_error(
        client.post(PENDING + "reject/", {"feedback": "again"}), 409, "approval_state_invalid"
    )


def test_revise_a_rejected_version_and_refuse_an_active_one(make_client, planner_llm):
    version = pending_version()
    Workflow.objects.filter(pk=version.pk).update(status="rejected")
    revised = digest_plan()
    revised["name"] = "sales_report"
    planner_llm.reply_json(revised)
    client = make_client(VIEW, CHANGE)

    plan = client.post(PENDING + "revise/", {"feedback": "more"}, format="json").json()

    assert plan["status"] == "succeeded"
    assert plan["workflow"]["version"] == 2
    Workflow.objects.filter(pk=version.pk).update(status="active")
    assert_error(client.post(PENDING + "revise/", {"feedback": "x"}), 409, "plan_not_revisable")


def test_approve_runs_the_validation_run_and_links_it(make_client, output_dir):
    pending_version()
    client = make_client(VIEW, APPROVE)

    body = client.post(PENDING + "approve/", {"sample_inputs": {"top": 2}}, format="json").json()

    assert body["status"] == "passed"
    assert body["workflow"]["status"] == "active"
    run = client.get(body["validation_run"]["url"])
    assert run.status_code == 403  # approving does not grant reading runs
    assert body["validation_run"]["status"] == "succeeded"


def test_approve_with_bad_sample_inputs_names_the_field(make_client):
    pending_version()

    response = make_client(VIEW, APPROVE).post(
        PENDING + "approve/", {"sample_inputs": {"top": "many", "extra": 1}}, format="json"
    )

    body = assert_error(response, 400, "inputs_invalid")
    assert {d["path"] for d in body["details"]} == {"inputs.top", "inputs.extra"}
    assert Workflow.objects.get().status == "pending_review"


def test_approve_without_the_permission_is_refused_however_the_request_is_made(make_client):
    pending_version()
    reviewer = make_client(VIEW, CHANGE, staff=True)

    assert_error(reviewer.post(PENDING + "approve/", {}), 403, "permission_denied")
    # A forged body naming an approver changes nothing: the caller is the approver.
    forged = {"sample_inputs": {}, "approved_by": 1, "user": "root"}
    assert_error(
        reviewer.post(PENDING + "approve/", forged, format="json"), 403, "permission_denied"
    )
    assert Workflow.objects.get().status == "pending_review"


def test_a_session_request_without_the_csrf_token_is_refused(make_client):
    pending_version()
    approver = make_client(VIEW, APPROVE)
    session = APIClient(enforce_csrf_checks=True)
    assert session.login(username=approver.user.username, password=PASSWORD)

    response = session.post(PENDING + "approve/", {}, format="json")

    body = assert_error(response, 403, "permission_denied")
    assert "CSRF" in body["message"]
    assert Workflow.objects.get().status == "pending_review"
    assert session.get(PENDING).status_code == 200  # reads need no token


def test_approve_twice_is_a_conflict_and_unknown_version_404(make_client, output_dir):
    pending_version()
    client = make_client(VIEW, APPROVE)
    client.post(PENDING + "approve/", {}, format="json")

    assert_error(client.post(PENDING + "approve/", {}), 409, "approval_state_invalid")
    assert_error(
        client.post("/api/v1/workflows/sales_report/versions/7/approve/", {}), 404, "not_found"
    )
    assert PlanRequest.objects.count() == 0


def test_approve_goes_through_the_approval_policy(make_client, output_dir, settings):
    settings.FLOWPILOT_APPROVALS_REQUIRED = 2
    settings.FLOWPILOT_AUTHOR_MAY_APPROVE = False
    author, first, second = (make_client(VIEW, APPROVE) for _ in range(3))
    pending_version(owner=author.user)

    body = assert_error(author.post(PENDING + "approve/", {}), 403, "approval_policy_refused")
    assert "author of `sales_report v1`" in body["message"]
    waiting = first.post(PENDING + "approve/", {}, format="json").json()
    assert (waiting["status"], waiting["validation_run"]) == ("pending", None)
    assert (waiting["approvals_given"], waiting["approvals_required"]) == (1, 2)
    assert waiting["workflow"]["status"] == "pending_review"
    assert_error(first.post(PENDING + "approve/", {}), 403, "approval_policy_refused")
    done = second.post(PENDING + "approve/", {}, format="json").json()

    assert done["status"] == "passed"
    assert done["workflow"]["status"] == "active"
    assert done["approvers"] == [first.user.username, second.user.username]


QUESTIONS = {
    "answer": "questions",
    "questions": [{"id": "threshold", "question": "How large is large?", "options": ["500"]}],
}


def test_the_planner_s_questions_are_surfaced_and_answered(make_client, planner_llm):
    planner_llm.reply_json(QUESTIONS)
    client = make_client(VIEW, "workflows.add_workflow")

    asked = client.post("/api/v1/plans/", {"goal": DIGEST_GOAL}, format="json").json()

    assert asked["status"] == "questions"
    assert asked["questions"] == QUESTIONS["questions"]
    assert asked["workflow"] is None
    assert asked["error"] is None
    assert asked["question_attempt"] == asked["attempts"][0]

    planner_llm.reply_json(digest_plan())
    answer = {"answers_to": asked["question_attempt"], "answers": {"threshold": "1000"}}
    planned = client.post("/api/v1/plans/", answer, format="json").json()

    assert planned["status"] == "succeeded", planned
    assert planned["goal"] == DIGEST_GOAL
    assert planned["answers"] == {"threshold": "1000"}
    assert planned["answers_to"] == asked["question_attempt"]
    assert planned["workflow"]["name"] == "sales_digest"
    assert "How large is large? -> 1000" in planner_llm.requests[1].messages[1]["content"]

    body = assert_error(
        client.post("/api/v1/plans/", {"answers_to": planned["attempts"][-1]}, format="json"),
        400,
        "plan_error",
    )
    assert "asked no questions" in body["message"]
    body = assert_error(client.post("/api/v1/plans/", {}, format="json"), 400, "invalid")
    assert body["details"][0]["path"] == "goal"
    unknown = {"answers_to": asked["question_attempt"], "answers": {"colour": "red"}}
    failed = client.post("/api/v1/plans/", unknown, format="json").json()
    assert failed["status"] == "failed"
    assert "no question `colour`" in failed["error"]["message"]


def test_without_an_llm_a_plan_is_refused_at_once_saying_what_to_set(make_client, no_llm):
    client = make_client(VIEW, "workflows.add_workflow")
    response = client.post("/api/v1/plans/", {"goal": DIGEST_GOAL}, format="json")
    body = assert_error(response, 503, "llm_not_configured")
    assert "OPENAI_API_KEY" in body["message"]
    assert not PlanRequest.objects.exists()


def test_the_schema_documents_the_plan_refusal_without_an_llm(make_client):
    client = make_client(VIEW)
    schema = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    refusal = schema["paths"]["/api/v1/plans/"]["post"]["responses"]["503"]
    assert "llm_not_configured" in refusal["description"]
    assert "503" not in schema["paths"]["/api/v1/plans/"]["get"]["responses"]


# --- free text holding a credential -----------------------------------------------------

TYPED_TOKEN = "xoxb-" + "2024112601-4242424242-QwErTyUiOpAsDfGh"
TYPED_KEY = "AKIA" + "Q2W3E4R5T6Y7U8I9"


def test_a_plan_request_stores_and_answers_its_free_text_masked(make_client, planner_llm):
    planner_llm.reply_json(digest_plan())
    client = make_client(VIEW, "workflows.add_workflow")

    response = client.post(
        "/api/v1/plans/",
        {"goal": f"{DIGEST_GOAL} (slack {TYPED_TOKEN})", "sample_inputs": {"key": TYPED_KEY}},
        format="json",
    )

    assert response.status_code == 202, response.json()
    polled = client.get(response.json()["url"])
    shown = response.content.decode() + polled.content.decode()
    assert polled.json()["goal"] == f"{DIGEST_GOAL} (slack ***)"
    assert polled.json()["sample_inputs"] == {"key": "***"}
    stored = PlanRequest.objects.get()
    assert (stored.goal, stored.sample_inputs) == (f"{DIGEST_GOAL} (slack ***)", {"key": "***"})
    assert Workflow.objects.get().goal == f"{DIGEST_GOAL} (slack ***)"
    for secret in (TYPED_TOKEN, TYPED_KEY):
        assert secret not in shown
        assert secret not in planner_llm.all_text()


def test_reject_feedback_holding_a_token_is_stored_and_sent_masked(make_client, planner_llm):
    pending_version()
    revised = digest_plan()
    revised["name"] = "sales_report"
    planner_llm.reply_json(revised)
    client = make_client(VIEW, CHANGE)

    feedback = f"post it with {TYPED_TOKEN}"
    response = client.post(PENDING + "reject/", {"feedback": feedback}, format="json")

    assert response.json()["status"] == "succeeded", response.json()
    assert response.json()["feedback"] == "post it with ***"
    assert PlanRequest.objects.get().feedback == "post it with ***"
    assert TYPED_TOKEN not in planner_llm.all_text()
    assert TYPED_TOKEN not in response.content.decode()


def test_approve_refuses_a_sample_input_holding_a_token_naming_it(make_client):
    pending_version()

    response = make_client(VIEW, APPROVE).post(
        PENDING + "approve/", {"sample_inputs": {"csv_path": TYPED_KEY}}, format="json"
    )

    body = assert_error(response, 400, "inputs_invalid")
    assert "input `csv_path` holds the value of a secret" in response.content.decode()
    assert TYPED_KEY not in response.content.decode()
    assert Workflow.objects.get().status == "pending_review"
    assert body["details"]
