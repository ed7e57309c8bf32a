"""review.links: a run page's links to approvals — a validation run to the approval it
proved, any other run to the passed (else latest) approval of its exact definition."""

from __future__ import annotations

import pytest

from review.links import run_links, span_attributes
from review.models import Approval, ApprovalStatus
from runs.models import RunTrigger
from tests.factories import ApprovalFactory, RunFactory, WorkflowFactory, sales_report_data

pytestmark = pytest.mark.django_db


def test_a_validation_run_links_to_the_approval_it_proved_and_nothing_else():
    approval = ApprovalFactory()
    links = run_links(run=approval.validation_run)
    assert [link.label for link in links] == ["approval"]
    assert links[0].url.endswith(f"/change/#fp-approval-{approval.pk}")
    assert links[0].text.startswith(f"by {approval.approved_by} on ")
    assert links[0].text.endswith("(validation run succeeded)")


def test_a_run_of_the_approved_definition_links_to_the_passed_approval_and_its_run():
    failed = ApprovalFactory(status=ApprovalStatus.FAILED)
    passed = ApprovalFactory(workflow=failed.workflow, validation_run=None)
    ApprovalFactory(workflow=failed.workflow, status=ApprovalStatus.FAILED, validation_run=None)
    run = RunFactory(workflow=failed.workflow, trigger=RunTrigger.API)

    links = run_links(run=run)

    assert [link.label for link in links] == ["approval"]  # the passed one has no run
    assert links[0].url.endswith(f"#fp-approval-{passed.pk}")


def test_without_a_passed_approval_the_latest_is_shown_with_its_validation_run():
    approval = ApprovalFactory(status=ApprovalStatus.FAILED)
    run = RunFactory(workflow=approval.workflow, trigger=RunTrigger.API)

    links = run_links(run=run)

    assert [link.label for link in links] == ["approval", "validation run"]
    assert links[1].text == f"run {approval.validation_run.pk} (succeeded)"


def test_a_run_of_another_definition_has_no_approval_link():
    approval = ApprovalFactory()
    run = RunFactory(workflow=approval.workflow, definition_hash="0" * 64)
    assert run_links(run=run) == []
    approval.approved_by.delete()
    approval.refresh_from_db()
    assert "(deleted user)" in run_links(run=approval.validation_run)[0].text


def test_an_approval_covers_only_the_runs_made_after_it():
    from datetime import timedelta

    from review.models import Approval

    approval = ApprovalFactory(validation_run=None)
    before = RunFactory(workflow=approval.workflow, trigger=RunTrigger.API)
    Approval.objects.filter(pk=approval.pk).update(
        created_at=before.created_at + timedelta(seconds=5)
    )
    after = RunFactory(workflow=approval.workflow, trigger=RunTrigger.API)
    from runs.models import Run

    Run.objects.filter(pk=after.pk).update(created_at=before.created_at + timedelta(seconds=9))
    after.refresh_from_db()

    assert run_links(run=before) == []  # it ran before anyone approved it
    assert [link.label for link in run_links(run=after)] == ["approval"]


def test_an_import_activation_says_no_validation_run_happened():
    from review.models import ApprovalKind

    approval = ApprovalFactory(kind=ApprovalKind.IMPORT_SUPERUSER, validation_run=None)
    run = RunFactory(workflow=approval.workflow, trigger=RunTrigger.CLI)

    (link,) = run_links(run=run)
    assert link.text.endswith("(activated by import, no validation run)")
    assert "validation run succeeded" not in link.text


def test_the_root_span_names_the_approval_the_run_ran_under(settings):
    """``span_attributes`` is the finish hook's provider of the root span's approval id:
    the approval a validation run proved, the passed approval of any other run's
    definition, none for a run of a definition nobody approved; the finish code keeps
    only whole numbers from any provider."""
    from runs.engine.finish import _span_extras

    failed = ApprovalFactory(status=ApprovalStatus.FAILED)
    passed = ApprovalFactory(workflow=failed.workflow, validation_run=None)
    run = RunFactory(workflow=failed.workflow, trigger=RunTrigger.API)

    assert span_attributes(run=failed.validation_run) == {"flowpilot.approval_id": failed.pk}
    assert span_attributes(run=run) == {"flowpilot.approval_id": passed.pk}
    refused = WorkflowFactory(data={**sales_report_data(), "name": "refused"}, status="active")
    ApprovalFactory(workflow=refused, status=ApprovalStatus.FAILED)
    run_of_refused = RunFactory(workflow=refused, trigger=RunTrigger.API)
    assert span_attributes(run=run_of_refused) == {}  # the page links it, with its status
    other = WorkflowFactory(data={**sales_report_data(), "name": "not_approved"})
    assert span_attributes(run=RunFactory(workflow=other)) == {}

    assert settings.FLOWPILOT_RUN_SPAN_PROVIDERS == ["review.links.span_attributes"]
    assert _span_extras(run) == {"flowpilot.approval_id": passed.pk}
    settings.FLOWPILOT_RUN_SPAN_PROVIDERS = [
        f"{__name__}.failing_provider",
        f"{__name__}.wordy_provider",
        "review.links.span_attributes",
    ]
    assert _span_extras(run) == {"n": 3, "flowpilot.approval_id": passed.pk}


def failing_provider(*, run):
    list(Approval.objects.raw("SELECT * FROM no_such_table"))  # a failed query
    raise AssertionError("not reached")


def wordy_provider(*, run):
    return {"n": 3, "text": "not an id", "flag": True, "huge": 2**70, 4: 4}
