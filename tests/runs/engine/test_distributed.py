"""The Celery driver's rules, in process: claims, retries, the coordinator, the sweeper, cancel.

A ``Bus`` stands in for the broker: it records what the services publish and
delivers it to ``step_execute`` the way a worker would. Real workers on Redis are
in ``test_celery_workers.py``; these run on both databases.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.engine import caches
from runs.engine.celery import claim as celery_claim
from runs.engine.celery import settle as celery_settle
from runs.engine.celery import step as celery_step
from runs.engine.celery import sweep
from runs.engine.celery.run import run_start
from runs.models import Run, StepResult
from runs.services import run_cancel, run_create, run_enqueue
from tests.celery_support import Bus, fan_out_flow, import_flow
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "w-test@local"


def started(data: dict, tag: str = "alpha") -> tuple[Run, Bus]:
    bus = Bus()
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": tag})
    run_start(run=run, publish=bus)
    return run, bus


def results(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def by_id(run: Run) -> dict[int, str]:
    return dict(run.step_results.values_list("pk", "step_id"))


# --- the coordinator ------------------------------------------------------------------


def test_run_start_queues_the_ready_steps_and_publishes_one_message_each(echo_api):
    run, bus = started(fan_out_flow("fan", 3))

    rows = results(run)
    run.refresh_from_db()
    assert run.status == "running"
    assert {sid: r.status for sid, r in rows.items()} == {
        "join": "pending",
        "s01": "queued",
        "s02": "queued",
        "s03": "queued",
    }
    names = by_id(run)
    assert sorted(names[m.step_result_id] for m in bus.published) == ["s01", "s02", "s03"]
    for sid in ("s01", "s02", "s03"):
        assert rows[sid].attempt_limit == 3  # the echo tool's policy
        assert rows[sid].lease_expires_at > timezone.now()
    assert echo_api.requests() == []  # nothing runs before a worker takes it


def test_draining_runs_every_step_once_and_logs_the_worker_of_each_attempt(echo_api):
    run, bus = started(fan_out_flow("fan", 3), tag="alpha")

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"tags": ["alpha"] * 3, "first": "n01"}
    assert [v.status for v in verdicts] == ["succeeded"] * 4
    for row in results(run).values():
        assert row.status == "succeeded"
        assert row.attempts == 1
        assert [e["worker"] for e in row.attempt_log] == [WORKER]
        assert row.worker == WORKER
    assert sorted(r.path for r in echo_api.requests("echo")) == [
        "/echo/alpha/n01",
        "/echo/alpha/n02",
        "/echo/alpha/n03",
    ]
    assert results(run)["s02"].inputs == {"tag": "alpha", "name": "n02", "delay": 0.0}


def test_the_join_is_queued_only_when_its_last_parent_finishes(echo_api):
    run, bus = started(fan_out_flow("fan", 2))
    first, second = bus.messages[:2]
    bus.messages.clear()

    celery_step.step_execute(step_result_id=first.step_result_id, worker=WORKER, publish=bus)
    assert bus.messages == []
    assert results(run)["join"].status == "pending"
    verdict = celery_step.step_execute(
        step_result_id=second.step_result_id, worker=WORKER, publish=bus
    )

    # The join, the one step the last parent made ready, runs in that parent's task.
    assert bus.messages == []
    assert [v.status for v in verdict.continued] == ["succeeded"]
    assert results(run)["join"].status == "succeeded"
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_duplicate_message_loses_the_claim_and_calls_nothing(echo_api):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages[0]

    bus.drain(worker=WORKER)
    again = celery_step.step_execute(
        step_result_id=message.step_result_id, worker="late@local", publish=bus
    )

    assert again.claimed is False
    assert len(echo_api.requests("echo")) == 1
    assert results(run)["s01"].attempt_log[0]["worker"] == WORKER


def test_steps_with_a_timeout_are_published_with_it_as_their_time_limit(echo_api):
    _, bus = started(fan_out_flow("fan", 1, timeout=2.5))

    assert [m.time_limit for m in bus.messages] == [2.5]


def branch_flow() -> dict:
    """``pick`` decides on the tag; only the chosen branch calls out."""

    def echo(sid: str) -> dict:
        return {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {"tag": "$input.tag", "name": sid, "delay": 0},
        }

    return {
        "name": "branchy",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "pick",
                "kind": "decision",
                "branches": ["left", "right"],
                "input_mapping": {"tag": "$input.tag"},
                "conditions": {"left": "tag == 'alpha'"},
                "default": "right",
            },
            echo("go_left"),
            echo("go_right"),
        ],
        "edges": [
            {"from": "pick", "to": "go_left", "when": "left"},
            {"from": "pick", "to": "go_right", "when": "right"},
        ],
    }


@pytest.mark.parametrize(
    ("tag", "taken", "skipped"), [("alpha", "go_left", "go_right"), ("beta", "go_right", "go_left")]
)
def test_a_decision_queues_only_the_branch_it_took(echo_api, tag, taken, skipped):
    run, bus = started(branch_flow(), tag=tag)

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    rows = results(run)
    assert run.status == "succeeded", run.error_summary
    assert rows[taken].status == "succeeded"
    assert rows[skipped].status == "skipped"
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/{tag}/{taken}"]


# --- retries and failures -------------------------------------------------------------


def test_a_retryable_failure_goes_back_to_queued_with_the_policy_countdown(echo_api):
    echo_api.fail("echo", status=503, times=2)
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)

    first = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )
    row = results(run)["s01"]
    assert (first.status, first.retry_in) == ("queued", 0.05)  # initial_delay, no jitter
    assert (row.status, row.attempts, row.claim_token) == ("queued", 1, "")
    assert row.attempt_log[0]["retry_in"] == 0.05
    assert row.attempt_log[0]["error"]["type"] == "http_error"
    assert row.lease_expires_at > timezone.now()

    second = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )
    assert second.retry_in == 0.1  # doubled
    bus(message.step_result_id, countdown=second.retry_in)
    bus.drain(worker=WORKER)

    row = results(run)["s01"]
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert row.attempts == 3
    assert [e["status"] for e in row.attempt_log] == ["failed", "failed", "succeeded"]
    assert [r.status for r in echo_api.requests("echo")] == [503, 503, 200]


def test_out_of_attempts_fails_the_step_and_the_run_and_starts_nothing_else(echo_api):
    echo_api.fail("echo", status=503)
    run, bus = started(fan_out_flow("fan", 1))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    rows = results(run)
    assert run.status == "failed"
    assert "step `s01` failed (http_error)" in run.error_summary
    assert (rows["s01"].status, rows["s01"].attempts) == ("failed", 3)
    assert rows["join"].status == "skipped"  # its only parent failed
    assert len(echo_api.requests("echo")) == 3


def test_a_fatal_error_is_not_retried(echo_api):
    echo_api.fail("echo", status=404)
    run, bus = started(fan_out_flow("fan", 1))

    verdicts = bus.drain(worker=WORKER)

    assert [v.status for v in verdicts] == ["failed"]
    assert results(run)["s01"].attempts == 1


FINISHED: list[int] = []  # run ids the test hook below was told about


def finished_hook(*, run_id: int, **_) -> None:
    FINISHED.append(run_id)


def test_a_step_whose_run_context_cannot_be_built_fails_the_run_instead_of_waiting(
    echo_api, settings
):
    settings.FLOWPILOT_RUN_FINISHED_HOOKS = [f"{__name__}.finished_hook"]
    FINISHED.clear()
    run, bus = started(fan_out_flow("fan", 1))
    Workflow.objects.filter(pk=run.workflow_id).update(definition={"name": "fan", "steps": 3})
    caches.caches_clear()  # this process parsed and compiled the good definition already

    verdicts = bus.drain(worker=WORKER)

    assert [v.status for v in verdicts] == ["failed"]
    step = results(run)["s01"]
    assert (step.status, step.error["type"]) == ("failed", "workflow_error")
    run.refresh_from_db()
    assert run.status == "failed"
    assert "could not start" in run.error_summary
    assert echo_api.requests() == []
    assert [run.pk] == FINISHED  # announced like any finished run (reports, parents, approvals)


def test_an_output_stored_truncated_fails_the_step_that_reads_it(echo_api, settings):
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 10  # every echo answer is stored as a preview
    run, bus = started(fan_out_flow("fan", 1))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    rows = results(run)
    assert rows["s01"].status == "succeeded"
    assert rows["s01"].output["_truncated"] is True
    assert rows["join"].status == "failed"
    assert rows["join"].error["type"] == "checkpoint_truncated"
    assert "reads the output of `s01`, which was stored truncated" in rows["join"].error["message"]
    assert run.status == "failed"


# --- cancel ---------------------------------------------------------------------------


def test_cancel_skips_queued_steps_so_their_messages_never_start(echo_api):
    run, bus = started(fan_out_flow("fan", 3))

    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [v.claimed for v in verdicts] == [False, False, False]
    assert {r.status for r in results(run).values()} == {"skipped"}
    assert echo_api.requests() == []


def test_a_step_in_flight_when_the_run_is_cancelled_finishes_and_nothing_follows(echo_api):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)
    token = celery_claim.claim_step(message.step_result_id, worker=WORKER)
    assert token
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True

    verdict = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )

    assert verdict.claimed is False  # the running step was not claimable twice
    rows = results(run)
    assert rows["s01"].status == "running"
    assert rows["join"].status == "skipped"


# --- the sweeper ----------------------------------------------------------------------


def later(seconds: float):
    return timezone.now() + timedelta(seconds=seconds)


def test_the_sweeper_publishes_again_a_queued_step_whose_message_was_lost(echo_api, settings):
    run, bus = started(fan_out_flow("fan", 1))
    bus.messages.clear()  # the broker lost it

    assert sweep.steps_sweep(now=later(5), publish=bus) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }
    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_QUEUED_LEASE + 1), publish=bus)
    assert counts["republished"] == 1
    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert len(echo_api.requests("echo")) == 1


def test_when_the_broker_forgot_queued_steps_are_published_again_before_their_lease(echo_api):
    run, bus = started(fan_out_flow("fan", 2))
    bus.messages.clear()  # Redis restarted without persistence, or was flushed

    assert sweep.steps_sweep(now=later(5), publish=bus, broker_lost=lambda: False) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }
    counts = sweep.steps_sweep(now=later(5), publish=bus, broker_lost=lambda: True)
    assert counts["republished"] == 2
    bus.drain(worker=WORKER)
    bus.drain(worker=WORKER)  # a duplicate message, had one survived, loses its claim

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert len(echo_api.requests("echo")) == 2  # nothing ran twice


def test_a_step_lost_with_its_worker_runs_again_and_the_late_result_is_ignored(echo_api, settings):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)
    dead_token = celery_claim.claim_step(message.step_result_id, worker="dead@local")

    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)
    assert counts["requeued"] == 1
    row = results(run)["s01"]
    assert (row.status, row.attempts, row.attempt_limit) == ("queued", 1, 4)
    assert row.attempt_log[0]["status"] == "lost"
    assert row.attempt_log[0]["error"]["type"] == "worker_lost"
    assert row.attempt_log[0]["worker"] == "dead@local"

    bus.drain(worker=WORKER)
    stale = celery_settle.settle_not_started(row, dead_token)  # the dead worker wakes up

    run.refresh_from_db()
    row = results(run)["s01"]
    assert stale.claimed is True
    assert run.status == "succeeded"
    assert row.status == "succeeded"
    assert [e["worker"] for e in row.attempt_log] == ["dead@local", WORKER]


def test_a_lost_non_idempotent_step_is_failed_for_review_not_repeated(echo_api, settings):
    flow = {
        "name": "post_once",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {"id": "post", "kind": "tool", "tool": "sink", "input_mapping": {"tag": "$input.tag"}}
        ],
    }
    run, bus = started(flow)
    celery_claim.claim_step(bus.messages.pop(0).step_result_id, worker="dead@local")

    counts = sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)

    run.refresh_from_db()
    row = results(run)["post"]
    assert counts["failed"] == 1
    assert bus.messages == []
    assert row.status == "failed"
    assert row.error["type"] == "interrupted_non_idempotent"
    assert run.status == "failed"
    assert "interrupted_non_idempotent" in run.error_summary


def test_a_step_lost_too_often_is_failed(echo_api, settings):
    settings.FLOWPILOT_MAX_LOST_ATTEMPTS = 2
    run, bus = started(fan_out_flow("fan", 1))
    step_result_id = bus.messages.pop(0).step_result_id
    for _ in range(2):
        bus.messages.clear()
        celery_claim.claim_step(step_result_id, worker="dead@local")
        sweep.steps_sweep(now=later(settings.FLOWPILOT_STEP_LEASE + 1), publish=bus)

    row = results(run)["s01"]
    assert row.status == "failed"
    assert row.error["type"] == "worker_lost"
    assert "lost 2 times" in row.error["message"]
    assert echo_api.requests() == []


def test_in_process_steps_are_never_swept(echo_api):
    from tests.conftest import EXAMPLES_DIR
    from workflows.files import read_workflow_file

    workflow = import_flow(read_workflow_file(EXAMPLES_DIR / "sales_report.yaml"))
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={}))

    assert run.status == "succeeded"  # no broker: it ran here, as before
    assert sweep.steps_sweep(now=later(10**6)) == {
        "republished": 0,
        "requeued": 0,
        "failed": 0,
        "abandoned": 0,
    }


# --- concurrency (PostgreSQL row locks) -----------------------------------------------


def test_two_parents_finishing_at_once_queue_the_join_exactly_once(echo_api):
    if connection.vendor != "postgresql":
        pytest.skip("row locks (select_for_update) need PostgreSQL; SQLite serialises writers")
    for attempt in range(5):
        run, bus = started(fan_out_flow(f"pair{attempt}", 2, delay=0.05))
        messages = list(bus.messages)
        bus.messages.clear()
        barrier = threading.Barrier(2)
        verdicts: list = []

        def work(message, barrier=barrier, bus=bus, verdicts=verdicts) -> None:
            try:
                barrier.wait()
                verdicts.append(
                    celery_step.step_execute(
                        step_result_id=message.step_result_id, worker=WORKER, publish=bus
                    )
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=work, args=(m,)) for m in messages]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

        # The join ran once, in the task of whichever parent settled last.
        assert bus.messages == []
        assert sorted(len(v.continued) for v in verdicts) == [0, 1]
        assert results(run)["join"].attempts == 1
        run.refresh_from_db()
        assert run.status == "succeeded"
