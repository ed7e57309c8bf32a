"""The admin review page and its actions, through Django's test client.

Every action is a POST with the CSRF token (the client enforces it here), calls
one service and reports with a message; refusals hold on the server even when
the button is not shown (a forged POST).
"""

from __future__ import annotations

import html
import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from review.models import Approval
from review.selectors import graph_with_types
from runs.models import Run
from tests.factories import (
    DIGEST_GOAL,
    HOSTILE_TEXT,
    PASSWORD,
    UserFactory,
    digest_plan,
    hostile_data,
    pending_version,
    sales_report_data,
)
from tools.registry import ToolRegistry
from workflows.models import PlanAttempt, Workflow
from workflows.planner.services import plan_create
from workflows.services import workflow_export, workflow_import

pytestmark = pytest.mark.django_db


class CSRFClient(Client):
    """A test client that enforces CSRF and sends the token like the browser's forms do."""

    def __init__(self, **kwargs):
        super().__init__(enforce_csrf_checks=True, **kwargs)

    def post(self, path, data=None, **kwargs):
        self.get(reverse("admin:index"))  # its logout form sets the csrftoken cookie
        data = {**(data or {}), "csrfmiddlewaretoken": self.cookies["csrftoken"].value}
        return super().post(path, data, **kwargs)


def login(user) -> CSRFClient:
    client = CSRFClient()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def url(name: str, workflow: Workflow | None = None) -> str:
    args = [workflow.pk] if workflow is not None else []
    return reverse(f"admin:workflows_workflow_{name}", args=args)


