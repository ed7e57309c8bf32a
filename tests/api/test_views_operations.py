"""Operating runs over the API: restart a run from a step, replay a version offline.

``POST /api/v1/runs/{id}/restart/`` and ``POST /api/v1/workflows/{name}/versions/{n}/replay/``.
The runs call the fake ops API on loopback (``control_api``), which counts every
request, so each restart test proves which steps made a call and which were reused
without one; the replays run with that server stopped (no network at all). The flows
are the ones of ``tests/runs/test_restart.py`` and ``tests/runs/test_replay.py``: there
``alert`` (POST /alerts) is the one step whose tool is not idempotent.
"""

from __future__ import annotations

import json

import pytest

from review.services import workflow_approve
from runs.models import Run, RunIdempotencyKey, ToolCallRecording
from runs.services import run_create, run_execute
from runs.state import RunStatus
from tests.api.conftest import assert_error
from tests.runs.test_replay import FLOW as REPLAY_FLOW
from tests.runs.test_replay import KEYED_TOOL, SECRET
from tests.runs.test_restart import FLOW as RESTART_FLOW
from tests.runs.test_restart import calls
from tools.loader import load_tool_text
from tools.services import tool_upsert
from workflows.models import WorkflowStatus
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

VIEW = "runs.view_run"
OPERATE = "runs.operate_run"
VIEW_WORKFLOW = "workflows.view_workflow"


@pytest.fixture
def finished(control_api, control_tools):
    """A succeeded run of the restart flow; the fake's request log cleared after it."""
    version, _ = workflow_import(data=RESTART_FLOW)
    run = run_execute(run=run_create(workflow=version, trigger="cli", inputs={}))
    assert run.status == RunStatus.SUCCEEDED, run.error_summary
    assert len(control_api.requests()) == 3
    control_api.clear()
    return run


@pytest.fixture
def operator(make_client):
    return make_client(VIEW, OPERATE)


def restart(client, run: Run, body=None, **headers):
    return client.post(f"/api/v1/runs/{run.pk}/restart/", body or {}, format="json", **headers)


def steps_of(body: dict) -> dict[str, dict]:
    return {s["step_id"]: s for s in body["steps"]}


# --- restart: what runs again and what is reused ---------------------------------------


def test_restart_from_a_step_reruns_it_and_its_descendants_and_reuses_the_rest(
    finished, control_api, operator
):
    response = restart(operator, finished, {"from_step": "item", "confirm": True})

    body = response.json()
    assert response.status_code == 201, body
    assert body["id"] != finished.pk
    assert body["url"] == f"/api/v1/runs/{body['id']}/"
    assert (body["status"], body["trigger"]) == ("succeeded", "api")
    assert (body["restarted_from"], body["restarted_from_step"]) == (finished.pk, "item")
    assert calls(control_api) == {"item": 1, "alert": 1}  # status: reused, no request
    steps = steps_of(body)
    assert {s for s, r in steps.items() if r["reused"]} == {"status"}
    original = steps_of(operator.get(f"/api/v1/runs/{finished.pk}/").json())
    assert steps["status"]["output"] == original["status"]["output"]
    assert steps["status"]["finished_at"] == original["status"]["finished_at"]
    assert body["outputs"] == {"alert_id": 2, "state": "ok"}  # the alert was sent again
    assert Run.objects.get(pk=body["id"]).restarted_from == finished


def test_restart_from_a_leaf_makes_no_request_and_needs_no_confirmation(
    finished, control_api, operator
):
    response = restart(operator, finished, {"from_step": "summary"})

    body = response.json()
    assert response.status_code == 201, body
    assert control_api.requests() == []
    assert {s for s, r in steps_of(body).items() if not r["reused"]} == {"summary"}
    assert body["outputs"] == finished.outputs


def test_restart_without_a_step_reruns_every_step_with_the_same_inputs(
    finished, control_api, operator
):
    response = restart(operator, finished, {"from_step": None, "confirm": True})

    body = response.json()
    assert response.status_code == 201, body
    assert calls(control_api) == {"status": 1, "item": 1, "alert": 1}
    assert (body["restarted_from"], body["restarted_from_step"]) == (finished.pk, "")
    assert not any(s["reused"] for s in body["steps"])
    assert body["inputs"] == finished.inputs


