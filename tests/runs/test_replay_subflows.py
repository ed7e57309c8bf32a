"""Replaying a version with `workflow` steps: the child runs' calls recorded and replayed.

Named after the feature: a validation run's child runs record their calls too
(``runs.replay.recorder.call_recorder_for``), and a replay runs each `workflow` step's
child as a replay child against the recordings of the validation run's child of that
step (``runs.replay.services``); the report lists the child's differing steps under
the parent step. The children call the loopback echo server of this module, which is
*stopped* before every replay: any request that tried the network would fail. (On the
Celery workers: ``test_celery_operations.py``.)
"""

from __future__ import annotations

import json

import pytest

from runs.models import Run, ToolCallRecording
from runs.replay.recorder import call_recorder_for
from runs.replay.services import version_replay
from runs.services import run_create, run_execute
from tests.celery_support import install_echo, load_echo_tools
from tests.conftest import results_of
from tests.fakes import FakeAPI
from tests.runs.subflows import approve, caller_flow, child_flow, parent_flow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def echo():
    """A loopback echo server of this test alone (stopped by the test before a replay)."""
    fake = FakeAPI().start()
    install_echo(fake)
    load_echo_tools(fake)
    yield fake
    fake.stop()


@pytest.fixture
def validated(echo, approver):
    """``greet`` approved, then ``outer`` (step ``sub`` runs ``greet``) approved: the
    validation run of ``outer`` and its child run recorded; the server stopped."""
    approve(child_flow(), approver, {"tag": "c0"})
    outer = approve(parent_flow(), approver, {"tag": "p1"})
    validation = Run.objects.get(workflow=outer, trigger="validation")
    assert validation.status == "succeeded", validation.error_summary
    echo.stop()  # from here on, nothing answers on the network
    return validation


def child_of(run: Run) -> Run:
    return Run.objects.get(parent_run=run)


def recorded(run: Run, step_id: str) -> list[ToolCallRecording]:
    return list(
        ToolCallRecording.objects.filter(step_result__run=run, step_result__step_id=step_id)
    )


def test_the_validation_runs_child_records_its_calls(validated):
    child = child_of(validated)

    [say] = recorded(child, "say")

    assert (child.trigger, child.parent_step.step_id) == ("workflow", "sub")
    assert (say.kind, say.method, say.status, say.tool) == ("http", "GET", 200, "echo")
    assert "/echo/p1/ann" in say.url
    assert json.loads(say.response_body) == {"tag": "p1", "name": "ann"}
    assert not ToolCallRecording.objects.filter(step_result__run=validated).exists()  # calls none


def test_an_ordinary_runs_child_records_nothing_and_costs_no_query(
    echo, approver, django_assert_num_queries
):
    approve(child_flow(), approver, {"tag": "c0"})
    outer = approve(parent_flow(), approver, {"tag": "p1"})
    ToolCallRecording.objects.all().delete()

    run = run_execute(run=run_create(workflow=outer, trigger="api", inputs={"tag": "o1"}))

    assert run.status == "succeeded", run.error_summary
    child = child_of(run)
    assert child.trigger == "workflow"
    assert not ToolCallRecording.objects.exists()  # neither the run nor its child
    with django_assert_num_queries(0):  # a top-level run: its trigger says it all
        assert call_recorder_for(run) is None
    with django_assert_num_queries(1):  # a child run: its parent's trigger, one level
        assert call_recorder_for(child) is None


def test_replay_with_the_server_stopped_matches_parent_and_child(validated, echo, cli, settings):
    settings.FLOWPILOT_RUN_FINISHED_HOOKS = ["tests.runs.test_replay_subflows.heard"]
    HEARD.clear()
    calls_before = len(echo.requests())

    result = cli("replayflow", "outer")

    assert result.code == 0, result.out + result.err
    replay = Run.objects.get(trigger="replay", parent_run=None)
    assert (replay.replay_of, replay.status) == (validated, "succeeded")
    assert replay.outputs == validated.outputs == {"said": "p1!ann", "tag": "p1"}
    child = child_of(replay)
    assert (child.trigger, child.status, child.workflow.name) == ("replay", "succeeded", "greet")
    assert child.replay_of == child_of(validated)  # answered by the recorded child's calls
    assert child.parent_step == replay.step_results.get(step_id="sub")
    assert results_of(child)["say"].output == {"tag": "p1", "name": "ann"}
    assert len(echo.requests()) == calls_before  # no child reached the network
    assert not ToolCallRecording.objects.filter(step_result__run__trigger="replay").exists()
    assert HEARD == []  # neither the replay nor its child announced anything
    assert "  matched  sub" in result.lines
    assert result.lines[-1].endswith("all 2 steps match")


