"""Restart from any step (``runs.restart``, ``restartflow``, the run admin's restart page).

Runs go to the fake ops API on loopback (``control_api``), which counts every request,
so each test proves which steps made a call and which were reused without one.

The flow: ``status`` (GET /status/api) and ``item`` (GET /items/3) are roots;
``alert`` (POST /alerts, not idempotent) reads both; ``summary`` (a transform) reads
``alert``. Restarting from ``item`` re-runs ``item``, ``alert`` and ``summary`` and
reuses ``status``.
"""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.restart import (
    RestartNeedsConfirmation,
    RestartRefused,
    restart_plan,
    run_restart,
)
from runs.services import run_cancel, run_create, run_execute
from runs.state import RunStateError, RunStatus, StepStatus
from tests.conftest import results_of, statuses
from tools.permissions import PermissionRefused
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_import
from workflows.validator import WorkflowInvalid

pytestmark = pytest.mark.django_db(transaction=True)

FLOW = {
    "name": "restart_ops",
    "inputs": {"service": {"type": "string", "default": "api"}},
    "steps": [
        {"id": "status", "kind": "tool", "tool": "service_status",
         "input_mapping": {"service": "$input.service"}},
        {"id": "item", "kind": "tool", "tool": "item_get",
         "input_mapping": {"id": 3, "currency": "EUR"}},
        {"id": "alert", "kind": "tool", "tool": "alert_send",
         "input_mapping": {"level": "info", "service": "status.service", "message": "item.name"}},
        {"id": "summary", "kind": "transform", "expression": "{id: id}",
         "input_mapping": {"id": "alert.id"}},
    ],
    "outputs": {"alert_id": "summary.id", "state": "status.state"},
}  # fmt: skip


@pytest.fixture
def finished(control_api, control_tools):
    """A succeeded run of FLOW, and the fake with its request log cleared."""
    version, _ = workflow_import(data=FLOW)
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={}))
    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    assert len(control_api.requests()) == 3
    control_api.clear()
    return run


def calls(fake) -> dict[str, int]:
    counted: dict[str, int] = {}
    for request in fake.requests():
        counted[request.route] = counted.get(request.route, 0) + 1
    return counted


def test_restart_from_a_step_reruns_it_and_its_descendants_and_reuses_the_rest(
    finished, control_api
):
    again = run_restart(run=finished, from_step="item", confirm_non_idempotent=True)

    assert again.pk != finished.pk
    assert again.status == RunStatus.SUCCEEDED
    assert calls(control_api) == {"item": 1, "alert": 1}  # status: reused, no call
    assert again.restarted_from == finished
    assert again.restarted_from_step == "item"
    assert list(finished.restarts.all()) == [again]
    results = results_of(again)
    assert {s for s, r in results.items() if r.reused} == {"status"}
    original = results_of(finished)["status"]
    assert results["status"].output == original.output
    assert results["status"].finished_at == original.finished_at
    assert results["summary"].output == {"id": 2}  # the alert was sent a second time
    assert again.outputs == {"alert_id": 2, "state": "ok"}


def test_restart_from_a_leaf_makes_no_call_at_all(finished, control_api):
    again = run_restart(run=finished, from_step="summary")

    assert again.status == RunStatus.SUCCEEDED
    assert control_api.requests() == []
    assert {s for s, r in results_of(again).items() if not r.reused} == {"summary"}
    assert again.outputs == finished.outputs


def test_restart_from_the_trigger_reruns_every_step_with_the_same_inputs(finished, control_api):
    again = run_restart(run=finished, confirm_non_idempotent=True)

    assert again.status == RunStatus.SUCCEEDED
    assert calls(control_api) == {"status": 1, "item": 1, "alert": 1}
    assert again.restarted_from == finished
    assert again.restarted_from_step == ""
    assert not any(r.reused for r in results_of(again).values())
    assert again.inputs == finished.inputs


def test_a_non_idempotent_step_in_the_rerun_set_needs_confirmation(finished, control_api):
    with pytest.raises(RestartNeedsConfirmation) as caught:
        run_restart(run=finished, from_step="status")

    assert caught.value.steps == ("alert",)
    assert "`alert` (tool `alert_send`)" in caught.value.message
    assert "not idempotent" in caught.value.message
    assert Run.objects.count() == 1
    assert control_api.requests() == []


def test_a_failed_run_restarts_from_its_failed_step(control_api, control_tools):
    control_api.fail("item", status=404)
    version, _ = workflow_import(data=FLOW)
    failed = run_execute(run=run_create(workflow=version, trigger="cli", inputs={}))
    assert failed.status == RunStatus.FAILED
    assert statuses(failed)["alert"] in {StepStatus.PENDING, StepStatus.SKIPPED}
    control_api.heal()
    control_api.clear()

    plan = restart_plan(run=failed, from_step="item")
    assert plan.reused == ("status",)
    assert set(plan.rerun) == {"item", "alert", "summary"}
    again = run_restart(run=failed, from_step="item", confirm_non_idempotent=True)

    assert again.status == RunStatus.SUCCEEDED
    assert calls(control_api) == {"item": 1, "alert": 1}


def test_steps_that_never_ran_are_not_reused_but_run(control_api, control_tools):
    version, _ = workflow_import(data=FLOW)
    cancelled = run_create(workflow=version, trigger="cli", inputs={})
    run_cancel(run=cancelled)
    cancelled.refresh_from_db()

    again = run_restart(run=cancelled, from_step="summary", confirm_non_idempotent=True)

    assert again.status == RunStatus.SUCCEEDED
    assert calls(control_api) == {"status": 1, "item": 1, "alert": 1}
    assert not any(r.reused for r in results_of(again).values())