def test_a_failed_run_restarts_from_its_failed_step(control_api, control_tools, operator):
    control_api.fail("item", status=404)
    version, _ = workflow_import(data=RESTART_FLOW)
    failed = run_execute(run=run_create(workflow=version, trigger="cli", inputs={}))
    assert failed.status == RunStatus.FAILED
    control_api.heal()
    control_api.clear()

    response = restart(operator, failed, {"from_step": "item", "confirm": True})

    assert response.status_code == 201, response.json()
    assert response.json()["status"] == "succeeded"
    assert calls(control_api) == {"item": 1, "alert": 1}


# --- restart: confirmation, refusals ---------------------------------------------------


def test_a_non_idempotent_step_needs_confirm_then_the_restart_runs(finished, control_api, operator):
    body = assert_error(
        restart(operator, finished, {"from_step": "status"}), 409, "restart_needs_confirmation"
    )
    assert (
        f"restarting run {finished.pk} from `status` runs again `alert` (tool `alert_send`)"
        in (body["message"])
    )
    assert '"confirm": true' in body["message"]
    assert body["details"] == [
        {
            "path": "confirm",
            "code": "restart_needs_confirmation",
            "message": "step `alert` is not idempotent",
        }
    ]
    assert_error(
        restart(operator, finished, {"from_step": "status", "confirm": False}),
        409,
        "restart_needs_confirmation",
    )
    assert Run.objects.count() == 1
    assert control_api.requests() == []

    response = restart(operator, finished, {"from_step": "status", "confirm": True})

    assert response.status_code == 201, response.json()
    assert calls(control_api) == {"status": 1, "alert": 1}


def test_an_unknown_step_is_a_400_naming_it_and_the_steps(finished, operator):
    body = assert_error(restart(operator, finished, {"from_step": "ghost"}), 400, "unknown_step")

    assert body["message"] == (
        f"run {finished.pk} of `restart_ops v1` has no step `ghost`; its steps are "
        "`item`, `status`, `alert`, `summary`"
    )
    assert body["details"] == [
        {"path": "from_step", "code": "unknown_step", "message": body["message"]}
    ]
    assert Run.objects.count() == 1


def test_an_unknown_run_is_a_404(operator, db):
    assert_error(operator.post("/api/v1/runs/424242/restart/", {}, format="json"), 404, "not_found")


def test_a_run_not_finished_is_a_409(control_api, control_tools, operator):
    version, _ = workflow_import(data=RESTART_FLOW)
    pending = run_create(workflow=version, trigger="cli", inputs={})

    body = assert_error(restart(operator, pending), 409, "run_state_invalid")

    assert f"run {pending.pk} is pending; only a finished run" in body["message"]
    assert control_api.requests() == []


def test_restart_needs_the_operate_permission(finished, make_client, anon, control_api):
    viewer = make_client(VIEW)
    assert_error(restart(viewer, finished, {"from_step": "summary"}), 403, "permission_denied")
    # The same answer for a run that does not exist: a refusal never tells.
    assert_error(
        viewer.post("/api/v1/runs/424242/restart/", {}, format="json"), 403, "permission_denied"
    )
    assert_error(
        restart(make_client(OPERATE), finished, {"from_step": "summary"}),
        403,
        "permission_denied",
    )  # operating without seeing runs is not enough either
    assert_error(restart(anon, finished, {"from_step": "summary"}), 401, "not_authenticated")
    assert Run.objects.count() == 1
    assert control_api.requests() == []


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"from_step": ["item"]}, "from_step"),
        ({"from_step": {"id": "item"}}, "from_step"),
        ({"from_step": True}, "from_step"),
        ({"from_step": ""}, "from_step"),
        ({"from_step": "x" * 100_000}, "from_step"),
        ({"confirm": "yes"}, "confirm"),
        ({"confirm": 1}, "confirm"),
        ({"confirm": None}, "confirm"),
    ],
)
def test_hostile_bodies_are_400s_naming_the_field(finished, control_api, operator, body, path):
    response = restart(operator, finished, body)

    error = assert_error(response, 400, "invalid")
    assert error["details"][0]["path"] == path
    assert error["message"].startswith(f"{path}: ")
    assert len(response.content) < 2000  # a huge value is not echoed back
    assert Run.objects.count() == 1
    assert control_api.requests() == []