def test_an_edited_response_of_the_childs_call_is_named_under_the_parent_step(validated, cli):
    [say] = recorded(child_of(validated), "say")
    ToolCallRecording.objects.filter(pk=say.pk).update(
        response_body=json.dumps({"tag": "p1", "name": "bob"})
    )

    result = cli("replayflow", "outer")

    assert result.code == 1
    text = result.out
    assert "  differs  sub" in text
    assert '             output.loud: "p1!ann" → "p1!bob"' in text  # the step, as usual
    assert '             child.say.output.name: "ann" → "bob"' in text  # where in the child
    assert '             child.shout.output.loud: "p1!ann" → "p1!bob"' in text
    assert "  differs  after" in text
    assert "2 of 2 steps differ (sub, after)" in result.err
    report = version_replay(version=validated.workflow)
    sub = next(s for s in report.steps if s.step_id == "sub")
    assert sub.differences == (
        'output.loud: "p1!ann" → "p1!bob"',
        'child.say.output.name: "ann" → "bob"',
        'child.shout.output.loud: "p1!ann" → "p1!bob"',
    )


def test_the_admin_replay_page_names_the_childs_difference_and_links_the_children(
    validated, admin_client
):
    [say] = recorded(child_of(validated), "say")
    ToolCallRecording.objects.filter(pk=say.pk).update(
        response_body=json.dumps({"tag": "p1", "name": "bob"})
    )

    response = admin_client.post(f"/admin/runs/run/{validated.pk}/replay/")

    assert response.status_code == 200
    text = response.content.decode()
    assert "<div>child.say.output.name: &quot;ann&quot; → &quot;bob&quot;</div>" in text
    child = Run.objects.get(trigger="replay", parent_run__isnull=False)
    page = admin_client.get(f"/admin/runs/run/{child.pk}/change/").content.decode()
    recorded_child = child_of(validated)
    assert (
        f'replays <a href="/admin/runs/run/{recorded_child.pk}/change/">recorded child run '
        f"{recorded_child.pk}</a>"
    ) in page


def test_a_childs_call_with_no_recording_fails_it_never_sent(validated, echo):
    ToolCallRecording.objects.filter(step_result__run=child_of(validated)).delete()

    report = version_replay(version=validated.workflow)

    assert report.replay_run.status == "failed"
    child = child_of(report.replay_run)
    assert child.status == "failed"
    error = results_of(child)["say"].error
    assert error["type"] == "replay_unrecorded"
    assert "recorded no further call of this step" in error["message"]
    sub = next(s for s in report.steps if s.step_id == "sub")
    assert "status: succeeded in the validation run, failed in the replay" in sub.differences
    assert any(
        line.startswith("child.say.error (replay_unrecorded): step `say` sent GET")
        for line in sub.differences
    ), sub.differences


def test_a_step_whose_validation_run_started_no_child_fails_unrecorded(validated):
    Run.objects.filter(parent_run=validated).delete()

    report = version_replay(version=validated.workflow)

    assert report.replay_run.status == "failed"
    assert not Run.objects.filter(parent_run=report.replay_run).exists()  # nothing run
    error = results_of(report.replay_run)["sub"].error
    assert error["type"] == "replay_unrecorded"
    assert error["message"].startswith(
        f"step `sub` runs workflow `greet`, but run {validated.pk} (replayed) recorded no "
        "child run of this step; the child was not run"
    )


def test_a_recorded_call_the_child_never_made_is_listed_under_the_parent_step(validated):
    [say] = recorded(child_of(validated), "say")
    say.pk = None
    say.save()  # the same call recorded twice: the replay makes it once

    report = version_replay(version=validated.workflow)

    sub = next(s for s in report.steps if s.step_id == "sub")
    assert len(sub.differences) == 1
    assert sub.differences[0].startswith(
        "child.say: recorded call not made in the replay: GET http://127.0.0.1:"
    )


def test_nested_sub_workflows_are_replayed_level_by_level(echo, approver):
    approve(child_flow(), approver, {"tag": "c0"})
    approve(caller_flow("middle", "greet"), approver, {"tag": "m0"})
    top = approve(caller_flow("top", "middle"), approver, {"tag": "deep"})
    validation = Run.objects.get(workflow=top, trigger="validation")
    leaf = child_of(child_of(validation))
    assert [r.status for r in recorded(leaf, "say")] == [200]
    echo.stop()
    [say] = recorded(leaf, "say")
    ToolCallRecording.objects.filter(pk=say.pk).update(
        response_body=json.dumps({"tag": "DEEP", "name": "kid"})
    )

    report = version_replay(version=top)

    middle = child_of(report.replay_run)
    greet = child_of(middle)
    assert (middle.trigger, middle.replay_of) == ("replay", child_of(validation))
    assert (greet.trigger, greet.replay_of) == ("replay", leaf)
    [sub] = report.steps
    assert sub.differences == (
        'output.tag: "deep" → "DEEP"',
        'child.sub.output.loud: "deep!kid" → "DEEP!kid"',  # middle's step: greet's outputs
        'child.sub.output.tag: "deep" → "DEEP"',
        'child.sub.child.say.output.tag: "deep" → "DEEP"',
        'child.sub.child.shout.output.loud: "deep!kid" → "DEEP!kid"',
    )


HEARD: list[int] = []


def heard(*, run_id: int, **_: object) -> None:
    """A run-finished hook that only remembers which runs it heard of."""
    HEARD.append(run_id)
