"""purgeruns: finished runs past retention go; running, recent, kept-forever and validation
runs stay."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from review.models import Approval
from runs.models import Run, RunStatus, RunTrigger
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db


def _flow(name, **extra):
    data = {
        "name": name,
        "steps": [{"id": "load", "kind": "tool", "tool": "csv_read",
                   "input_mapping": {"path": "data/sales.csv"}}],
        **extra,
    }  # fmt: skip
    workflow, _ = workflow_import(data=data)
    return workflow


def _run(workflow, *, status, age_days, trigger=RunTrigger.CLI):
    finished = timezone.now() - timedelta(days=age_days)
    return Run.objects.create(
        workflow=workflow, definition_hash=workflow.definition_hash, trigger=trigger,
        status=status, finished_at=finished if status != RunStatus.RUNNING else None,
    )


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
    Approval.objects.create(workflow=short, definition_hash="x", validation_run=approved)

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
