"""The review page's policy and diff parts, through Django's test client (CSRF enforced):
"1 of 2 approvals" and who, refusals as messages, the policy admin, the change table."""

from __future__ import annotations

import copy

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from review.models import ApprovalPolicy
from tests.factories import UserFactory, pending_version, sales_report_data
from tests.review.test_admin import fresh, graph_data, login, texts, url
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_import

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("output_dir")]


def test_the_page_counts_approvals_and_names_who(settings):
    settings.FLOWPILOT_APPROVALS_REQUIRED = 2
    alice = UserFactory(username="alice", approver=True)
    bob = UserFactory(username="bob", approver=True)
    version = pending_version()

    first = login(alice).post(url("approve", version), {"input__top": "2"})
    twice = login(alice).post(url("approve", version), {"input__top": "2"})
    page = login(bob).get(url("change", version)).content.decode()
    listing = login(bob).get(reverse("admin:workflows_workflow_changelist")).content.decode()

    assert texts(first) == [
        "Approval of sales_report v1 recorded: 1 of 2 approvals (alice). "
        "The validation run starts when the approval policy is met."
    ]
    assert texts(twice)[0].startswith("Not approved: alice already approved `sales_report v1`")
    assert "<strong>1 of 2 approvals</strong>" in page
    assert "alice (" in page
    assert "Waiting for more approvals" in page
    assert "1 of 2 approvals (alice)" in listing
    assert fresh(version).status == WorkflowStatus.PENDING_REVIEW

    done = login(bob).post(url("approve", version), {"input__top": "2"})

    assert "the version is active" in texts(done)[0]
    page = login(bob).get(url("change", version)).content.decode()
    assert "<strong>2 of 2 approvals</strong>" in page


def test_the_author_is_refused_with_a_message(settings):
    settings.FLOWPILOT_AUTHOR_MAY_APPROVE = False
    author = UserFactory(username="author", approver=True)
    version = pending_version(owner=author)

    response = login(author).post(url("approve", version), {"input__top": "2"})

    assert "is the author of `sales_report v1`" in texts(response)[0]
    assert fresh(version).status == WorkflowStatus.PENDING_REVIEW


def test_the_policy_is_edited_in_the_admin_by_someone_with_the_permission(settings):
    settings.FLOWPILOT_APPROVALS_REQUIRED = 1
    version = pending_version()
    plain = UserFactory(username="plain", approver=True)
    keeper = UserFactory(username="keeper", approver=True)
    for codename in ("add_approvalpolicy", "change_approvalpolicy", "view_approvalpolicy"):
        keeper.user_permissions.add(Permission.objects.get(codename=codename))

    plain_page = login(plain).get(url("change", version)).content.decode()
    refused = login(plain).post(
        reverse("admin:review_approvalpolicy_add"), {"workflow_name": "sales_report"}
    )
    keeper_page = login(keeper).get(url("change", version)).content.decode()
    added = login(keeper).post(
        reverse("admin:review_approvalpolicy_add"),
        {"workflow_name": "sales_report", "approvals_required": "2", "author_may_approve": ""},
    )

    assert 'id="fp-policy-link"' not in plain_page
    assert refused.status_code == 403
    assert "add/?workflow_name=sales_report" in keeper_page
    assert added.status_code == 302
    policy = ApprovalPolicy.objects.get()
    assert (policy.approvals_required, policy.author_may_approve) == (2, None)
    assert policy.updated_by.username == "keeper"
    page = login(keeper).get(url("change", version)).content.decode()
    assert "<strong>0 of 2 approvals</strong>" in page
    assert "workflow policy" in page
    assert f"/review/approvalpolicy/{policy.pk}/change/" in page
    edit = login(keeper).get(reverse("admin:review_approvalpolicy_change", args=[policy.pk]))
    assert "2 distinct approvers, the author may approve (workflow policy)" in edit.content.decode()


def test_a_revision_is_shown_as_a_diff_against_the_version_it_replaces(reviewer):
    data = sales_report_data()
    active, _ = workflow_import(data=data, status=WorkflowStatus.ACTIVE)
    revised = copy.deepcopy(data)
    revised["steps"][1]["input_mapping"]["top"] = 7
    removed = revised["steps"].pop()
    revision = pending_version(revised)

    response = login(reviewer).get(url("change", revision))
    page = response.content.decode()
    graph = graph_data(response)

    assert f'What changed since <a href="{url("change", active)}">sales_report v1</a>' in page
    changes = {n["id"]: n["change"] for n in graph["nodes"]}
    assert changes[revised["steps"][1]["id"]] == "changed"
    assert changes[removed["id"]] == "removed"
    assert set(changes.values()) == {"changed", "removed", "unchanged"}
    assert any(e["change"] == "removed" for e in graph["edges"])
    assert graph["base_version"] == 1
    assert f'data-step-id="{removed["id"]}" data-change="removed"' in page
    assert "input_mapping.top" in page
    first = login(reviewer).get(url("change", active)).content.decode()
    assert 'id="fp-changes"' not in first  # a first version has nothing to compare with
    assert Workflow.objects.count() == 2


def test_the_policy_add_page_is_prefilled_from_the_review_page_link(admin_user, client):
    client.force_login(admin_user)

    page = client.get(reverse("admin:review_approvalpolicy_add") + "?workflow_name=sales_report")

    html = page.content.decode()
    assert 'value="sales_report"' in html
    assert "—" in html  # nothing in effect before it is saved


def test_a_stored_definition_that_no_longer_parses_shows_no_diff(reviewer):
    data = sales_report_data()
    old, _ = workflow_import(data=data, status=WorkflowStatus.ACTIVE)
    revised = copy.deepcopy(data)
    revised["description"] = "second"
    revision = pending_version(revised)
    Workflow.objects.filter(pk=old.pk).update(definition={"name": "sales_report"})

    page = login(reviewer).get(url("change", revision)).content.decode()

    assert 'id="fp-changes"' not in page
    assert 'id="fp-graph"' in page