def test_nul_characters_and_bodies_that_are_not_objects_are_refused(
    finished, control_api, operator
):
    body = assert_error(restart(operator, finished, {"from_step": "it\x00em"}), 400, "parse_error")
    assert body["details"][0]["path"] == "from_step"
    assert_error(
        operator.post(
            f"/api/v1/runs/{finished.pk}/restart/",
            '{"from_step": ',
            content_type="application/json",
        ),
        400,
        "parse_error",
    )
    assert_error(restart(operator, finished, ["item"]), 400, "invalid")
    assert_error(
        operator.post(
            f"/api/v1/runs/{finished.pk}/restart/", "from_step=item", content_type="text/plain"
        ),
        415,
        "unsupported_media_type",
    )
    assert Run.objects.count() == 1
    assert control_api.requests() == []


def test_one_idempotency_key_one_restart(finished, control_api, operator):
    first = restart(
        operator, finished, {"from_step": "item", "confirm": True}, HTTP_IDEMPOTENCY_KEY="r-1"
    )
    again = restart(
        operator, finished, {"from_step": "item", "confirm": True}, HTTP_IDEMPOTENCY_KEY="r-1"
    )

    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert calls(control_api) == {"item": 1, "alert": 1}  # the alert went out once
    assert Run.objects.filter(restarted_from=finished).count() == 1
    body = assert_error(
        restart(operator, finished, {"from_step": "summary"}, HTTP_IDEMPOTENCY_KEY="r-1"),
        422,
        "idempotency_key_reused",
    )
    assert f"(run {first.json()['id']})" in body["message"]
    # A refused restart stores no key: the same key works once it is confirmed.
    assert_error(
        restart(operator, finished, {"from_step": "status"}, HTTP_IDEMPOTENCY_KEY="r-2"),
        409,
        "restart_needs_confirmation",
    )
    assert not RunIdempotencyKey.objects.filter(key="r-2").exists()
    confirmed = restart(
        operator, finished, {"from_step": "status", "confirm": True}, HTTP_IDEMPOTENCY_KEY="r-2"
    )
    assert confirmed.status_code == 201


# --- replay ---------------------------------------------------------------------------


@pytest.fixture
def validated(control_api, control_tools, monkeypatch, approver):
    """The replay flow approved: its validation run recorded every call; then the
    loopback server is stopped, so nothing answers on the network."""
    monkeypatch.setenv("OPS_KEY", SECRET)
    for spec in load_tool_text(KEYED_TOOL, source="tests/api/test_views_operations.py"):
        tool_upsert(spec=spec, source="tests/api/test_views_operations.py")
    version, _ = workflow_import(data=REPLAY_FLOW, status=WorkflowStatus.PENDING_REVIEW)
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed", approval.validation_run.error_summary
    control_api.stop()
    return approval.validation_run


@pytest.fixture
def replayer(make_client):
    return make_client(VIEW_WORKFLOW, VIEW, OPERATE)


REPLAY_URL = "/api/v1/workflows/replay_ops/versions/1/replay/"


def test_replay_with_the_server_stopped_matches_every_step(validated, replayer):
    response = replayer.post(REPLAY_URL, {}, format="json")

    body = response.json()
    assert response.status_code == 200, body
    replay = Run.objects.get(trigger="replay")
    assert body == {
        "replay_run": replay.pk,
        "replay_run_url": f"/api/v1/runs/{replay.pk}/",
        "validation_run": validated.pk,
        "matched": True,
        "summary": (
            f"replay run {replay.pk} of replay_ops v1 against validation run {validated.pk}: "
            "all 4 steps match"
        ),
        "steps": [
            {"step": step, "verdict": "matched", "differences": []}
            for step in ("item", "status", "alert", "summary")
        ],
    }
    assert replay.replay_of == validated
    detail = replayer.get(body["replay_run_url"]).json()
    assert (detail["trigger"], detail["status"], detail["replay_of"]) == (
        "replay",
        "succeeded",
        validated.pk,
    )
    assert SECRET not in response.content.decode()


