"""Operating runs on real Celery workers: restart from a step, and validation runs.

Named after the feature: a restart and an approval's validation run go through the same
driver as every run — with a broker, the Celery workers (two ``celery worker``
subprocesses on Redis and the shared PostgreSQL database). The steps call a recording
loopback server, so "reused, no call" is counted. Never on SQLite.
"""

from __future__ import annotations

from collections import Counter

import pytest

from review.models import Approval
from review.services import workflow_approve
from runs.models import Run, ToolCallRecording
from runs.replay.services import version_replay
from runs.restart import run_restart
from runs.services import run_create, run_enqueue
from tests.celery_support import fan_out_flow, import_flow, wait_until
from tests.factories import WorkflowFactory
from tests.runs.subflows import activate, child_flow, parent_flow
from tests.runs.test_celery_workers import finished
from workflows.models import Workflow, WorkflowStatus

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers", "echo_tools"),
]


def sent(fake, tag: str) -> Counter[str]:
    return Counter(r.segments[2] for r in fake.requests("echo") if r.segments[1] == tag)


def test_a_restart_from_a_step_runs_on_the_workers_and_reuses_the_rest(workers, echo_tools):
    workflow = import_flow(fan_out_flow("restart_wk", 3, delay=0.1))
    first = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"tag": "rs"}))
    first = finished(first, cluster=workers)
    assert first.status == "succeeded", first.error_summary
    echo_tools.clear()

    again = run_restart(run=first, from_step="s02")

    assert again.status in {"pending", "running"}  # queued, not run in this process
    again = finished(again, cluster=workers)
    assert again.status == "succeeded", again.error_summary
    assert sent(echo_tools, "rs") == {"n02": 1}  # s01 and s03 reused: no call
    rows = {r.step_id: r for r in again.step_results.all()}
    assert {s for s, r in rows.items() if r.reused} == {"s01", "s03"}
    assert rows["s02"].attempt_log[0]["worker"] in {workers.node("w1"), workers.node("w2")}
    assert again.outputs == first.outputs
    assert again.restarted_from_id == first.pk


def test_a_restart_over_the_api_is_queued_on_the_workers(workers, echo_tools):
    from tests.api.conftest import client_for
    from tests.factories import UserFactory

    workflow = import_flow(fan_out_flow("restart_api_wk", 3, delay=0.1))
    first = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"tag": "ra"}))
    first = finished(first, cluster=workers)
    assert first.status == "succeeded", first.error_summary
    echo_tools.clear()
    client = client_for(UserFactory(username="api-ops", superuser=True))

    response = client.post(f"/api/v1/runs/{first.pk}/restart/", {"from_step": "s03"}, format="json")

    body = response.json()
    assert response.status_code == 201, body
    assert body["status"] in {"pending", "running"}  # queued like POST /runs/, not run here
    again = finished(Run.objects.get(pk=body["id"]), cluster=workers)
    assert again.status == "succeeded", again.error_summary
    assert sent(echo_tools, "ra") == {"n03": 1}  # s01 and s02 reused: no call
    rows = {r.step_id: r for r in again.step_results.all()}
    assert rows["s03"].attempt_log[0]["worker"] in {workers.node("w1"), workers.node("w2")}
    assert (again.trigger, again.restarted_from_id) == ("api", first.pk)


def test_a_validation_run_runs_on_the_workers_and_activates_the_version(
    workers, echo_tools, approver
):
    version = WorkflowFactory(
        data=fan_out_flow("validate_wk", 2, delay=0.2), status=WorkflowStatus.PENDING_REVIEW
    )

    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={"tag": "v"})

    assert approval.status == "validating"  # handed to the workers, not run here
    run = approval.validation_run
    run = finished(run, cluster=workers)
    assert run.status == "succeeded", run.error_summary
    workers_used = {r.attempt_log[0]["worker"] for r in run.step_results.exclude(step_id="join")}
    assert workers_used <= {workers.node("w1"), workers.node("w2")}

    def settled():
        return Approval.objects.filter(pk=approval.pk, status="passed").exists()

    wait_until(settled, timeout=30, what="the hook to settle the approval")
    assert Workflow.objects.get(pk=version.pk).status == "active"
    assert sent(echo_tools, "v") == {"n01": 1, "n02": 1}
    assert Run.objects.filter(trigger="validation").count() == 1
    recorded = ToolCallRecording.objects.filter(step_result__run=run).order_by("url")
    assert [(r.step_result.step_id, r.status) for r in recorded] == [("s01", 200), ("s02", 200)]

    report = version_replay(version=version)  # offline, against what the workers recorded

    assert report.matched, report.as_dict()


def test_a_validation_runs_child_on_the_workers_records_its_calls_and_replays_offline(
    workers, echo_tools, approver
):
    activate(child_flow())
    version = WorkflowFactory(data=parent_flow("outer_wk"), status=WorkflowStatus.PENDING_REVIEW)

    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={"tag": "sv"})

    assert approval.status == "validating"  # handed to the workers, not run here
    run = finished(approval.validation_run, cluster=workers)
    assert run.status == "succeeded", run.error_summary
    child = Run.objects.get(parent_run=run)
    say = child.step_results.get(step_id="say")
    assert say.attempt_log[0]["worker"] in {workers.node("w1"), workers.node("w2")}
    [recorded] = ToolCallRecording.objects.filter(step_result=say)  # stored by the worker
    assert (recorded.method, recorded.status) == ("GET", 200)
    assert "/echo/sv/ann" in recorded.url
    echo_tools.clear()

    report = version_replay(version=version)  # offline, in this process

    assert report.matched, report.as_dict()
    replayed = Run.objects.get(parent_run=report.replay_run)
    assert (replayed.trigger, replayed.replay_of) == ("replay", child)
    assert echo_tools.requests() == []  # the replay child answered from the recordings


def item_flow(name: str) -> dict:
    """One ``foreach`` over ``$input.names``, an ``echo`` per item, one item at a time."""
    return {
        "name": name,
        "inputs": {"names": {"type": "array"}},
        "steps": [
            {"id": "each", "kind": "foreach", "tool": "echo", "max_parallel": 1,
             "input_mapping": {"items": "$input.names", "tag": "items", "delay": 0},
             "item_mapping": {"name": "$item"}},
        ],
        "outputs": {"count": "each.count"},
    }  # fmt: skip


@pytest.mark.parametrize("how", ["restart", "resume"])
def test_a_failed_foreach_calls_only_its_failed_items_again_on_the_workers(
    workers, echo_tools, how
):
    from runs.services import run_resume

    workflow = import_flow(item_flow(f"items_wk_{how}"))
    names = [f"n{i:02d}" for i in range(20)]
    echo_tools.fail("echo", status=404, times=3)  # fatal: the first 3 items fail
    first = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"names": names}))
    first = finished(first, cluster=workers)
    assert first.status == "failed"
    assert len(echo_tools.requests("echo")) == 20
    echo_tools.heal()
    echo_tools.clear()

    again = run_restart(run=first, from_step="each") if how == "restart" else run_resume(run=first)
    again = finished(again, cluster=workers)

    assert again.status == "succeeded", again.error_summary
    assert sorted(sent(echo_tools, "items")) == ["n00", "n01", "n02"]  # exactly the 3 failed
    assert sum(sent(echo_tools, "items").values()) == 3
    each = again.step_results.get(step_id="each")
    assert [item["name"] for item in each.output["items"]] == names
    assert each.output["errors"] == []
