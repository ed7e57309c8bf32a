"""The approval policy: distinct approvers, the author rule, hash pinning, per-workflow override.

The validation runs are real runs of the offline example on the built-in data tools.
"""

from __future__ import annotations

import pytest

from review.models import Approval, ApprovalKind, ApprovalPolicy
from review.policy import ApprovalPolicyRefused, approval_policy_for, approval_tally
from review.services import workflow_approve, workflow_reapprove
from tests.conftest import EXAMPLES_DIR
from tests.factories import UserFactory, pending_version
from workflows.files import read_workflow_file
from workflows.inputs import InputsInvalid
from workflows.models import Workflow

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("output_dir")]


def fresh(workflow: Workflow) -> Workflow:
    return Workflow.objects.get(pk=workflow.pk)


@pytest.fixture
def author():
    return UserFactory(username="author", approver=True)


@pytest.fixture
def alice():
    return UserFactory(username="alice", approver=True)


@pytest.fixture
def bob():
    return UserFactory(username="bob", approver=True)


@pytest.fixture
def two_needed(settings):
    settings.FLOWPILOT_APPROVALS_REQUIRED = 2


def test_the_author_alone_is_refused_when_authors_may_not_approve(settings, author):
    settings.FLOWPILOT_AUTHOR_MAY_APPROVE = False
    version = pending_version(owner=author)

    with pytest.raises(ApprovalPolicyRefused, match="author of `sales_report v1`") as caught:
        workflow_approve(version=version, approved_by=author, sample_inputs={})

    assert caught.value.code == "approval_policy_refused"
    assert fresh(version).status == "pending_review"
    assert not Approval.objects.exists()


def test_two_distinct_approvers_activate_the_version(two_needed, alice, bob):
    version = pending_version()

    first = workflow_approve(version=version, approved_by=alice, sample_inputs={"top": 2})

    assert first.status == "pending"
    assert first.validation_run is None
    assert first.definition_hash == version.definition_hash
    assert first.sample_inputs["top"] == 2
    assert fresh(version).status == "pending_review"
    assert approval_tally(version=version).text() == "1 of 2 approvals (alice)"

    second = workflow_approve(version=version, approved_by=bob, sample_inputs={"top": 3})

    assert second.status == "passed"
    assert second.validation_run.status == "succeeded"
    assert second.validation_run.inputs["top"] == 3  # the last approval's inputs drive it
    assert fresh(version).status == "active"
    first.refresh_from_db()
    assert first.status == "passed"
    assert first.finished_at == second.finished_at
    assert approval_tally(version=version).text() == "2 of 2 approvals (alice, bob)"


def test_the_same_person_twice_is_refused(two_needed, alice):
    version = pending_version()
    workflow_approve(version=version, approved_by=alice, sample_inputs={})

    with pytest.raises(ApprovalPolicyRefused, match="alice already approved"):
        workflow_approve(version=version, approved_by=alice, sample_inputs={})

    assert Approval.objects.count() == 1
    assert fresh(version).status == "pending_review"


def test_the_author_counts_as_one_of_two_when_allowed(two_needed, author, alice):
    version = pending_version(owner=author)

    assert workflow_approve(version=version, approved_by=author, sample_inputs={}).status == (
        "pending"
    )
    assert workflow_approve(version=version, approved_by=alice, sample_inputs={}).status == (
        "passed"
    )
    assert fresh(version).status == "active"


def test_a_workflow_policy_overrides_the_settings(two_needed, alice, author):
    ApprovalPolicy.objects.create(workflow_name="sales_report", approvals_required=1)
    version = pending_version(owner=author)

    policy = approval_policy_for(name="sales_report")
    assert (policy.required, policy.author_may_approve, policy.source) == (1, True, "workflow")
    assert approval_policy_for(name="other").source == "settings"
    assert approval_policy_for(name="other").required == 2

    ApprovalPolicy.objects.filter(workflow_name="sales_report").update(author_may_approve=False)
    with pytest.raises(ApprovalPolicyRefused):
        workflow_approve(version=version, approved_by=author, sample_inputs={})
    approval = workflow_approve(version=version, approved_by=alice, sample_inputs={})

    assert approval.status == "passed"
    assert fresh(version).status == "active"


