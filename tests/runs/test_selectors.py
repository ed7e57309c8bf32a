"""runs.selectors: every version with its run count and newest run, in one query."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run, RunStatus
from runs.selectors import run_latest_by_workflow
from tests.factories import RunFactory, WorkflowFactory, sales_report_data

pytestmark = pytest.mark.django_db


def _rows(**kwargs):
    return [
        (wf.name, wf.version, wf.step_count, wf.run_count, wf.last_run_id, wf.last_run_status)
        for wf in run_latest_by_workflow(**kwargs)
    ]


def test_counts_and_the_newest_run_per_version_in_one_query(django_assert_num_queries):
    sales = WorkflowFactory()
    WorkflowFactory(data=sales_report_data(name="other"))
    archived = WorkflowFactory(data=sales_report_data(name="old"), status="archived")
    RunFactory(workflow=sales, age=timedelta(days=2))
    newest = RunFactory(workflow=sales, status=RunStatus.FAILED, age=timedelta(days=1))
    archived_run = RunFactory(workflow=archived)

    with django_assert_num_queries(1):
        rows = _rows()

    assert rows == [
        ("other", 1, 4, 0, None, None),
        ("sales_report", 1, 4, 2, newest.pk, "failed"),
    ]
    assert ("old", 1, 4, 1, archived_run.pk, "succeeded") in _rows(include_archived=True)


def test_runs_created_at_the_same_moment_are_ordered_by_id():
    sales = WorkflowFactory()
    first, second = RunFactory(workflow=sales), RunFactory(workflow=sales)
    Run.objects.filter(pk__in=[first.pk, second.pk]).update(created_at=timezone.now())

    assert _rows()[0][4] == max(first.pk, second.pk)
