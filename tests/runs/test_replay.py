"""Recording a validation run's calls, and replaying the version offline against them.

Named after the feature: the recorder (``runs.replay.recorder``), the replay taps
(``runs.replay.player``), the report, ``replayflow`` and the run admin's replay page.
The validation run talks to the fake ops API on loopback; the replays run with that
server *stopped*, so any request that tried the network would fail the step.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

from review.services import workflow_approve
from runs.models import Run, ToolCallRecording
from runs.replay.exchange import body_text
from runs.replay.recorder import CallRecorder, _Pending
from runs.replay.report import value_differences
from runs.replay.services import ReplayRefused, version_replay
from tests.conftest import results_of
from tools.loader import load_tool_text
from tools.services import tool_upsert
from workflows.models import WorkflowStatus
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "ops-key-0123456789abcdef"

KEYED_TOOL = """
name: status_keyed
kind: http
description: Health of one service, with an API key in the query.
base_url: "{{env.CONTROL_API_BASE_URL}}"
request: {method: GET, url: "/status/{{service}}"}
auth: {type: api_key, in: query, name: key, value: "{{env.OPS_KEY}}"}
inputs: {type: object, properties: {service: {type: string}}, required: [service]}
response_extract: {service: service, state: state, latency_ms: latency_ms}
timeout: 5
"""

FLOW = {
    "name": "replay_ops",
    "inputs": {"service": {"type": "string", "default": "api"}},
    "steps": [
        {"id": "status", "kind": "tool", "tool": "status_keyed",
         "input_mapping": {"service": "$input.service"}},
        {"id": "item", "kind": "tool", "tool": "item_get",
         "input_mapping": {"id": 3, "currency": "EUR"},
         "retry": {"max_attempts": 3, "initial_delay": 0.01}},
        {"id": "alert", "kind": "tool", "tool": "alert_send",
         "input_mapping": {"level": "info", "service": "status.service", "message": "item.name"}},
        {"id": "summary", "kind": "transform", "expression": "{id: id}",
         "input_mapping": {"id": "alert.id"}},
    ],
}  # fmt: skip


@pytest.fixture
def validated(control_api, control_tools, monkeypatch, approver):
    """FLOW approved: its validation run (the item answered 503 once, then 200) recorded."""
    monkeypatch.setenv("OPS_KEY", SECRET)
    for spec in load_tool_text(KEYED_TOOL, source="tests/runs/test_replay.py"):
        tool_upsert(spec=spec, source="tests/runs/test_replay.py")
    version, _ = workflow_import(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
    control_api.fail("item", status=503, times=1)
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed", approval.validation_run.error_summary
    control_api.stop()  # from here on, nothing answers on the network
    return approval.validation_run


def recordings(run: Run, step_id: str) -> list[ToolCallRecording]:
    return list(
        ToolCallRecording.objects.filter(step_result__run=run, step_result__step_id=step_id)
    )


def test_the_validation_run_records_every_exchange_masked(validated):
    status = recordings(validated, "status")
    assert [(r.method, r.status, r.tool) for r in status] == [("GET", 200, "status_keyed")]
    assert status[0].url.endswith("/status/api?key=***")
    assert json.loads(status[0].response_body)["state"] == "ok"
    item = recordings(validated, "item")
    assert [r.status for r in item] == [503, 200]  # the retry is recorded too, in order
    alert = recordings(validated, "alert")
    assert json.loads(alert[0].request_body) == {
        "level": "info", "message": "item-3", "service": "api"
    }  # fmt: skip
    assert alert[0].status == 201
    stored = json.dumps(list(ToolCallRecording.objects.values()), default=str, ensure_ascii=False)
    assert SECRET not in stored
    assert not recordings(validated, "summary")  # a transform calls nothing


def test_replay_with_the_server_stopped_matches_every_step(validated, cli):
    result = cli("replayflow", "replay_ops")

    assert result.code == 0, result.out + result.err
    replay = Run.objects.get(trigger="replay")
    assert replay.replay_of == validated
    assert replay.status == "succeeded"
    assert replay.outputs == validated.outputs
    assert result.lines[-1] == (
        f"replay run {replay.pk} of replay_ops v1 against validation run {validated.pk}: "
        "all 4 steps match"
    )
    assert "  matched  alert" in result.lines
    assert [e["status"] for e in results_of(replay)["item"].attempt_log] == [
        "failed",
        "succeeded",
    ]  # the recorded 503 answered first, then the 200
    assert not ToolCallRecording.objects.filter(step_result__run=replay).exists()


def test_a_changed_secret_still_matches_its_masked_recording(validated, monkeypatch):
    monkeypatch.setenv("OPS_KEY", "another-ops-key-9876543210")

    report = version_replay(version=validated.workflow)

    assert report.matched, report.as_dict()
    assert report.as_dict()["steps"][0] == {"step": "item", "verdict": "matched", "differences": []}


def test_an_edited_recorded_response_is_reported_naming_step_and_field(validated, cli):
    item = recordings(validated, "item")[1]
    body = json.loads(item.response_body)
    body["name"], body["price"] = "item-three", 9.99
    ToolCallRecording.objects.filter(pk=item.pk).update(response_body=json.dumps(body))

    result = cli("replayflow", str(validated.workflow_id))

    assert result.code == 1
    text = result.out
    assert "  differs  item" in text
    assert '             output.name: "item-3" → "item-three"' in text
    assert "             output.price: 3.75 → 9.99" in text
    assert "  differs  alert" in text  # its request now carries the edited name
    assert "status: succeeded in the validation run, failed in the replay" in text
    assert "error (replay_unrecorded): step `alert`: request differs" in text
    assert '"message": "item-3"' in text  # what was recorded …
    assert '"message": "item-three"' in text  # … and what the replay would have sent
    assert "  matched  status" in text
    assert "3 of 4 steps differ (item, alert, summary)" in result.err  # graph order


def test_a_call_with_no_recording_is_refused_never_sent(validated):
    ToolCallRecording.objects.filter(
        step_result__run=validated, step_result__step_id="alert"
    ).delete()

    report = version_replay(version=validated.workflow)

    alert = next(s for s in report.steps if s.step_id == "alert")
    assert alert.verdict == "differs"
    assert any("recorded no further call of this step" in line for line in alert.differences)
    assert report.replay_run.status == "failed"


def test_a_recording_the_replay_never_used_is_reported(validated):
    first = recordings(validated, "status")[0]
    ToolCallRecording.objects.create(
        step_result=first.step_result, tool="status_keyed", method="GET",
        url=first.url.replace("/api?", "/db?"), status=200, response_body="{}",
    )  # fmt: skip

    report = version_replay(version=validated.workflow)

    status = next(s for s in report.steps if s.step_id == "status")
    assert status.differences == (
        f"recorded call not made in the replay: GET {first.url.replace('/api?', '/db?')}",
    )


def test_a_truncated_recording_cannot_stand_for_the_response(validated):
    ToolCallRecording.objects.filter(
        step_result__run=validated, step_result__step_id="status"
    ).update(body_truncated=True)

    report = version_replay(version=validated.workflow)

    status = next(s for s in report.steps if s.step_id == "status")
    assert any("replay_incomplete" in line for line in status.differences)


def test_a_recorded_transport_error_is_raised_again(control_api, control_tools, approver):
    flow = {
        "name": "down_ops",
        "steps": [{"id": "ping", "kind": "tool", "tool": "service_status",
                   "input_mapping": {"service": "api"}, "on_error": "continue"}],
    }  # fmt: skip
    version, _ = workflow_import(data=flow, status=WorkflowStatus.PENDING_REVIEW)
    control_api.stop()  # the validation run itself finds the server down
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed"  # on_error: continue
    [row] = recordings(approval.validation_run, "ping")
    assert row.status is None
    assert row.error["type"] == "tool_unreachable"

    report = version_replay(version=version)

    assert report.matched, report.as_dict()
    assert results_of(report.replay_run)["ping"].error["type"] == "tool_unreachable"


def test_only_a_validation_run_of_the_version_is_replayed(validated, control_tools):
    other, _ = workflow_import(data={**FLOW, "name": "other_ops"})
    with pytest.raises(ReplayRefused, match="has no succeeded validation run"):
        version_replay(version=other)
    with pytest.raises(ReplayRefused, match=f"run {validated.pk} is not a validation run of"):
        version_replay(version=other, validation_run=validated)


def test_replayflow_unknown_version_or_run(cli, db):
    assert cli("replayflow", "ghost").err.strip() == "CommandError: no stored workflow `ghost`"
    assert cli("replayflow", "424242").err.strip() == (
        "CommandError: no workflow version with id 424242"
    )


def test_replayflow_unknown_validation_run(validated, cli):
    result = cli("replayflow", "replay_ops", "--flow-version", "1", "--validation-run", "99999")
    assert result.err.strip() == "CommandError: no run 99999"


def test_the_recorder_only_stores_calls_of_known_steps(validated):
    recorder = CallRecorder(run_id=validated.pk, max_bytes=10)
    recorder.keep(_Pending("nope", None, {"tool": "x", "method": "GET", "url": "u"}))

    recorder.close()

    assert ToolCallRecording.objects.filter(step_result__run=validated).count() == 4


def test_value_differences_name_each_place():
    then = {"a": 1, "b": [1, 2], "c": {"d": "x"}, "gone": True}
    now = {"a": 1.0, "b": [1, 3, 4], "c": {"d": "y"}, "new": None}

    assert value_differences(then, now, "output") == [
        "output.a: 1 → 1.0",
        "output.b: 2 items → 3",
        "output.b.1: 2 → 3",
        'output.c.d: "x" → "y"',
        "output.gone: missing in the replay (was true)",
        "output.new: only in the replay (null)",
    ]


# --- admin ---------------------------------------------------------------------------


def test_admin_replay_page_of_a_validation_run_shows_the_report(
    validated, client, django_user_model
):
    user = django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_run"),
        Permission.objects.get(codename="operate_run"),
    )
    client.force_login(user)
    page = client.get(f"/admin/runs/run/{validated.pk}/change/").content.decode()
    assert f'href="/admin/runs/run/{validated.pk}/replay/"' in page

    response = client.post(f"/admin/runs/run/{validated.pk}/replay/")

    assert response.status_code == 200
    text = response.content.decode()
    replay = Run.objects.get(trigger="replay")
    assert "all 4 steps match" in text
    assert 'class="fp-replay-matched"><td>alert</td>' in text
    assert f'href="/admin/runs/run/{replay.pk}/change/"' in text
    replay_page = client.get(f"/admin/runs/run/{replay.pk}/change/").content.decode()
    assert f'replays <a href="/admin/runs/run/{validated.pk}/change/">validation run' in replay_page


def test_admin_replay_is_offered_only_on_validation_runs(validated, admin_client):
    other = Run.objects.create(
        workflow=validated.workflow, definition_hash=validated.definition_hash, trigger="manual"
    )
    page = admin_client.get(f"/admin/runs/run/{other.pk}/change/").content.decode()
    assert "/replay/" not in page
    response = admin_client.post(f"/admin/runs/run/{other.pk}/replay/")
    assert "is not a validation run of" in response.content.decode()


# --- units: the comparable request, the recording cap, the step comparison ----------


def test_body_text_of_each_body_kind():
    from tools.http.bodies import Body

    assert body_text(Body(json={"b": 1, "a": [2]})) == '{"a": [2], "b": 1}'
    assert body_text(Body()) == ""
    assert body_text(Body(data=[("q", "a b"), ("q", "c")])) == "q=a+b&q=c"
    assert body_text(Body(content=b"plain \xff")) == "plain \ufffd"
    files = Body(data=[("k", "v")], files=[("up", ("a.csv", b"1,2", "text/csv"))])
    assert json.loads(body_text(files)) == {"data": [["k", "v"]], "files": [["up", "a.csv", 3]]}


def test_a_body_over_the_cap_is_kept_cut_and_flagged(db):
    import httpx

    from tools.http.request import PreparedRequest
    from tools.http.transport import Received
    from tools.redaction import Redactor

    recorder = CallRecorder(run_id=0, max_bytes=8)
    answer = Received(200, httpx.Headers({"content-type": "text/plain"}), b"0123456789", False,
                      "utf-8", "http://x/")  # fmt: skip
    tap = recorder.tap_for("s", None, "t")

    got = tap.exchange(PreparedRequest("GET", "http://x/"), lambda: answer, Redactor())

    assert got is answer  # the step gets the whole answer; only the copy is cut
    [kept] = recorder._kept
    assert kept.fields["response_body"] == "01234567"
    assert kept.fields["body_truncated"] is True


def test_step_differences_without_a_baseline_or_with_truncated_outputs():
    from runs.models import StepResult
    from runs.replay.report import step_differences

    now = StepResult(step_id="s", status="succeeded", output={"a": 1})
    assert step_differences(None, now) == ["the validation run has no such step"]
    cut = StepResult(
        step_id="s", status="succeeded", output={"preview": "…"}, output_truncated=True
    )
    assert step_differences(cut, now) == ["output: stored truncated in one run only; not compared"]
    assert step_differences(cut, cut) == []


REPORT_FLOW = {
    "name": "replay_report",
    "steps": [
        {
            "id": "report",
            "kind": "tool",
            "tool": "write_report",
            "input_mapping": {
                "path": "replayed.html",
                "title": "Replayed",
                "sections": [{"heading": "Figures", "text": "none"}],
            },
        }
    ],
}


def test_a_replayed_report_names_the_run_it_replays_so_its_bytes_match(approver, output_dir):
    """A report is stamped "run N": a replay whose own id has more digits than its
    validation run's (run 9, replayed as run 10) still writes the very same report."""
    from tests.factories import RunFactory

    version, _ = workflow_import(data=REPORT_FLOW, status=WorkflowStatus.PENDING_REVIEW)
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed", approval.validation_run.error_summary
    validation = approval.validation_run
    while RunFactory(workflow=version).pk < validation.pk * 10:  # the replay's id: longer
        pass

    outcome = version_replay(version=version)

    assert outcome.replay_run.pk >= validation.pk * 10
    assert outcome.matched, outcome.as_dict()
