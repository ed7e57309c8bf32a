"""workflows.revisions: reject (the planner revises) and edit as JSON (a new version).

The planner talks to the loopback OpenAI-compatible server.
"""

from __future__ import annotations

import json

import pytest

from tests.factories import (
    DIGEST_GOAL,
    UserFactory,
    digest_plan,
    pending_version,
    sales_report_data,
)
from workflows.models import PlanAttempt, Workflow
from workflows.planner import PlanRoundsExhausted
from workflows.planner.services import plan_create
from workflows.revisions import (
    ApprovalForbidden,
    ApprovalStateError,
    DefinitionInvalid,
    DefinitionUnchanged,
    FeedbackRequired,
    _parse_json,
    workflow_edit_json,
    workflow_reject,
)
from workflows.services import workflow_export, workflow_import

pytestmark = pytest.mark.django_db


def fresh(workflow: Workflow) -> Workflow:
    return Workflow.objects.get(pk=workflow.pk)


# --- workflow_edit_json --------------------------------------------------------------------


def as_text(data) -> str:
    return json.dumps(data, indent=2)


def test_edit_stores_a_new_pending_version_and_supersedes_the_pending_one(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["description"] = "Edited by hand."

    created = workflow_edit_json(version=version, definition=as_text(data), user=reviewer)

    assert (created.name, created.version, created.status) == ("sales_report", 2, "pending_review")
    assert created.description == "Edited by hand."
    assert fresh(version).status == "rejected"
    assert fresh(version).definition == workflow_export(workflow=version)  # never changed


def test_editing_an_active_version_leaves_it_active(reviewer):
    active, _ = workflow_import(data=sales_report_data(), status="active")
    data = workflow_export(workflow=active)
    data["steps"][2]["input_mapping"]["top"] = 3

    created = workflow_edit_json(version=active, definition=as_text(data), user=reviewer)

    assert (created.version, created.status) == (2, "pending_review")
    assert fresh(active).status == "active"
    assert fresh(active).definition_hash == active.definition_hash


def test_edit_with_invalid_json_says_where_and_saves_nothing(reviewer):
    version = pending_version()

    with pytest.raises(DefinitionInvalid) as caught:
        workflow_edit_json(version=version, definition='{"name": "sales_report",,}', user=reviewer)

    [issue] = caught.value.issues
    assert issue.code == "json_invalid"
    assert "line 1, column 25" in issue.message
    assert Workflow.objects.count() == 1
    assert fresh(version).status == "pending_review"


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "the definition is empty"), ("[1, 2]", "must be a JSON object, not list")],
)
def test_edit_refuses_empty_text_and_non_objects(reviewer, text, message):
    with pytest.raises(DefinitionInvalid, match=message):
        workflow_edit_json(version=pending_version(), definition=text, user=reviewer)