def test_an_unknown_step_is_refused_naming_the_steps(finished):
    with pytest.raises(RestartRefused) as caught:
        run_restart(run=finished, from_step="nope")

    assert f"run {finished.pk} of `restart_ops v1` has no step `nope`" in caught.value.message
    assert "its steps are `item`, `status`, `alert`, `summary`" in caught.value.message


def test_a_run_not_finished_is_refused(control_api, control_tools):
    version, _ = workflow_import(data=FLOW)
    pending = run_create(workflow=version, trigger="cli", inputs={})
    Run.objects.filter(pk=pending.pk).update(status=RunStatus.RUNNING)
    pending.refresh_from_db()

    with pytest.raises(RunStateError, match="is running; only a finished run"):
        run_restart(run=pending, from_step="item")


def test_a_run_of_an_archived_version_is_refused(finished):
    Workflow.objects.filter(pk=finished.workflow_id).update(status=WorkflowStatus.ARCHIVED)
    finished.workflow.refresh_from_db()

    with pytest.raises(RestartRefused, match="archived; its runs are not restarted"):
        run_restart(run=finished, from_step="item")


def test_a_definition_changed_since_the_run_is_refused(finished):
    Run.objects.filter(pk=finished.pk).update(definition_hash="0" * 64)
    finished.refresh_from_db()

    with pytest.raises(RestartRefused, match="has changed since"):
        run_restart(run=finished, from_step="item")


def test_a_tool_changed_since_approval_is_refused_by_the_pins(finished, control_api):
    Workflow.objects.filter(pk=finished.workflow_id).update(tool_pins={"service_status": "0" * 64})
    finished.workflow.refresh_from_db()

    with pytest.raises(WorkflowInvalid, match="tool `service_status` changed"):
        run_restart(run=finished, from_step="summary")
    assert Run.objects.count() == 1


def test_a_reused_output_stored_truncated_cannot_feed_a_rerun_step(finished):
    finished.step_results.filter(step_id="status").update(output_truncated=True)

    with pytest.raises(RestartRefused, match="reads the output of `status`"):
        run_restart(run=finished, from_step="alert", confirm_non_idempotent=True)


def test_restart_needs_the_operate_permission(finished, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="pw-view-1")

    with pytest.raises(PermissionRefused):
        run_restart(run=finished, from_step="summary", actor=user)


# --- restartflow ---------------------------------------------------------------------


def test_restartflow_from_a_step(finished, control_api, cli):
    result = cli("restartflow", str(finished.pk), "--from", "item", "--yes")

    assert result.code == 0, result.out + result.err
    again = Run.objects.get(restarted_from=finished)
    assert (
        f"run {again.pk}: restarting run {finished.pk} of restart_ops v1 from step `item`; "
        "running again: alert, item, summary; reused (not executed): status"
    ) in result.out
    assert f"run {again.pk} succeeded" in result.out
    assert again.trigger == "cli"
    assert calls(control_api) == {"item": 1, "alert": 1}


def test_restartflow_refuses_without_yes_naming_the_steps(finished, control_api, cli):
    result = cli("restartflow", str(finished.pk), "--from", "item")

    assert result.code == 1
    assert "runs again `alert` (tool `alert_send`)" in result.err
    assert "--yes" in result.err
    assert control_api.requests() == []


def test_restartflow_unknown_run_and_step(finished, cli):
    assert cli("restartflow", "999999").err.strip() == "CommandError: no run 999999"
    result = cli("restartflow", str(finished.pk), "--from", "ghost")
    assert result.code == 1
    assert "has no step `ghost`" in result.err


# --- admin ---------------------------------------------------------------------------


def test_admin_restart_page_restarts_and_links_both_ways(finished, control_api, operator):
    page = operator.get(f"/admin/runs/run/{finished.pk}/change/")
    assert f'href="/admin/runs/run/{finished.pk}/restart/"' in page.content.decode()
    form = operator.get(f"/admin/runs/run/{finished.pk}/restart/")
    assert b"step item" in form.content
    assert b"the trigger" in form.content

    refused = operator.post(f"/admin/runs/run/{finished.pk}/restart/", {"from_step": "item"})
    assert refused.status_code == 200
    assert "runs again `alert`" in refused.content.decode().replace("&#x27;", "'")
    assert Run.objects.count() == 1

    done = operator.post(
        f"/admin/runs/run/{finished.pk}/restart/",
        {"from_step": "item", "confirm_non_idempotent": "on"},
        follow=True,
    )
    again = Run.objects.get(restarted_from=finished)
    assert done.redirect_chain[-1][0] == f"/admin/runs/run/{again.pk}/change/"
    assert f"Run {again.pk} restarts run {finished.pk} from step `item`: succeeded." in [
        str(m) for m in done.context["messages"]
    ]
    assert (
        f'href="/admin/runs/run/{finished.pk}/change/">run {finished.pk}</a> of restart_ops v1 '
        "from step item"
    ) in done.content.decode()
    original = operator.get(f"/admin/runs/run/{finished.pk}/change/").content.decode()
    assert f'restarted as <a href="/admin/runs/run/{again.pk}/change/">run {again.pk}</a>' in (
        original
    )
    assert calls(control_api) == {"item": 1, "alert": 1}


def test_admin_restart_page_of_an_unknown_run_is_404(operator):
    assert operator.get("/admin/runs/run/999999/restart/").status_code == 404
