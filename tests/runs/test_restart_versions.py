"""Restart onto another version of the workflow (``runs.restart``, ``restartflow
--flow-version``).

v1 is FLOW of ``test_restart``: ``status`` (GET /status/api) and ``item`` (GET
/items/3) are roots, ``alert`` (POST /alerts, not idempotent) reads both, ``summary``
(a transform) reads ``alert``. Each test approves a v2 with one change and counts the
requests per endpoint on the fake ops API on loopback: only changed steps and their
descendants make calls.
"""

from __future__ import annotations

import copy
import json

import pytest
from django.contrib.auth.models import Permission

from runs.models import Run
from runs.restart import (
    RestartRefused,
    RestartUnfit,
    RestartVersionRefused,
    restart_plan,
    run_restart,
)
from runs.services import run_create, run_execute
from runs.state import RunStatus
from tests.api.conftest import client_for, grant
from tests.conftest import results_of
from tests.factories import UserFactory
from tests.runs.test_restart import FLOW, calls
from tools.registry import ToolRegistry
from workflows.models import Workflow, WorkflowStatus
from workflows.pins import workflow_tool_pins
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)


def approve(version: Workflow) -> Workflow:
    """``version`` active with its tools pinned, the older active ones archived."""
    Workflow.objects.filter(name=version.name, status=WorkflowStatus.ACTIVE).exclude(
        pk=version.pk
    ).update(status=WorkflowStatus.ARCHIVED)
    pins = workflow_tool_pins(spec=workflow_spec(version), registry=ToolRegistry.from_db())
    Workflow.objects.filter(pk=version.pk).update(status=WorkflowStatus.ACTIVE, tool_pins=pins)
    version.refresh_from_db()
    return version


def v2_with(change) -> Workflow:
    data = copy.deepcopy(FLOW)
    change({s["id"]: s for s in data["steps"]}, data)
    version, created = workflow_import(data=data)
    assert created
    return approve(version)


@pytest.fixture
def v1_run(control_api, control_tools):
    version, _ = workflow_import(data=FLOW)
    approve(version)
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={}))
    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    control_api.clear()
    return run


def test_a_changed_downstream_step_reruns_with_its_descendants_only(v1_run, control_api):
    v2 = v2_with(lambda steps, _: steps["alert"]["input_mapping"].update(level="warning"))
    v1_run.workflow.refresh_from_db()
    assert v1_run.workflow.status == WorkflowStatus.ARCHIVED  # restarted all the same

    plan = restart_plan(run=v1_run, from_step="summary", version=v2)
    assert plan.changed == ("alert",)
    assert (plan.rerun, plan.reused) == (("alert", "summary"), ("item", "status"))
    again = run_restart(run=v1_run, from_step="summary", version=v2, confirm_non_idempotent=True)

    assert again.status == RunStatus.SUCCEEDED, again.error_summary
    assert calls(control_api) == {"alert": 1}  # status and item reused: no call
    assert control_api.control.alerts[-1]["level"] == "warning"
    assert again.workflow == v2
    assert again.restarted_from == v1_run
    assert again.restarted_from.workflow == v1_run.workflow  # both versions linked
    reused = {s for s, r in results_of(again).items() if r.reused}
    assert reused == {"item", "status"}


def test_a_changed_root_reruns_its_descendants_and_reuses_the_other_root(v1_run, control_api):
    v2 = v2_with(lambda steps, _: steps["item"]["input_mapping"].update(currency="USD"))

    again = run_restart(run=v1_run, from_step="summary", version=v2, confirm_non_idempotent=True)

    assert again.status == RunStatus.SUCCEEDED, again.error_summary
    assert calls(control_api) == {"item": 1, "alert": 1}
    assert control_api.requests("item")[0].arg("currency") == "USD"


def test_a_tool_pinned_at_another_hash_counts_as_a_change(v1_run, control_api):
    v2 = v2_with(lambda steps, data: data.update(description="v2"))
    Workflow.objects.filter(pk=v2.pk).update(tool_pins={**v2.tool_pins, "service_status": "f" * 64})
    v2.refresh_from_db()

    plan = restart_plan(run=v1_run, from_step="summary", version=v2)

    assert plan.changed == ("status",)
    assert set(plan.rerun) == {"status", "alert", "summary"}


def test_a_new_reference_to_a_path_a_reused_output_lacks_is_refused_by_name(v1_run, control_api):
    v2 = v2_with(lambda steps, _: steps["alert"]["input_mapping"].update(message="item.colour"))

    with pytest.raises(RestartUnfit) as refused:
        run_restart(run=v1_run, from_step="alert", version=v2, confirm_non_idempotent=True)

    assert refused.value.code == "restart_unfit"
    assert (
        f"step `alert` now reads `item.colour`, but the output of `item` that run {v1_run.pk} "
        "stored (reused, as the step is unchanged) has no `colour`"
    ) in refused.value.message
    assert control_api.requests() == []
    assert Run.objects.count() == 1


def test_a_new_required_input_is_refused_by_name(v1_run, control_api):
    def change(steps, data):
        data["inputs"]["region"] = {"type": "string"}
        steps["alert"]["input_mapping"]["service"] = "$input.region"

    v2 = v2_with(change)

    with pytest.raises(RestartUnfit) as refused:
        run_restart(run=v1_run, from_step="alert", version=v2, confirm_non_idempotent=True)

    assert "run input `region` of `restart_ops v2`" in refused.value.message
    assert len(refused.value.problems) == 1
    assert "region" in refused.value.problems[0]