def test_edit_lists_every_validation_issue_with_its_path(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["steps"][1]["input_mapping"]["rows"] = "loader.rows"  # unknown step → literal
    data["steps"][3]["tool"] = "write_pdf"  # unknown tool
    data["outputs"]["rows_read"] = "$input.nope"  # unknown input

    with pytest.raises(DefinitionInvalid) as caught:
        workflow_edit_json(version=version, definition=as_text(data), user=reviewer)

    found = {(i.code, i.path) for i in caught.value.issues}
    assert ("unknown_tool", "steps[3].tool") in found
    assert ("unknown_input", "outputs.rows_read") in found
    assert ("param_type_mismatch", "steps[1].input_mapping.rows") in found
    assert Workflow.objects.count() == 1


def test_edit_reports_schema_errors_at_their_paths(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["steps"][0]["id"] = "<script>alert(1)</script>"
    del data["steps"][1]["tool"]

    with pytest.raises(DefinitionInvalid) as caught:
        workflow_edit_json(version=version, definition=as_text(data), user=reviewer)

    paths = {i.path for i in caught.value.issues}
    assert {"steps[0].id", "steps[1].tool"} <= paths
    assert Workflow.objects.count() == 1


def test_edit_keeps_the_name(reviewer):
    version = pending_version()
    data = workflow_export(workflow=version)
    data["name"] = "sales_report_two"

    with pytest.raises(DefinitionInvalid) as caught:
        workflow_edit_json(version=version, definition=as_text(data), user=reviewer)

    assert [(i.code, i.path) for i in caught.value.issues] == [("name_changed", "name")]


def test_an_unchanged_edit_is_refused(reviewer):
    version = pending_version()

    with pytest.raises(DefinitionUnchanged, match="identical to sales_report v1"):
        workflow_edit_json(
            version=version, definition=as_text(workflow_export(workflow=version)), user=reviewer
        )

    assert fresh(version).status == "pending_review"


def test_edit_needs_the_change_permission(db):
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.clear()
    version = pending_version()

    with pytest.raises(ApprovalForbidden, match=r"workflows\.change_workflow"):
        workflow_edit_json(
            version=version, definition=as_text(workflow_export(workflow=version)), user=viewer
        )


# --- workflow_reject -----------------------------------------------------------------------


def test_reject_asks_the_planner_for_a_revision(planner_llm, reviewer):
    planner_llm.reply_json(digest_plan())
    version = plan_create(goal=DIGEST_GOAL, owner=reviewer)
    planner_llm.reply_json(digest_plan(with_products=True))

    revised = workflow_reject(version=version, rejected_by=reviewer, feedback="Add products too")

    assert (revised.name, revised.version, revised.status) == ("sales_digest", 2, "pending_review")
    assert "by_product" in {s.step_id for s in revised.steps.all()}
    assert fresh(version).status == "rejected"
    attempt = PlanAttempt.objects.get(workflow=revised)
    assert (attempt.revision, attempt.based_on) == (2, version)
    assert attempt.feedback == "Add products too"
    assert "Add products too" in planner_llm.requests[-1].text


def test_reject_needs_feedback(planner_llm, reviewer):
    version = pending_version()

    with pytest.raises(FeedbackRequired):
        workflow_reject(version=version, rejected_by=reviewer, feedback="   ")

    assert planner_llm.requests == []
    assert fresh(version).status == "pending_review"


def test_reject_refuses_a_version_not_in_review(planner_llm, reviewer):
    active, _ = workflow_import(data=sales_report_data(), status="active")

    with pytest.raises(ApprovalStateError, match="is active"):
        workflow_reject(version=active, rejected_by=reviewer, feedback="change it")

    assert planner_llm.requests == []


def test_reject_needs_the_change_permission(planner_llm, db):
    viewer = UserFactory(username="viewer")
    viewer.user_permissions.clear()

    with pytest.raises(ApprovalForbidden):
        workflow_reject(version=pending_version(), rejected_by=viewer, feedback="change it")


def test_reject_after_five_revisions_says_so(planner_llm, reviewer):
    planner_llm.reply_json(digest_plan())
    version = plan_create(goal=DIGEST_GOAL, owner=reviewer)
    for round_ in range(5):
        plan = digest_plan(with_products=True)
        plan["description"] = f"revision {round_ + 1}"
        planner_llm.reply_json(plan)
        version = workflow_reject(version=version, rejected_by=reviewer, feedback=f"r{round_}")

    with pytest.raises(PlanRoundsExhausted, match="5 revision rounds"):
        workflow_reject(version=version, rejected_by=reviewer, feedback="once more")

    assert version.version == 6
    assert fresh(version).status == "pending_review"


# --- edit as JSON: parsing what the reviewer typed -----------------------------------------


DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_edited_definition_is_invalid_not_a_crash():
    with pytest.raises(DefinitionInvalid) as caught:
        _parse_json('{"name": "x", "steps": ' + DEEP + "}")
    assert "nests too deeply" in caught.value.issues[0].message
