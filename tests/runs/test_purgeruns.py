"""purgeruns: finished runs past retention go; running, recent, kept-forever and validation
runs stay."""

from datetime import timedelta

import pytest
from django.core.management import call_command

from runs.models import Run, RunStatus, RunTrigger
from tests.factories import ApprovalFactory, RunFactory, WorkflowFactory, sales_report_data

pytestmark = pytest.mark.django_db


def _flow(name, **extra):
    return WorkflowFactory(data=sales_report_data(name=name, **extra))


def _run(workflow, *, status, age_days, trigger=RunTrigger.CLI):
    age = timedelta(days=age_days)
    return RunFactory(workflow=workflow, status=status, age=age, trigger=trigger)


def test_purge_respects_default_and_per_workflow_retention(capsys):
    default = _flow("default_kept")
    short = _flow("short_lived", retention_days=2)
    forever = _flow("kept_forever", retention_days=0)
    old_default = _run(default, status=RunStatus.SUCCEEDED, age_days=40)
    young_default = _run(default, status=RunStatus.FAILED, age_days=5)
    old_short = _run(short, status=RunStatus.FAILED, age_days=3)
    running_short = _run(short, status=RunStatus.RUNNING, age_days=10)
    old_forever = _run(forever, status=RunStatus.SUCCEEDED, age_days=4000)
    approved = _run(short, status=RunStatus.FAILED, age_days=30, trigger=RunTrigger.VALIDATION)
    ApprovalFactory(workflow=short, validation_run=approved)

    call_command("purgeruns", "--days", "30", "--dry-run")
    assert "would delete 2 run(s) in all" in capsys.readouterr().out
    assert Run.objects.count() == 6

    call_command("purgeruns", "--days", "30")
    out = capsys.readouterr().out
    assert "deleted 1 run(s) of default_kept" in out
    assert "deleted 1 run(s) of short_lived" in out
    remaining = set(Run.objects.values_list("pk", flat=True))
    assert remaining == {young_default.pk, running_short.pk, old_forever.pk, approved.pk}
    assert not Run.objects.filter(pk__in=[old_default.pk, old_short.pk]).exists()
    assert approved.review_approval.validation_run_id == approved.pk  # the approval keeps its run


def test_the_child_runs_under_a_validation_run_stay_with_it(capsys):
    short = _flow("short_kids", retention_days=2)
    kid = _flow("kid_flow", retention_days=2)
    validation = _run(short, status=RunStatus.SUCCEEDED, age_days=30, trigger=RunTrigger.VALIDATION)
    child = RunFactory(
        workflow=kid, status=RunStatus.SUCCEEDED, age=timedelta(days=30),
        trigger=RunTrigger.WORKFLOW, parent_run=validation,
    )  # fmt: skip
    grandchild = RunFactory(
        workflow=kid, status=RunStatus.SUCCEEDED, age=timedelta(days=30),
        trigger=RunTrigger.WORKFLOW, parent_run=child,
    )  # fmt: skip
    ordinary = _run(short, status=RunStatus.SUCCEEDED, age_days=30)
    ordinary_child = RunFactory(
        workflow=kid, status=RunStatus.SUCCEEDED, age=timedelta(days=30),
        trigger=RunTrigger.WORKFLOW, parent_run=ordinary,
    )  # fmt: skip

    call_command("purgeruns", "--days", "30")

    remaining = set(Run.objects.values_list("pk", flat=True))
    assert remaining == {validation.pk, child.pk, grandchild.pk}  # what a replay answers from
    assert not Run.objects.filter(pk__in=[ordinary.pk, ordinary_child.pk]).exists()
