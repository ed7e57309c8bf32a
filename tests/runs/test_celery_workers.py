"""Runs on real Celery workers: Redis as broker and result backend, PostgreSQL shared.

Named after the feature, not a module: real workers exercise the whole Celery driver.

Two ``celery worker`` subprocesses (``w1``, ``w2``: prefork, concurrency 4) consume a
queue of this module; this process enqueues runs and watches the database. The
steps call a recording HTTP server on loopback, so every assertion about "ran once"
counts the requests it received. These tests never run on SQLite.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
import yaml

from runs.models import Run, StepResult
from runs.services import run_create, run_enqueue
from tests.celery_support import fan_out_flow, import_flow, wait_until
from tests.conftest import statuses

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers", "echo_tools"),
]

RUN_TIMEOUT = 60


def enqueue(workflow, tag: str) -> Run:
    run = run_create(workflow=workflow, trigger="api", inputs={"tag": tag})
    return run_enqueue(run=run)


def finished(run: Run, *, timeout: float = RUN_TIMEOUT, cluster=None) -> Run:
    """Wait until the run and all its steps are at rest, then return it fresh."""

    def done():
        run.refresh_from_db()
        settled = not run.step_results.filter(status__in=["queued", "running"]).exists()
        return run.status in {"succeeded", "failed", "cancelled"} and settled

    try:
        wait_until(done, timeout=timeout, what=f"run {run.pk} to finish")
    except AssertionError:
        logs = cluster.logs() if cluster else ""
        raise AssertionError(f"run {run.pk} is {run.status}: {statuses(run)}\n{logs}") from None
    return run


def step_rows(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def requests_by_name(fake, tag: str) -> Counter[str]:
    """How many requests each step (by its ``name`` parameter, ``n01``…) sent for ``tag``."""
    return Counter(r.segments[2] for r in fake.requests("echo") if r.segments[1] == tag)


def assert_each_step_succeeded_once(run: Run, fake, tag: str, width: int) -> None:
    rows = step_rows(run)
    assert {sid: r.status for sid, r in rows.items()} == dict.fromkeys(rows, "succeeded")
    for row in rows.values():
        assert [e["status"] for e in row.attempt_log] == ["succeeded"], row.step_id
    assert requests_by_name(fake, tag) == {f"n{i:02d}": 1 for i in range(1, width + 1)}


# --- fan-out over two workers ---------------------------------------------------------


def test_fan_out_steps_execute_on_both_workers(workers, echo_tools):
    workflow = import_flow(fan_out_flow("fan_out", 12, delay=0.4))

    run = finished(enqueue(workflow, "wide"), cluster=workers)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"tags": ["wide"] * 12, "first": "n01"}
    assert_each_step_succeeded_once(run, echo_tools, "wide", 12)
    hosts = {row.attempt_log[0]["worker"] for row in step_rows(run).values()}
    assert hosts == {workers.node("w1"), workers.node("w2")}


def test_runflow_async_queues_the_run_and_returns_at_once(workers, echo_tools, cli, tmp_path):
    path = tmp_path / "fan.yaml"
    path.write_text(yaml.safe_dump(fan_out_flow("fan_async", 4, delay=0.3)), encoding="utf-8")

    result = cli("runflow", str(path), "--async", "--input", "tag=async")

    assert result.code == 0, result.err
    run = Run.objects.get()
    assert result.lines[0] == f"run {run.pk}: fan_async v1, 5 steps"
    assert f"run {run.pk} queued on the Celery workers" in result.out
    run = finished(run, cluster=workers)
    assert run.status == "succeeded"
    assert run.outputs["tags"] == ["async"] * 4


def test_the_admin_run_again_action_queues_a_new_run_on_the_workers(
    workers, echo_tools, admin_client
):
    workflow = import_flow(fan_out_flow("again", 3, delay=0.2))
    first = finished(enqueue(workflow, "once"), cluster=workers)

    response = admin_client.post(
        "/admin/runs/run/",
        {"action": "run_again", "_selected_action": [first.pk]},
        follow=True,
    )

    again = Run.objects.exclude(pk=first.pk).get()
    assert [str(m) for m in response.context["messages"]] == [
        f"1 new run started: run {again.pk} (running)."
    ]
    again = finished(again, cluster=workers)
    assert again.status == "succeeded"
    assert again.trigger == "manual"
    assert again.outputs == {"tags": ["once"] * 3, "first": "n01"}


# --- retries and time limits ----------------------------------------------------------


def test_a_retry_is_a_celery_retry_and_every_attempt_is_recorded(workers, echo_tools):
    echo_tools.fail("echo", status=503, times=2)
    workflow = import_flow(fan_out_flow("retrying", 1))

    run = finished(enqueue(workflow, "again"), cluster=workers)

    assert run.status == "succeeded", run.error_summary
    row = step_rows(run)["s01"]
    assert row.attempts == 3
    assert [e["status"] for e in row.attempt_log] == ["failed", "failed", "succeeded"]
    assert [e.get("retry_in") for e in row.attempt_log] == [0.05, 0.1, None]
    assert {e["worker"] for e in row.attempt_log} <= {workers.node("w1"), workers.node("w2")}
    assert [r.status for r in echo_tools.requests("echo")] == [503, 503, 200]


def test_a_step_timeout_is_enforced_by_the_soft_time_limit(workers, echo_tools):
    flow = {
        "name": "too_slow",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "slow",
                "kind": "tool",
                "tool": "trickle",
                "timeout": 1,
                "input_mapping": {"tag": "$input.tag"},
            }
        ],
    }

    run = finished(enqueue(import_flow(flow), "slow"), cluster=workers)

    row = step_rows(run)["slow"]
    assert run.status == "failed"
    assert row.status == "failed"
    assert row.error["type"] == "tool_timeout"
    assert row.error["message"] == "step `slow` ran past its 1 s timeout"
    assert len(echo_tools.requests("trickle")) == 1


# --- cancel ---------------------------------------------------------------------------


def test_cancelrun_stops_a_running_run_and_its_queued_steps_never_start(workers, echo_tools, cli):
    release = echo_tools.hold("echo")  # the calls stay in flight until the run is cancelled
    workflow = import_flow(fan_out_flow("cancel_me", 12))
    run = enqueue(workflow, "stop")
    wait_until(
        lambda: len(echo_tools.requests("echo")) >= 8,  # 4 per worker: both busy
        timeout=60,
        what="both workers to be busy",
    )

    result = cli("cancelrun", str(run.pk))
    release.set()

    assert result.code == 0, result.err
    assert f"run {run.pk} cancelled" in result.out
    run = finished(run, cluster=workers)
    assert run.status == "cancelled"
    rows = step_rows(run)
    skipped = {sid for sid, r in rows.items() if r.status == "skipped"}
    ran = {sid for sid, r in rows.items() if r.status == "succeeded"}
    assert "join" in skipped
    assert len(ran) == 8  # the calls in flight at the cancel (4 per worker) finish
    assert len(skipped) == 5  # the 4 steps still queued, and the join
    assert ran | skipped == set(rows)
    sent = requests_by_name(echo_tools, "stop")
    assert sent == {f"n{sid[1:]}": 1 for sid in ran}  # a skipped step never called out


# --- isolation ------------------------------------------------------------------------


def test_two_runs_of_the_same_workflow_at_once_do_not_mix(workers, echo_tools):
    workflow = import_flow(fan_out_flow("twins", 6, delay=0.2))

    left, right = enqueue(workflow, "left"), enqueue(workflow, "right")
    left, right = finished(left, cluster=workers), finished(right, cluster=workers)

    for run, tag in ((left, "left"), (right, "right")):
        assert run.status == "succeeded", run.error_summary
        assert run.outputs == {"tags": [tag] * 6, "first": "n01"}
        assert_each_step_succeeded_once(run, echo_tools, tag, 6)
        assert {r.inputs["tag"] for r in run.step_results.exclude(step_id="join")} == {tag}


def test_fifty_runs_queued_together_finish_with_their_own_outputs(workers, echo_tools):
    workflow = import_flow(fan_out_flow("crowd", 3, delay=0.02))
    tags = [f"run{i:02d}" for i in range(50)]

    runs = [enqueue(workflow, tag) for tag in tags]
    runs = [finished(run, timeout=180, cluster=workers) for run in runs]

    for run, tag in zip(runs, tags, strict=True):
        assert run.status == "succeeded", (tag, run.error_summary)
        assert run.outputs == {"tags": [tag] * 3, "first": "n01"}
        assert requests_by_name(echo_tools, tag) == {"n01": 1, "n02": 1, "n03": 1}
    assert len(echo_tools.requests("echo")) == 150


# --- the sweeper ----------------------------------------------------------------------


def test_the_sweeper_task_reports_through_the_result_backend(workers):
    from runs.tasks import sweep_steps

    counts = sweep_steps.delay().get(timeout=30)

    assert counts == {"republished": 0, "requeued": 0, "failed": 0, "abandoned": 0}


@pytest.fixture
def beat(workers):
    """Celery beat (the database scheduler), sending the sweeper every second."""
    process = workers.start_beat()
    yield process
    workers.stop("beat")


def test_a_worker_killed_mid_run_loses_no_step_and_repeats_none_that_succeeded(
    workers, echo_tools, beat
):
    """``kill -9`` of w2 (and its pool) while it runs steps; beat's sweeper recovers them."""
    workflow = import_flow(fan_out_flow("survivor", 16, delay=1.0))
    run = enqueue(workflow, "kill")
    w2 = workers.node("w2")

    def w2_busy_after_first_successes() -> bool:
        rows = list(run.step_results.all())
        return any(r.status == "succeeded" for r in rows) and any(
            r.status == "running" and r.worker == w2 for r in rows
        )

    wait_until(w2_busy_after_first_successes, timeout=30, what="w2 mid-run")
    workers.kill("w2")
    killed_at = time.monotonic()
    at_kill = {r.step_id: (r.status, r.worker) for r in run.step_results.all()}
    interrupted = {sid for sid, (status, worker) in at_kill.items() if status == "running"}
    succeeded_before = {sid for sid, (status, _) in at_kill.items() if status == "succeeded"}

    run = finished(run, timeout=90, cluster=workers)

    assert run.status == "succeeded", (run.error_summary, workers.logs())
    assert run.outputs == {"tags": ["kill"] * 16, "first": "n01"}
    assert interrupted
    assert succeeded_before
    rows = step_rows(run)
    assert {r.status for r in rows.values()} == {"succeeded"}
    for sid, row in rows.items():
        outcomes = [e["status"] for e in row.attempt_log]
        assert outcomes.count("succeeded") == 1, (sid, row.attempt_log)
        if sid == "join":
            continue
        calls = [
            r for r in echo_tools.requests("echo") if r.segments[1:] == ["kill", f"n{sid[1:]}"]
        ]
        redone = [r for r in calls if r.received_at >= killed_at]
        if sid in interrupted and at_kill[sid][1] == w2:
            # In flight on w2 when it died: logged as lost, then made once more on w1.
            assert outcomes == ["lost", "succeeded"], (sid, row.attempt_log)
            assert row.attempt_log[0]["worker"] == w2
            assert row.attempt_log[1]["worker"] == workers.node("w1")
            assert len(redone) == 1, (sid, calls)
            assert len(calls) <= 2, (sid, calls)
        else:
            assert outcomes == ["succeeded"], (sid, row.attempt_log)
            assert len(calls) == 1, (sid, calls)
    for sid in succeeded_before:
        assert step_rows(run)[sid].finished_at < run.finished_at
