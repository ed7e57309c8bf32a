"""review.services: approving a version runs a validation run and settles the approval.

The validation runs are real runs of the offline example on the built-in data tools.
"""

from __future__ import annotations

import pytest

from review.models import Approval
from review.services import ApprovalForbidden, ApprovalStateError, workflow_approve
from runs.models import Run
from tests.factories import pending_version, sales_report_data
from workflows.inputs import InputsInvalid
from workflows.models import Workflow
from workflows.services import workflow_import
from workflows.validator import WorkflowInvalid

pytestmark = pytest.mark.django_db


def fresh(workflow: Workflow) -> Workflow:
    return Workflow.objects.get(pk=workflow.pk)


# --- workflow_approve -------------------------------------------------------------------


def test_approve_runs_a_validation_run_and_activates_the_version(approver, output_dir):
    version = pending_version()

    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={"top": 2})

    run = approval.validation_run
    assert (run.trigger, run.status, run.workflow_id) == ("validation", "succeeded", version.pk)
    assert run.definition_hash == version.definition_hash
    assert approval.status == "passed"
    assert approval.approved_by == approver
    assert approval.definition_hash == version.definition_hash
    assert approval.sample_inputs == {
        "csv_path": "data/sales.csv",
        "top": 2,
        "report_path": "sales_report.html",
    }
    assert approval.finished_at is not None
    version = fresh(version)
    assert version.status == "active"
    assert version.approved_by == approver
    assert version.approved_at is not None
    assert (output_dir / "sales_report.html").exists()


def test_a_red_validation_run_sends_the_version_back_to_review_with_the_failure(
    approver, output_dir
):
    version = pending_version()

    approval = workflow_approve(
        version=version, approved_by=approver, sample_inputs={"csv_path": "data/missing.csv"}
    )

    assert approval.status == "failed"
    run = approval.validation_run
    assert run.status == "failed"
    assert "step `load` failed" in run.error_summary
    assert "missing.csv" in run.error_summary
    version = fresh(version)
    assert version.status == "pending_review"
    assert version.approved_by is None
    assert version.approved_at is None


def test_approving_again_after_a_red_run_records_a_second_approval(approver, output_dir):
    version = pending_version()
    workflow_approve(version=version, approved_by=approver, sample_inputs={"csv_path": "x.csv"})

    second = workflow_approve(version=fresh(version), approved_by=approver, sample_inputs={})

    assert second.status == "passed"
    assert list(version.approvals.values_list("status", flat=True)) == ["passed", "failed"]
    assert fresh(version).status == "active"


def test_approve_refuses_a_user_without_the_permission(reviewer):
    version = pending_version()

    with pytest.raises(ApprovalForbidden, match=r"workflows\.approve_workflow"):
        workflow_approve(version=version, approved_by=reviewer, sample_inputs={})

    assert fresh(version).status == "pending_review"
    assert not Approval.objects.exists()
    assert not Run.objects.exists()


def test_approve_refuses_no_user_and_an_inactive_user(approver):
    version = pending_version()
    approver.is_active = False
    approver.save()

    for user in (None, approver):
        with pytest.raises(ApprovalForbidden):
            workflow_approve(version=version, approved_by=user, sample_inputs={})
    assert not Approval.objects.exists()


@pytest.mark.parametrize("status", ["draft", "active", "rejected", "archived", "validating"])
def test_approve_refuses_a_version_that_is_not_pending_review(approver, status):
    version, _ = workflow_import(data=sales_report_data(), status=status)

    with pytest.raises(ApprovalStateError, match=f"is {status}; only a version pending review"):
        workflow_approve(version=version, approved_by=approver, sample_inputs={})

    assert fresh(version).status == status
    assert not Run.objects.exists()


def test_approve_checks_the_sample_inputs_before_anything_changes(approver):
    version = pending_version()

    with pytest.raises(InputsInvalid) as caught:
        workflow_approve(
            version=version, approved_by=approver, sample_inputs={"top": "many", "colour": 1}
        )

    assert caught.value.problems == [
        "unknown input `colour` (declared: csv_path, report_path, top)",
        'input `top` must be integer, got "many"',
    ]
    assert fresh(version).status == "pending_review"
    assert not Approval.objects.exists()
    assert not Run.objects.exists()


def test_approve_refuses_a_version_the_current_registry_cannot_run(approver):
    data = sales_report_data()
    data["steps"][0]["tool"] = "csv_reader"  # not a registered tool
    version = pending_version(data)

    with pytest.raises(WorkflowInvalid) as caught:
        workflow_approve(version=version, approved_by=approver, sample_inputs={})

    assert [i.code for i in caught.value.report.errors][:1] == ["unknown_tool"]
    assert fresh(version).status == "pending_review"
    assert not Approval.objects.exists()


def test_an_engine_crash_during_the_validation_run_fails_the_approval(approver, monkeypatch):
    version = pending_version()

    def crash(*, run, **kwargs):
        raise RuntimeError("worker lost")

    monkeypatch.setattr("review.services.run_enqueue", crash)
    with pytest.raises(RuntimeError, match="worker lost"):
        workflow_approve(version=version, approved_by=approver, sample_inputs={})

    approval = Approval.objects.get()
    assert approval.status == "failed"
    assert fresh(version).status == "pending_review"
    assert approval.validation_run.status == "failed"  # never left pending
    assert approval.validation_run.error_summary == "the validation run could not start"
