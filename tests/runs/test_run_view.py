"""The run page and its status JSON through Django's test client: who may read them,
what they show of a failed and a succeeded run, and the runs list's status strips."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from runs.models import RunStatus, StepResult
from tests.factories import (
    PASSWORD,
    ApprovalFactory,
    RunFactory,
    StepResultFactory,
    UserFactory,
)
from tests.runs.samples import SECRET_TOKEN, make_failed_run, make_succeeded_run

pytestmark = pytest.mark.django_db(transaction=True)


def status_url(run) -> str:
    return reverse("admin:runs_run_status", args=[run.pk])


def page_url(run) -> str:
    return reverse("admin:runs_run_change", args=[run.pk])


# --- who may read -------------------------------------------------------------------


def test_the_status_json_and_the_page_refuse_anonymous_and_non_staff_users(client):
    run = RunFactory()
    for url in (status_url(run), page_url(run)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")

    get_user_model().objects.create_user("visitor", password=PASSWORD, is_staff=False)
    client.login(username="visitor", password=PASSWORD)
    for url in (status_url(run), page_url(run)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_staff_without_the_view_permission_get_403(client):
    run = RunFactory()
    user = get_user_model().objects.create_user("clerk", password=PASSWORD, is_staff=True)
    client.force_login(user)
    assert client.get(status_url(run)).status_code == 403
    assert client.get(page_url(run)).status_code == 403


def test_a_missing_run_is_404(admin_client):
    assert admin_client.get("/admin/runs/run/999999/status.json").status_code == 404


def test_a_reviewer_reads_the_status_json(client):
    run = RunFactory(status=RunStatus.RUNNING)
    StepResultFactory(run=run, step_id="load", status="succeeded", attempts=2)
    client.force_login(UserFactory())

    data = client.get(status_url(run)).json()

    assert data["id"] == run.pk
    assert data["status"] == "running"
    assert data["terminal"] is False
    assert data["steps"] == [
        {"step_id": "load", "status": "succeeded", "attempts": 2, "duration_ms": None}
    ]


# --- what the page shows --------------------------------------------------------------


def test_the_page_of_a_failed_run(admin_client, fake_api, monkeypatch, example_tools):
    run = make_failed_run(fake_api, monkeypatch)

    html = admin_client.get(page_url(run)).content.decode()

    assert 'id="fp-run-status" data-status="failed"' in html
    assert 'data-terminal="true"' in html
    assert "fp-live" not in html  # nothing to follow
    assert '"status": "failed"' in html  # the graph data carries each node's status
    assert html.count('data-kind="attempt"') == 4  # repo twice, issues, langs
    assert html.count('data-kind="wait"') == 1
    assert "before try 2 (backoff)" in html  # the wait says why it was that long
    assert "never ran" in html  # `summary`, still pending in a finished run
    assert "step `langs` (tool `github_languages`), try 1: http_error (HTTP 404" in html
    assert html.count('<details class="fp-full fp-full-output">') == 2  # collapsed
    assert "show full output (" in html
    assert SECRET_TOKEN not in html
    assert 'data-label="version"' in html
    assert 'data-label="approval"' not in html


def test_the_page_of_a_succeeded_run_links_its_approval_and_validation_run(admin_client):
    approval = ApprovalFactory()
    run = RunFactory(workflow=approval.workflow, trigger="schedule")
    StepResultFactory(run=run, step_id="load", output=[{"a": 1}] * 40)

    html = admin_client.get(page_url(run)).content.decode()

    assert 'data-label="approval"' in html
    assert f"#fp-approval-{approval.pk}" in html
    assert page_url(approval.validation_run) in html
    assert f"run {approval.validation_run.pk} (succeeded)" in html
    assert "list of 40 objects (a)" in html

    proving = admin_client.get(page_url(approval.validation_run)).content.decode()
    assert f"#fp-approval-{approval.pk}" in proving
    assert 'data-label="validation run"' not in proving  # it is the validation run


def test_a_failed_approval_is_linked_when_none_passed(admin_client):
    approval = ApprovalFactory(status="failed", validation_run=None)
    run = RunFactory(workflow=approval.workflow)

    html = admin_client.get(page_url(run)).content.decode()

    assert f"#fp-approval-{approval.pk}" in html
    assert "validation run failed" in html
    assert 'data-label="validation run"' not in html


def test_truncated_outputs_are_flagged_with_their_size(admin_client):
    run = RunFactory()
    preview = {"_truncated": True, "_stored_limit_bytes": 1024, "preview": '{"rows": ['}
    StepResultFactory(run=run, step_id="big", output=preview, output_truncated=True)
    StepResultFactory(run=run, step_id="cut", output={"body": "x"}, output_truncated=True)

    html = admin_client.get(page_url(run)).content.decode()

    assert "over the 1.0 KB storage limit: a preview is stored" in html
    assert "truncated: stored truncated" in html
    assert "truncated: the response body was cut at the size limit" in html


def test_a_running_run_is_followed_live(admin_client):
    run = RunFactory(status=RunStatus.RUNNING, started_at=timezone.now() - timedelta(seconds=2))
    StepResult.objects.create(
        run=run,
        step_id="slow",
        status="running",
        attempts=1,
        started_at=timezone.now() - timedelta(seconds=1),
        attempt_log=[
            {"attempt": 1, "started_at": "not a time", "duration_ms": 3},  # ignored
            {  # numbers that are not numbers read as none, never a 500
                "attempt": "one",
                "started_at": (timezone.now() - timedelta(seconds=2)).isoformat(),
                "duration_ms": "slow",
                "error": "text",
                "retry_in": "soon",
            },
            {
                "attempt": 1,
                "started_at": (timezone.now() - timedelta(seconds=1)).isoformat(),
                "duration_ms": 5,
                "status": "failed",
                "error": {"type": "tool_timeout"},
                "retry_in": 0.1,
            },
        ],
    )

    html = admin_client.get(page_url(run)).content.decode()

    assert 'data-terminal="false"' in html
    assert 'id="fp-live"' in html
    assert status_url(run) in html
    assert 'data-kind="wait"' in html
    assert 'data-kind="running"' in html
    assert "(tool_timeout)" in html
    assert "try 1:  in 0 ms" in html


# --- the runs list ---------------------------------------------------------------------


def test_the_runs_list_has_a_status_strip_per_workflow(
    admin_client, fake_api, monkeypatch, example_tools
):
    make_failed_run(fake_api, monkeypatch)
    make_succeeded_run(fake_api, monkeypatch)

    html = admin_client.get(reverse("admin:runs_run_changelist")).content.decode()

    assert 'id="fp-strips"' in html
    assert 'data-workflow="repo_report"' in html
    assert 'data-workflow="repo_report_ok"' in html
    assert "fp-strip-cell fp-run-failed" in html
    filtered = admin_client.get(
        reverse("admin:runs_run_changelist") + "?workflow__name=repo_report"
    )
    assert filtered.status_code == 200
    assert filtered.context["cl"].result_count == 1


def test_the_runs_of_a_version_link_filters_the_list(admin_client):
    run = RunFactory()
    RunFactory(workflow=run.workflow)
    RunFactory(workflow__data={"name": "other", "steps": run.workflow.definition["steps"]})
    html = admin_client.get(page_url(run)).content.decode()
    link = reverse("admin:runs_run_changelist") + f"?workflow__id__exact={run.workflow.pk}"
    assert link in html

    listing = admin_client.get(link)

    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 2
    review = admin_client.get(reverse("admin:workflows_workflow_change", args=[run.workflow.pk]))
    assert f'id="fp-version-runs" href="{link}"' in review.content.decode()