def test_a_version_of_another_workflow_or_not_active_is_refused(v1_run):
    other, _ = workflow_import(data={**copy.deepcopy(FLOW), "name": "another_flow"})
    draft, _ = workflow_import(data={**copy.deepcopy(FLOW), "description": "a draft"})

    with pytest.raises(RestartVersionRefused, match="only onto a version of it"):
        restart_plan(run=v1_run, from_step="item", version=other)
    with pytest.raises(RestartVersionRefused, match="is draft; a run restarts only onto an active"):
        restart_plan(run=v1_run, from_step="item", version=draft)


def test_a_run_of_an_archived_version_is_refused_naming_the_active_one(v1_run):
    v2_with(lambda steps, data: data.update(description="v2"))
    v1_run.workflow.refresh_from_db()

    with pytest.raises(
        RestartRefused, match=r"restart it onto the active version \(--flow-version 2\)"
    ):
        restart_plan(run=v1_run, from_step="item")


def test_restartflow_onto_a_version(v1_run, control_api, cli):
    v2_with(lambda steps, _: steps["summary"].update(expression="{id: id, v: `2`}"))

    result = cli("restartflow", str(v1_run.pk), "--from", "summary", "--flow-version", "2")

    assert result.code == 0, result.out + result.err
    again = Run.objects.get(restarted_from=v1_run)
    assert (
        f"run {again.pk}: restarting run {v1_run.pk} of restart_ops v1 onto restart_ops v2 "
        "from step `summary`; running again: summary; reused (not executed): alert, item, status"
    ) in result.out
    assert calls(control_api) == {}  # a transform changed: no call at all
    assert again.outputs["alert_id"] == v1_run.outputs["alert_id"]
    missing = cli("restartflow", str(v1_run.pk), "--flow-version", "9")
    assert missing.code == 1
    assert "workflow `restart_ops` has no version 9 (its versions: 1 (archived), 2 (active))" in (
        missing.err
    )


def test_showrun_and_its_json_name_both_versions(v1_run, control_api, cli):
    v2 = v2_with(lambda steps, _: steps["summary"].update(expression="{id: id, v: `2`}"))
    again = run_restart(run=v1_run, from_step="summary", version=v2)

    shown = cli("showrun", str(again.pk))
    record = json.loads(cli("showrun", str(again.pk), "--json").out)

    assert f"run {again.pk} of restart_ops v2: succeeded" in shown.out
    assert f"restarts run {v1_run.pk} of restart_ops v1 from step `summary`, onto v2" in shown.out
    assert (record["version"], record["restarted_from"], record["restarted_from_version"]) == (
        2,
        v1_run.pk,
        1,
    )


# --- the API and the admin -------------------------------------------------------------


def api_operator():
    user = UserFactory(username="api_ops", permissions=None)
    user.user_permissions.clear()
    return client_for(grant(user, "runs.view_run", "runs.operate_run"))


def test_the_api_restarts_onto_a_version_and_shows_both(v1_run, control_api):
    client = api_operator()
    v2_with(lambda steps, _: steps["alert"]["input_mapping"].update(level="warning"))
    url = f"/api/v1/runs/{v1_run.pk}/restart/"

    refused = client.post(url, {"from_step": "summary", "version": 2}, format="json")
    assert refused.status_code == 409
    assert refused.json()["code"] == "restart_needs_confirmation"
    missing = client.post(url, {"from_step": "summary", "version": 7}, format="json")
    assert missing.status_code == 409
    assert missing.json()["details"][0]["path"] == "version"
    assert "has no version 7" in missing.json()["message"]

    response = client.post(
        url, {"from_step": "summary", "version": 2, "confirm": True}, format="json"
    )

    body = response.json()
    assert response.status_code == 201, body
    assert (body["version"], body["restarted_from"], body["restarted_from_version"]) == (
        2,
        v1_run.pk,
        1,
    )
    assert calls(control_api) == {"alert": 1}
    original = client.get(f"/api/v1/runs/{v1_run.pk}/").json()
    assert (original["version"], original["restarted_from_version"]) == (1, None)


def test_the_api_names_every_misfit(v1_run, control_api):
    client = api_operator()

    def change(steps, data):
        data["inputs"]["region"] = {"type": "string"}
        steps["alert"]["input_mapping"].update(message="item.colour", service="$input.region")

    v2_with(change)

    response = client.post(
        f"/api/v1/runs/{v1_run.pk}/restart/",
        {"from_step": "alert", "version": 2, "confirm": True},
        format="json",
    )

    body = response.json()
    assert response.status_code == 409, body
    assert body["code"] == "restart_unfit"
    assert len(body["details"]) == 2
    assert {d["code"] for d in body["details"]} == {"restart_unfit"}
    assert any("`region`" in d["message"] for d in body["details"])
    assert any("item.colour" in d["message"] for d in body["details"])


def test_the_admin_restart_page_offers_the_active_version(
    v1_run, control_api, client, django_user_model
):
    user = django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_run"),
        Permission.objects.get(codename="operate_run"),
    )
    client.force_login(user)
    v2_with(lambda steps, _: steps["alert"]["input_mapping"].update(level="warning"))
    url = f"/admin/runs/run/{v1_run.pk}/restart/"

    form = client.get(url).content.decode()
    assert "v1 (the run&#x27;s own, archived)" in form
    assert "v2 (active)" in form

    own = client.post(url, {"from_step": "summary"})
    assert "archived; its runs are not restarted on it" in own.content.decode()
    done = client.post(
        url,
        {"from_step": "summary", "flow_version": "2", "confirm_non_idempotent": "on"},
        follow=True,
    )

    again = Run.objects.get(restarted_from=v1_run)
    assert again.workflow.version == 2
    assert f"Run {again.pk} restarts run {v1_run.pk} from step `summary`, onto v2: succeeded." in [
        str(m) for m in done.context["messages"]
    ]
    assert "of restart_ops v1 from step summary, onto v2" in done.content.decode()
    assert calls(control_api) == {"alert": 1}
