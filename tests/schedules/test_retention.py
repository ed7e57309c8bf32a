"""The daily retention task: purges in batches, records each pass, is on beat's schedule."""

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from runs.models import Run, RunStatus
from schedules.models import RetentionSweep
from schedules.retention import retention_sweep
from schedules.tasks import retention
from tests.factories import RunFactory, StepResultFactory, WorkflowFactory, sales_report_data

pytestmark = pytest.mark.django_db


def test_the_sweep_purges_old_runs_in_batches_and_records_the_pass(settings):
    settings.FLOWPILOT_RETENTION_BATCH = 2
    settings.FLOWPILOT_RUN_RETENTION_DAYS = 30
    flow = WorkflowFactory(data=sales_report_data(name="ledger"))
    old = [RunFactory(workflow=flow, age=timedelta(days=40)) for _ in range(5)]
    for run in old:
        StepResultFactory(run=run, step_id="read")
    kept = RunFactory(workflow=flow, age=timedelta(days=1))
    running = RunFactory(workflow=flow, status=RunStatus.RUNNING)

    sweep = retention_sweep(now=timezone.now())

    assert (sweep.removed, sweep.total, sweep.batches) == ({"ledger": 5}, 5, 3)
    assert sweep.finished_at >= sweep.started_at
    assert set(Run.objects.values_list("pk", flat=True)) == {kept.pk, running.pk}


def test_the_task_returns_its_result_and_a_failed_pass_is_recorded(monkeypatch):
    assert retention() == {"removed": {}, "total": 0}

    def boom(**_):
        raise RuntimeError("database on fire")

    monkeypatch.setattr("schedules.retention.run_purge", boom)
    with pytest.raises(RuntimeError):
        retention_sweep(now=timezone.now())
    failed = RetentionSweep.objects.order_by("-id").first()
    assert failed.error == "RuntimeError: database on fire"


def test_retention_is_on_beats_schedule_daily():
    entry = django_settings.CELERY_BEAT_SCHEDULE["flowpilot-retention"]
    assert entry["task"] == "schedules.retention_sweep"
    assert entry["schedule"].hour == {django_settings.FLOWPILOT_RETENTION_HOUR}
    assert entry["schedule"].minute == {0}