def test_approvals_of_another_hash_or_kind_do_not_count(two_needed, alice, bob):
    version = pending_version()
    Approval.objects.create(
        workflow=version, definition_hash="0" * 64, approved_by=alice, status="pending"
    )
    Approval.objects.create(
        workflow=version,
        definition_hash=version.definition_hash,
        approved_by=bob,
        status="passed",
        kind=ApprovalKind.IMPORT_SUPERUSER,
    )

    assert approval_tally(version=version).count == 0
    approval = workflow_approve(version=version, approved_by=alice, sample_inputs={})

    assert approval.status == "pending"  # alice's old-hash approval neither counts nor blocks
    assert approval_tally(version=version).text() == "1 of 2 approvals (alice)"


def test_a_red_validation_run_keeps_the_earlier_approvals_and_the_last_may_retry(
    two_needed, alice, bob
):
    version = pending_version()
    workflow_approve(version=version, approved_by=alice, sample_inputs={})

    red = workflow_approve(
        version=version, approved_by=bob, sample_inputs={"csv_path": "data/missing.csv"}
    )

    assert red.status == "failed"
    assert fresh(version).status == "pending_review"
    assert approval_tally(version=version).text() == "1 of 2 approvals (alice)"
    green = workflow_approve(version=version, approved_by=bob, sample_inputs={})
    assert green.status == "passed"
    assert fresh(version).status == "active"


def test_an_author_approval_stops_counting_when_the_policy_refuses_authors(
    settings, two_needed, author, alice
):
    version = pending_version(owner=author)
    workflow_approve(version=version, approved_by=author, sample_inputs={})
    settings.FLOWPILOT_AUTHOR_MAY_APPROVE = False

    assert approval_tally(version=version).count == 0
    assert workflow_approve(version=version, approved_by=alice, sample_inputs={}).status == (
        "pending"
    )


def test_a_pending_approval_is_checked_like_the_last(two_needed, alice):
    version = pending_version()

    with pytest.raises(InputsInvalid):
        workflow_approve(version=version, approved_by=alice, sample_inputs={"top": "many"})

    assert not Approval.objects.exists()


def test_reapproval_applies_the_author_rule(settings, author, alice):
    version = pending_version(owner=author)
    workflow_approve(version=version, approved_by=author, sample_inputs={})
    settings.FLOWPILOT_AUTHOR_MAY_APPROVE = False

    with pytest.raises(ApprovalPolicyRefused):
        workflow_reapprove(version=fresh(version), approved_by=author, sample_inputs={})
    again = workflow_reapprove(version=fresh(version), approved_by=alice, sample_inputs={})

    assert again.status == "passed"


def test_a_deleted_approver_no_longer_counts(two_needed, alice, bob):
    version = pending_version()
    workflow_approve(version=version, approved_by=alice, sample_inputs={})
    alice.delete()

    assert approval_tally(version=version).count == 0
    assert workflow_approve(version=version, approved_by=bob, sample_inputs={}).status == (
        "pending"
    )


@pytest.mark.usefixtures("example_tools")
def test_a_pending_approval_never_stores_a_secret_value(two_needed, alice, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-s3cr3t-4f5e6d")
    version = pending_version(read_workflow_file(EXAMPLES_DIR / "github_intel.yaml"))

    with pytest.raises(InputsInvalid, match="input `repo` holds the value of a secret"):
        workflow_approve(
            version=version,
            approved_by=alice,
            sample_inputs={"owner": "octo-org", "repo": "token ghp-s3cr3t-4f5e6d"},
        )

    assert not Approval.objects.exists()
