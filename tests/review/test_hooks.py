"""Validation runs go through the run driver: the approval is settled when the run finishes.

With a broker, ``workflow_approve`` only enqueues the validation run; the version stays
``validating`` until the run-finished hook (``review.hooks.run_finished``) settles the
approval. Here the enqueue is held back (what a broker does: the run waits for a
worker), then the run is executed as a worker would; its finish announces itself
through the real hooks, after the commit. Real workers: ``tests/runs/test_celery_operations.py``.
"""

from __future__ import annotations

import pytest

from review.hooks import run_finished
from review.models import Approval
from review.services import validation_settle, workflow_approve
from runs.services import run_create, run_execute
from tests.factories import pending_version
from tests.review.test_admin import login, texts, url
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(workflow: Workflow) -> Workflow:
    return Workflow.objects.get(pk=workflow.pk)


@pytest.fixture
def held(monkeypatch):
    """``run_enqueue`` as with a broker: the run is handed over and not executed here."""
    queued = []

    def enqueue(*, run, **kwargs):
        queued.append(run)
        return run

    monkeypatch.setattr("review.services.run_enqueue", enqueue)
    return queued


def test_the_approval_waits_for_the_run_and_the_hook_settles_it(approver, output_dir, held):
    version = pending_version()

    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})

    assert approval.status == "validating"
    assert fresh(version).status == "validating"
    run = held[0]
    assert validation_settle(run_id=run.pk) is None  # not finished: nothing to settle
    run_execute(run=run)  # a worker runs it; its finish calls the hooks after the commit
    approval.refresh_from_db()
    assert approval.status == "passed"
    assert fresh(version).status == "active"
    assert fresh(version).approved_by == approver
    assert validation_settle(run_id=run.pk) is None  # settled once


def test_a_red_run_on_the_workers_sends_the_version_back_to_review(approver, output_dir, held):
    version = pending_version()
    approval = workflow_approve(
        version=version, approved_by=approver, sample_inputs={"csv_path": "data/missing.csv"}
    )

    run_execute(run=held[0])

    approval.refresh_from_db()
    assert approval.status == "failed"
    assert fresh(version).status == "pending_review"


def test_the_hook_ignores_runs_that_are_not_validation_runs(approver, output_dir, held):
    version = pending_version()
    workflow_approve(version=version, approved_by=approver, sample_inputs={})
    other = run_create(workflow=version, trigger="manual", inputs={})

    run_finished(run_id=other.pk)

    assert Approval.objects.get().status == "validating"


def test_the_admin_says_the_run_is_on_the_workers(approver, output_dir, held):
    version = pending_version()

    response = login(approver).post(url("approve", version), {"input__top": "2"})

    run = Approval.objects.get().validation_run
    assert texts(response) == [
        f"Approved sales_report v1: validation run {run.pk} is running on the workers; "
        "the version becomes active when it succeeds."
    ]