def test_replay_against_a_named_validation_run(validated, replayer):
    response = replayer.post(REPLAY_URL, {"validation_run": validated.pk}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["validation_run"] == validated.pk
    assert response.json()["matched"] is True


def test_an_edited_recorded_response_is_reported_as_a_difference(validated, replayer):
    item = ToolCallRecording.objects.filter(
        step_result__run=validated, step_result__step_id="item", status=200
    ).get()
    recorded = json.loads(item.response_body)
    recorded["name"], recorded["price"] = "item-three", 9.99
    ToolCallRecording.objects.filter(pk=item.pk).update(response_body=json.dumps(recorded))

    response = replayer.post(REPLAY_URL, {}, format="json")

    body = response.json()
    assert response.status_code == 200, body  # a difference is a finding, not an error
    assert body["matched"] is False
    verdicts = {s["step"]: s for s in body["steps"]}
    assert {s: v["verdict"] for s, v in verdicts.items()} == {
        "item": "differs",
        "status": "matched",
        "alert": "differs",
        "summary": "differs",
    }
    assert 'output.name: "item-3" → "item-three"' in verdicts["item"]["differences"]
    assert "output.price: 3.75 → 9.99" in verdicts["item"]["differences"]
    assert body["summary"].endswith("3 of 4 steps differ (item, alert, summary)")


def test_replay_refusals_name_the_problem(validated, replayer, control_tools):
    workflow_import(data={**REPLAY_FLOW, "name": "other_ops"})
    body = assert_error(
        replayer.post("/api/v1/workflows/other_ops/versions/1/replay/", {}, format="json"),
        400,
        "replay_refused",
    )
    assert body["message"] == (
        "`other_ops v1` has no succeeded validation run to replay against; approve it "
        "(its validation run records every tool call)"
    )
    body = assert_error(
        replayer.post(
            "/api/v1/workflows/other_ops/versions/1/replay/",
            {"validation_run": validated.pk},
            format="json",
        ),
        400,
        "replay_refused",
    )
    assert f"run {validated.pk} is not a validation run of `other_ops v1`" in body["message"]
    body = assert_error(
        replayer.post(REPLAY_URL, {"validation_run": 424242}, format="json"), 400, "invalid"
    )
    assert body["details"] == [
        {"path": "validation_run", "code": "invalid", "message": "no run 424242"}
    ]
    assert_error(
        replayer.post("/api/v1/workflows/replay_ops/versions/9/replay/", {}, format="json"),
        404,
        "not_found",
    )
    assert not Run.objects.filter(trigger="replay").exists()


@pytest.mark.parametrize(
    "body",
    [
        {"validation_run": "abc"},
        {"validation_run": 0},
        {"validation_run": [1]},
        {"validation_run": 1.5},
        {"validation_run": "9" * 5000},
    ],
)
def test_hostile_replay_bodies_are_400s_naming_the_field(validated, replayer, body):
    response = replayer.post(REPLAY_URL, body, format="json")

    error = assert_error(response, 400, "invalid")
    assert error["details"][0]["path"] == "validation_run"
    assert not Run.objects.filter(trigger="replay").exists()


def test_a_run_id_beyond_any_column_is_no_run(validated, replayer):
    body = assert_error(
        replayer.post(REPLAY_URL, {"validation_run": 10**30}, format="json"), 400, "invalid"
    )
    assert body["details"][0]["message"] == f"no run {10**30}"


def test_replay_needs_the_operate_permission(validated, make_client, anon):
    viewer = make_client(VIEW_WORKFLOW, VIEW)
    assert_error(viewer.post(REPLAY_URL, {}, format="json"), 403, "permission_denied")
    assert_error(
        viewer.post("/api/v1/workflows/ghost/versions/1/replay/", {}, format="json"),
        403,
        "permission_denied",
    )
    assert_error(anon.post(REPLAY_URL, {}, format="json"), 401, "not_authenticated")
    assert not Run.objects.filter(trigger="replay").exists()
