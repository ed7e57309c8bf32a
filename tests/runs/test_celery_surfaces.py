"""Enqueueing surfaces on the embedded default (no broker): they run in process, as before.

Named after the feature, not a module: the admin, the commands and the services enqueue runs.

``runflow --async``, ``resumeflow --async``, ``cancelrun`` and the run admin's actions
(run again, resume, cancel). With a broker the same calls queue on the workers; that
is ``test_celery_workers.py``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from runs.models import Run
from runs.services import run_create
from tests.celery_support import import_flow

pytestmark = pytest.mark.django_db(transaction=True)


def act(client, action: str, *runs: Run):
    response = client.post(
        "/admin/runs/run/",
        {"action": action, "_selected_action": [r.pk for r in runs]},
        follow=True,
    )
    assert response.status_code == 200
    return [str(m) for m in response.context["messages"]]


# --- commands -------------------------------------------------------------------------


def test_runflow_async_without_a_broker_runs_in_process_as_before(cli, output_dir):
    result = cli("runflow", "examples/sales_report.yaml", "--async")

    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert run.status == "succeeded"
    assert "queued on the Celery workers" not in result.out
    assert f"run {run.pk} succeeded in " in result.out
    assert any(line.startswith("  ok       report") for line in result.lines)


def test_resumeflow_async_without_a_broker_resumes_in_process(cli, output_dir):
    run = run_create(
        workflow=import_flow_file("examples/sales_report.yaml"), trigger="cli", inputs={}
    )
    from runs.services import run_cancel

    run_cancel(run=run)

    result = cli("resumeflow", str(run.pk), "--async")

    assert result.code == 0, result.out + result.err
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_cancelrun_cancels_pending_runs_and_refuses_finished_or_unknown_ones(cli, output_dir):
    first = cli("runflow", "examples/sales_report.yaml")
    assert first.code == 0
    done = Run.objects.get()
    pending = run_create(workflow=done.workflow, trigger="api", inputs={})

    ok = cli("cancelrun", str(pending.pk))
    refused = cli("cancelrun", str(done.pk), "999999")

    assert ok.code == 0
    assert ok.lines == [
        f"run {pending.pk} cancelled: queued steps will not start; steps in flight finish "
        "their current attempt"
    ]
    pending.refresh_from_db()
    assert pending.status == "cancelled"
    assert set(pending.step_results.values_list("status", flat=True)) == {"skipped"}
    assert refused.code == 1
    assert f"run {done.pk} is succeeded; only queued, pending or running runs can be cancelled" in (
        refused.err
    )
    assert "no run 999999" in refused.err


def import_flow_file(path: str):
    from workflows.files import read_workflow_file

    return import_flow(read_workflow_file(path))


# --- admin actions --------------------------------------------------------------------


def test_run_again_starts_a_new_run_of_the_same_version_with_the_same_inputs(operator, output_dir):
    workflow = import_flow_file("examples/sales_report.yaml")
    first = run_create(workflow=workflow, trigger="api", inputs={"top": 2})

    messages = act(operator, "run_again", first)

    again = Run.objects.exclude(pk=first.pk).get()
    assert again.workflow == workflow
    assert again.inputs == first.inputs
    assert again.trigger == "manual"
    assert again.status == "succeeded"  # no broker: it ran in this process
    assert messages == [f"1 new run started: run {again.pk} (succeeded)."]


def test_resume_continues_a_failed_or_cancelled_run_and_reports_refusals(operator, output_dir):
    workflow = import_flow_file("examples/sales_report.yaml")
    cancelled = run_create(workflow=workflow, trigger="api", inputs={})
    act(operator, "cancel_runs", cancelled)
    pending = run_create(workflow=workflow, trigger="api", inputs={})

    messages = act(operator, "resume_runs", cancelled, pending)

    cancelled.refresh_from_db()
    assert cancelled.status == "succeeded"
    assert messages == [
        f"1 run resumed: run {cancelled.pk} (succeeded).",
        f"run {pending.pk} is pending; only failed or cancelled runs resume",
    ]


def test_cancel_reports_how_many_runs_it_cancelled(operator, output_dir):
    workflow = import_flow_file("examples/sales_report.yaml")
    runs = [run_create(workflow=workflow, trigger="api", inputs={"top": n}) for n in (1, 2)]

    messages = act(operator, "cancel_runs", *runs)
    again = act(operator, "cancel_runs", runs[0])

    assert messages == [
        f"2 runs cancelled: run {runs[0].pk} (cancelled), run {runs[1].pk} (cancelled)."
    ]
    assert again == [f"run {runs[0].pk} is cancelled; only queued, pending or running runs cancel"]


def test_the_actions_need_the_operate_permission(client, django_user_model, output_dir):
    viewer = django_user_model.objects.create_user("viewer", "v@example.com", "pw-view-1")
    viewer.is_staff = True
    viewer.save()
    viewer.user_permissions.add(Permission.objects.get(codename="view_run"))
    client.force_login(viewer)
    workflow = import_flow_file("examples/sales_report.yaml")
    run = run_create(workflow=workflow, trigger="api", inputs={})

    page = client.get("/admin/runs/run/").content.decode()
    client.post("/admin/runs/run/", {"action": "cancel_runs", "_selected_action": [run.pk]})

    assert "cancel_runs" not in page
    run.refresh_from_db()
    assert run.status == "pending"
