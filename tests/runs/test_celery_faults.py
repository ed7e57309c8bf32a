"""Faults on real Celery workers: database connections cut mid-call, NUL data, kill -9.

Named after the feature, not a module. Two real workers (and beat's sweeper where a
test needs it) share this test's PostgreSQL database; the steps call a recording HTTP
server on loopback, so "recorded once" and "called once" are counted, not assumed.
These tests never run on SQLite.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from runs.models import Run, StepResult
from runs.services import run_create, run_enqueue
from tests.celery_support import fan_out_flow, import_flow, wait_until
from tests.runs.test_celery_workers import finished, requests_by_name, step_rows
from tools.jsondata import store_unescape

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers", "echo_tools"),
]


@pytest.fixture
def beat(workers):
    process = workers.start_beat()
    yield process
    workers.stop("beat")


def terminate_other_backends() -> int:
    """``pg_terminate_backend`` on every other connection to this database (the workers')."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def enqueue(data: dict, tag: str = "") -> Run:
    inputs = {"tag": tag} if "inputs" in data else {}
    run = run_create(workflow=import_flow(data), trigger="api", inputs=inputs)
    return run_enqueue(run=run)


def post_flow(delay: float) -> dict:
    return {
        "name": "post_through_a_blip",
        "steps": [
            {
                "id": "post",
                "kind": "tool",
                "tool": "slow_sink",
                "input_mapping": {"tag": "blip", "delay": delay},
            },
            {
                "id": "after",
                "kind": "tool",
                "tool": "echo",
                "input_mapping": {"tag": "blip", "name": "after", "delay": 0},
            },
        ],
        "edges": [{"from": "post", "to": "after"}],
        "outputs": {"received": "post.received", "after": "after.name"},
    }


def test_connections_cut_while_a_post_is_in_flight_its_outcome_is_recorded_once(
    workers, echo_tools, beat
):
    run = enqueue(post_flow(delay=2.0))
    wait_until(lambda: echo_tools.requests("sink"), timeout=30, what="the POST to arrive")

    assert terminate_other_backends() >= 1

    run = finished(run, timeout=60, cluster=workers)
    assert run.status == "succeeded", (run.error_summary, workers.logs())
    assert run.outputs == {"received": True, "after": "after"}
    assert len(echo_tools.requests("sink")) == 1
    post = step_rows(run)["post"]
    assert [e["status"] for e in post.attempt_log] == ["succeeded"], post.attempt_log


def test_connections_cut_again_and_again_no_idempotent_step_runs_twice(workers, echo_tools, beat):
    width = 10
    run = enqueue(fan_out_flow("blips", width, delay=1.0), tag="blips")
    for _ in range(3):
        wait_until(
            lambda: run.step_results.filter(status="running").exists(),
            timeout=30,
            what="steps in flight",
        )
        terminate_other_backends()

    run = finished(run, timeout=90, cluster=workers)
    assert run.status == "succeeded", (run.error_summary, workers.logs())
    calls = requests_by_name(echo_tools, "blips")
    tries = {step: [e["status"] for e in row.attempt_log] for step, row in step_rows(run).items()}
    # On a failure, say which path ran a step again: the tries, then the workers' warnings
    # (a string, which pytest shows whole).
    expected = {f"n{i:02d}": 1 for i in range(1, width + 1)}
    assert calls == expected, f"calls {dict(calls)}\ntries {tries}\n{workers.warnings()}"
    assert all(statuses == ["succeeded"] for statuses in tries.values()), tries


def test_a_nul_response_on_the_workers_runs_like_in_process(workers, echo_tools):
    data = {
        "name": "nul_on_workers",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "fetch",
                "kind": "tool",
                "tool": "nul_text",
                "input_mapping": {"tag": "$input.tag"},
            },
            {
                "id": "copy",
                "kind": "transform",
                "expression": "{text: text, list: list}",
                "input_mapping": {"text": "fetch.text", "list": "fetch.list"},
            },
        ],
        "outputs": {"text": "copy.text", "list": "copy.list"},
    }

    run = finished(enqueue(data, tag="nul"), cluster=workers)

    assert run.status == "succeeded", (run.error_summary, workers.logs())
    assert store_unescape(run.outputs) == {"text": "a\x00b", "list": ["\x00", "␀"]}
    fetch = step_rows(run)["fetch"]
    assert fetch.output["text"] == "a␀0b"
    assert [e["status"] for e in fetch.attempt_log] == ["succeeded"]


def test_a_worker_killed_while_recording_its_outcome_loses_nothing(workers, echo_tools, beat):
    """The run row is held locked, so the worker that finished the call blocks in the
    middle of recording it; it is killed there. Its write never committed: the sweeper
    takes the (idempotent) step back, another worker makes it again, the run succeeds."""
    run = enqueue(fan_out_flow("killed_recording", 1, delay=0.5), tag="rec")
    with transaction.atomic():
        Run.objects.select_for_update().get(pk=run.pk)
        wait_until(
            lambda: echo_tools.requests("echo") and _waiting_on_a_lock(),
            timeout=30,
            what="the worker to block while recording",
        )
        worker = StepResult.objects.get(run=run, step_id="s01").worker
        workers.kill(worker.split("@")[0])

    run = finished(run, timeout=90, cluster=workers)
    assert run.status == "succeeded", (run.error_summary, workers.logs())
    s01 = step_rows(run)["s01"]
    assert [e["status"] for e in s01.attempt_log] == ["lost", "succeeded"], s01.attempt_log
    assert s01.attempt_log[0]["worker"] == worker
    assert len(echo_tools.requests("echo")) == 2  # the killed worker's call, and one more


def _waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def test_a_queue_lost_with_redis_is_published_again_long_before_the_lease_runs_out(
    workers, echo_tools, settings
):
    """FLUSHDB of the broker's Redis db under queued steps (a restart without persistence
    loses the same): the sweeper sees the broker forgot, publishes the queued steps
    again within seconds (the queued lease is 600 s here), and nothing runs twice."""
    import redis

    from tests.celery_support import redis_url
    from tests.runs.test_celery_workers import assert_each_step_succeeded_once

    settings.FLOWPILOT_QUEUED_LEASE = 600.0
    lease = {"FLOWPILOT_QUEUED_LEASE": "600"}
    for name in ("w1", "w2"):
        workers.stop(name)  # nobody takes the messages before they are lost
    run = enqueue(fan_out_flow("lost_queue", 2), tag="flushed")
    client = redis.Redis.from_url(redis_url())
    wait_until(lambda: client.llen(workers.queue) >= 2, timeout=10, what="the messages")
    client.flushdb()
    client.close()
    try:
        for name in ("w1", "w2"):
            workers.start_worker(name, env=lease)
        workers.start_beat()
        run = finished(run, timeout=30, cluster=workers)
    finally:
        for name in ("beat", "w1", "w2"):
            workers.stop(name)  # the next test's workers start with the usual lease

    assert run.status == "succeeded"
    assert_each_step_succeeded_once(run, echo_tools, "flushed", 2)