def texts(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def graph_data(response) -> dict:
    found = re.search(
        r'<script id="fp-graph-data" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert found, "the graph data is not embedded"
    return json.loads(found.group(1))


def fresh(workflow: Workflow) -> Workflow:
    return Workflow.objects.get(pk=workflow.pk)


# --- the review page ------------------------------------------------------------------------


def test_the_review_page_shows_graph_steps_goal_warnings_and_plan_history(planner_llm, approver):
    plan = digest_plan()
    plan["inputs"]["unused"] = {"type": "string", "default": "x"}
    planner_llm.reply_json(plan)
    version = plan_create(goal=DIGEST_GOAL, owner=approver)

    response = login(approver).get(url("change", version))

    assert response.status_code == 200
    body = response.content.decode()
    data = graph_data(response)
    assert [(n["id"], n["kind"], n["tool"]) for n in data["nodes"]] == [
        ("load", "tool", "csv_read"),
        ("by_region", "tool", "aggregate"),
        ("size", "decision", ""),
        ("report", "tool", "write_report"),
        ("note", "tool", "write_json"),
    ]
    assert {(e["from"], e["to"], e["when"], e["inferred"]) for e in data["edges"]} == {
        ("load", "by_region", "", True),
        ("by_region", "size", "", True),
        ("by_region", "report", "", True),
        ("by_region", "note", "", True),
        ("size", "report", "large", False),
        ("size", "note", "small", False),
    }
    # Each edge's tooltip: the type each mapped reference carries and where it goes.
    types = {(e["from"], e["to"], e["when"]): e["types"] for e in data["edges"]}
    assert types[("load", "by_region", "")] == [
        "load.rows: array<object> → by_region.rows: array<object>"
    ]
    assert types[("by_region", "report", "")] == [
        "by_region.groups: array<object> → report.sections[0].rows: array<object>"
    ]
    assert types[("by_region", "size", "")] == ["by_region.total: number → size.total"]
    assert types[("size", "report", "large")] == []  # a branch edge maps nothing
    assert 'src="/static/workflows/vendor/dagre-3.1.3/dagre.min.js"' in body
    assert 'src="/static/workflows/graph.js"' in body
    assert DIGEST_GOAL in body
    steps = re.findall(r'<tr data-step-id="([a-z_]+)">', body)
    assert steps == ["load", "by_region", "size", "report", "note"]
    assert html.escape('"path": "$input.csv_path"') in body  # the mapping is shown
    assert "unused_input" in body
    assert "<td>warning</td>" in body
    assert 'id="fp-plan-history"' in body
    assert "fake-planner" in body
    assert "0 of 5 revision rounds used" in body
    # the approve form, prefilled with the declared defaults
    assert 'name="input__csv_path" value="data/sales.csv"' in body
    assert 'name="input__threshold" value="1000"' in body
    assert 'id="fp-reject-form"' in body


def test_the_changelist_links_to_new_plan(reviewer):
    response = login(reviewer).get(reverse("admin:workflows_workflow_changelist"))

    assert f'href="{url("plan")}"' in response.content.decode()


def test_hostile_names_descriptions_and_labels_are_escaped(approver):
    version = pending_version(hostile_data())

    response = login(approver).get(url("change", version))

    body = response.content.decode()
    assert "<script>window.__pwned" not in body
    assert "<img src=x" not in body
    assert "<b>north</b>" not in body
    assert html.escape(HOSTILE_TEXT) in body  # table, goal, description
    assert "&lt;b&gt;north&lt;/b&gt;" in body  # the edges table
    data = graph_data(response)  # json_script escapes <, > and & inside the script
    assert data["nodes"][0]["name"] == HOSTILE_TEXT
    assert {e["when"] for e in data["edges"]} == {"", "<b>north</b>", "\"'south'\""}


# --- approve -------------------------------------------------------------------------------


def test_approve_with_sample_inputs_makes_the_version_active(approver, output_dir):
    version = pending_version()

    response = login(approver).post(
        url("approve", version),
        {"input__csv_path": "data/sales.csv", "input__top": "2", "input__report_path": ""},
    )

    assert response.status_code == 302
    assert response["Location"] == url("change", version)
    approval = Approval.objects.get()
    run = approval.validation_run
    assert texts(response) == [
        f"Approved sales_report v1: validation run {run.pk} succeeded; the version is active."
    ]
    assert run.inputs["top"] == 2  # typed from the text field
    assert run.inputs["report_path"] == "sales_report.html"  # blank: the default
    version = fresh(version)
    assert (version.status, version.approved_by) == ("active", approver)
    page = login(approver).get(url("change", version)).content.decode()
    assert 'id="fp-approve-form"' not in page
    assert 'id="fp-run-form"' in page
    assert "Validation run succeeded" in page


def test_a_failed_validation_run_keeps_the_version_in_review_and_shows_why(approver, output_dir):
    version = pending_version()
    client = login(approver)

    response = client.post(url("approve", version), {"input__csv_path": "data/missing.csv"})

    run = Run.objects.get()
    assert texts(response)[0].startswith(f"Validation run {run.pk} failed: step `load` failed")
    assert fresh(version).status == "pending_review"
    page = client.get(url("change", version)).content.decode()
    assert 'class="fp-approval fp-approval-failed"' in page
    assert html.escape(run.error_summary) in page
    # the form offers the inputs of the failed attempt again
    assert 'name="input__csv_path" value="data/missing.csv"' in page


def test_approve_with_mistyped_inputs_comes_back_with_the_text_kept(approver):
    version = pending_version()

    response = login(approver).post(url("approve", version), {"input__top": "lots"})

    assert response.status_code == 200
    body = response.content.decode()
    assert "input `top` must be integer, got &quot;lots&quot;" in body
    assert 'name="input__top" value="lots"' in body
    assert not Approval.objects.exists()
    assert fresh(version).status == "pending_review"


def test_a_user_without_the_permission_sees_a_refusal_instead_of_the_approve_form(reviewer):
    version = pending_version()
    client = login(reviewer)

    page = client.get(url("change", version)).content.decode()
    assert 'id="fp-approve-form"' not in page
    assert 'id="fp-approve-refused"' in page
    assert "workflows.approve_workflow" in page

    response = client.get(url("approve", version))
    assert response.status_code == 302
    assert "needs the `workflows.approve_workflow` permission" in texts(response)[0]


def test_a_forged_approve_post_is_refused_on_the_server(reviewer):
    version = pending_version()

    response = login(reviewer).post(url("approve", version), {"input__top": "2"})

    assert response.status_code == 302
    assert texts(response) == [
        "Not approved: reviewer may not approve sales_report v1 (needs the "
        "`workflows.approve_workflow` permission)"
    ]
    assert fresh(version).status == "pending_review"
    assert not Approval.objects.exists()
    assert not Run.objects.exists()


def test_approve_without_the_csrf_token_is_forbidden(approver):
    version = pending_version()
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)

    response = client.post(url("approve", version), {})

    assert response.status_code == 403
    assert fresh(version).status == "pending_review"


def test_approving_an_active_version_is_refused(approver):
    active, _ = workflow_import(data=sales_report_data(), status="active")

    response = login(approver).post(url("approve", active), {})

    assert texts(response) == [
        "Not approved: `sales_report v1` is active; only a version pending review can be approved"
    ]
    assert not Approval.objects.exists()


def test_a_type_mismatch_across_an_edge_is_listed_and_typed_on_the_edge(approver):
    data = sales_report_data()
    data["steps"][3]["input_mapping"]["title"] = "load.columns"  # a list where text goes
    version = pending_version(data)

    response = login(approver).get(url("change", version))

    body = response.content.decode()
    assert "edge_type_mismatch" in body
    said = (
        "edge `load.columns` → `report.title`: `load.columns` is array<string>, but tool "
        "`write_report` takes string for `title`"
    )
    assert html.escape(said) in body
    edges = {(e["from"], e["to"]): e["types"] for e in graph_data(response)["edges"]}
    assert "load.columns: array<string> → report.title: string" in edges[("load", "report")]
    assert fresh(version).status == "pending_review"


def test_a_definition_that_does_not_parse_gets_no_edge_types():
    graph = {"nodes": [], "edges": [{"from": "a", "to": "b", "when": "", "inferred": True}]}
    assert graph_with_types(graph, None, ToolRegistry([])) is graph


def test_approve_page_lists_validator_errors(approver):
    data = sales_report_data()
    data["steps"][0]["tool"] = "csv_reader"
    version = pending_version(data)

    response = login(approver).post(url("approve", version), {})

    body = response.content.decode()
    assert response.status_code == 200
    assert "steps[0].tool" in body
    assert "unknown_tool" in body
    assert fresh(version).status == "pending_review"


# --- reject --------------------------------------------------------------------------------


def test_reject_with_feedback_shows_the_revised_version(planner_llm, reviewer):
    planner_llm.reply_json(digest_plan())
    version = plan_create(goal=DIGEST_GOAL, owner=reviewer)
    planner_llm.reply_json(digest_plan(with_products=True))
    client = login(reviewer)

    response = client.post(url("reject", version), {"feedback": "List products as well"})

    revised = Workflow.objects.get(name="sales_digest", version=2)
    assert response["Location"] == url("change", revised)
    assert texts(response) == [
        "Rejected sales_digest v1; the planner proposed sales_digest v2, now pending review."
    ]
    assert fresh(version).status == "rejected"
    page = client.get(url("change", revised)).content.decode()
    assert "1 of 5 revision rounds used" in page
    assert "List products as well" in page  # the plan history shows the feedback
    assert '<tr data-step-id="by_product">' in page


def test_reject_needs_feedback_and_calls_nobody_without_it(planner_llm, reviewer):
    version = pending_version()

    response = login(reviewer).post(url("reject", version), {"feedback": ""})

    assert response.status_code == 200
    assert "This field is required." in response.content.decode()
    assert planner_llm.requests == []
    assert fresh(version).status == "pending_review"


def test_reject_at_the_round_limit_says_so(planner_llm, reviewer):
    planner_llm.reply_json(digest_plan())
    version = plan_create(goal=DIGEST_GOAL, owner=reviewer)
    PlanAttempt.objects.create(
        goal=DIGEST_GOAL, workflow=version, revision=6, status="valid", model="fake-planner"
    )
    client = login(reviewer)

    response = client.post(url("reject", version), {"feedback": "Try again"})

    body = response.content.decode()
    assert response.status_code == 200
    assert "Revision limit reached" in body
    assert "5 revision rounds" in body
    assert "Try again</textarea>" in body  # the feedback is kept
    assert fresh(version).status == "pending_review"
    page = client.get(url("change", version)).content.decode()
    assert "5 of 5 revision rounds used — the limit is reached" in page


def test_a_planner_failure_on_reject_keeps_the_feedback(planner_llm, reviewer):
    version = pending_version()
    planner_llm.fail(500, message="upstream down")

    response = login(reviewer).post(url("reject", version), {"feedback": "Shorter, please"})

    body = response.content.decode()
    assert "Not revised: the planner&#x27;s LLM call failed" in body
    assert "Shorter, please</textarea>" in body
    assert fresh(version).status == "pending_review"


# --- edit as JSON --------------------------------------------------------------------------


def test_edit_page_is_prefilled_with_the_definition(reviewer):
    version = pending_version()

    response = login(reviewer).get(url("edit", version))

    assert response.status_code == 200
    body = response.content.decode()
    found = re.search(r'name="definition"[^>]*>\n?(.*?)</textarea>', body, re.S)
    assert json.loads(html.unescape(found.group(1))) == workflow_export(workflow=version)


def test_invalid_json_is_reported_and_the_text_is_kept(reviewer):
    version = pending_version()
    typed = '{"name": "sales_report", "steps": [\n  {"id": "load"},,\n]}'

    response = login(reviewer).post(url("edit", version), {"definition": typed})

    body = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was saved: 1 problem to fix." in body
    assert "not valid JSON: Expecting value (line 2, column 18)" in body
    assert f">\n{html.escape(typed)}</textarea>" in body
    assert Workflow.objects.count() == 1


def test_every_validation_issue_is_listed_with_its_path_and_escaped(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["steps"][0]["id"] = "<script>alert(1)</script>"
    data["steps"][3]["tool"] = "write_pdf"

    response = login(reviewer).post(url("edit", version), {"definition": json.dumps(data)})

    body = response.content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "steps[0].id" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body  # in the kept text (and message)
    assert Workflow.objects.count() == 1


def test_a_valid_edit_saves_a_new_version_pending_review(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["description"] = "Now with a better description."

    response = login(reviewer).post(url("edit", version), {"definition": json.dumps(data)})

    created = Workflow.objects.get(version=2)
    assert response["Location"] == url("change", created)
    assert texts(response) == ["Saved as sales_report v2, pending review."]
    assert created.status == "pending_review"
    assert fresh(version).status == "rejected"


def test_an_unchanged_edit_says_nothing_changed(reviewer):
    version = pending_version()
    text = json.dumps(workflow_export(workflow=version))

    response = login(reviewer).post(url("edit", version), {"definition": text})

    assert "nothing changed: the definition is identical to sales_report v1" in (
        response.content.decode()
    )
    assert Workflow.objects.count() == 1


# --- run, archive, submit ------------------------------------------------------------------


def test_run_an_active_version(reviewer, output_dir):
    active, _ = workflow_import(data=sales_report_data(), status="active")

    response = login(reviewer).post(url("run", active), {"input__top": "1"})

    run = Run.objects.get()
    assert response["Location"] == reverse("admin:runs_run_change", args=[run.pk])
    assert (run.trigger, run.status, run.workflow_id) == ("manual", "succeeded", active.pk)
    assert run.inputs["top"] == 1
    assert texts(response) == [f"Run {run.pk} succeeded."]


def test_a_pending_version_does_not_run(reviewer):
    version = pending_version()

    response = login(reviewer).post(url("run", version), {})

    assert texts(response) == [
        "Not run: sales_report v1 is pending_review; only an active (approved) version runs."
    ]
    assert not Run.objects.exists()


def test_archive_and_its_refusals(reviewer):
    version = pending_version()
    client = login(reviewer)

    assert client.get(url("archive", version)).status_code == 405
    response = client.post(url("archive", version))
    assert texts(response) == ["Archived sales_report v1."]
    assert fresh(version).status == "archived"

    response = client.post(url("archive", version))
    assert "it cannot become archived" in texts(response)[0]


def test_submit_a_draft_for_review(reviewer):
    draft, _ = workflow_import(data=sales_report_data())

    response = login(reviewer).post(url("submit", draft))

    assert texts(response) == ["Submitted for review: sales_report v1."]
    assert fresh(draft).status == "pending_review"


def test_actions_need_the_change_permission(db):
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.remove(*viewer.user_permissions.exclude(codename="view_workflow"))
    version = pending_version()
    client = login(viewer)

    page = client.get(url("change", version)).content.decode()
    assert 'id="fp-reject-form"' not in page
    assert 'id="fp-edit-json"' not in page
    assert client.post(url("archive", version)).status_code == 403
    response = client.post(url("reject", version), {"feedback": "no"})
    assert "may not reject" in response.content.decode()
    assert fresh(version).status == "pending_review"


# --- new plan ------------------------------------------------------------------------------


def test_new_plan_stores_the_plan_and_opens_it(planner_llm, reviewer):
    planner_llm.reply_json(digest_plan())

    response = login(reviewer).post(
        url("plan"), {"goal": DIGEST_GOAL, "sample_inputs": '{"threshold": 500}'}
    )

    workflow = Workflow.objects.get()
    assert response["Location"] == url("change", workflow)
    assert texts(response) == ["The planner proposed sales_digest v1; review it below."]
    assert (workflow.status, workflow.owner) == ("pending_review", reviewer)
    assert workflow.goal == DIGEST_GOAL
    assert 'Sample inputs (what a first run will use): {"threshold": 500}' in str(
        planner_llm.requests[0].messages
    )


def test_new_plan_keeps_what_was_typed_when_the_planner_fails(planner_llm, reviewer):
    planner_llm.fail(500, message="upstream down")

    response = login(reviewer).post(url("plan"), {"goal": DIGEST_GOAL, "sample_inputs": ""})

    body = response.content.decode()
    assert "No plan: the planner&#x27;s LLM call failed" in body
    assert f">\n{DIGEST_GOAL}</textarea>" in body
    assert not Workflow.objects.exists()


TYPED_TOKEN = "sk-" + "ant-api03-QwErTyUiOpAsDfGhJkLz0987654321"


def test_a_credential_typed_into_a_form_is_never_shown_back_or_stored(planner_llm, reviewer):
    """Each page that shows a form again after a refusal or a failure shows its free
    text masked, as it is stored: new plan, reject, approve."""
    version = pending_version()
    planner_llm.fail(500, message="upstream down")
    client = login(reviewer)

    planned = client.post(
        url("plan"), {"goal": f"{DIGEST_GOAL} {TYPED_TOKEN}", "sample_inputs": ""}
    ).content.decode()
    rejected = client.post(
        url("reject", version), {"feedback": f"use {TYPED_TOKEN}"}
    ).content.decode()
    reviewer.user_permissions.add(Permission.objects.get(codename="approve_workflow"))
    approved = client.post(
        url("approve", version), {"input__csv_path": f"Bearer {TYPED_TOKEN}"}
    ).content.decode()

    assert f">\n{DIGEST_GOAL} ***</textarea>" in planned
    assert ">\nuse ***</textarea>" in rejected
    assert "input `csv_path` holds the value of a secret" in approved
    assert 'name="input__csv_path" value="Bearer ***"' in approved
    for page in (planned, rejected, approved):
        assert TYPED_TOKEN not in page
    assert TYPED_TOKEN not in json.dumps(list(PlanAttempt.objects.values("goal", "feedback")))
    assert not Approval.objects.exists()


def test_new_plan_rejects_sample_inputs_that_are_not_a_json_object(planner_llm, reviewer):
    response = login(reviewer).post(url("plan"), {"goal": DIGEST_GOAL, "sample_inputs": "{oops"})

    body = response.content.decode()
    assert "not valid JSON" in body
    assert "{oops</textarea>" in body
    assert planner_llm.requests == []


def test_new_plan_needs_the_add_permission(db):
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.remove(*viewer.user_permissions.filter(codename="add_workflow"))

    assert login(viewer).get(url("plan")).status_code == 403
