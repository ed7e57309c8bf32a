"""manage.py health against PostgreSQL, Redis, real workers and a real beat
(tests/celery_support.py), then with each of them stopped.

The workers consume a queue of their own on the test Redis; beat (the database
scheduler) sends the sweeper every second and records each tick.
"""

from __future__ import annotations

import json
import socket

import pytest
from celery import current_app

from tests.celery_support import wait_until
from tests.startup import start_deadline

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers"),
]


def report(cli, *components: str) -> tuple[int, dict[str, dict]]:
    result = cli("health", "--json", *components)
    body = json.loads(result.out)
    return result.code, {c["component"]: c for c in body["components"]}


def test_health_with_everything_up_then_each_part_stopped(cli, workers, settings):
    settings.FLOWPILOT_HEALTH_BEAT_MAX_AGE = 4
    workers.start_beat()
    wait_until(
        lambda: report(cli, "beat")[0] == 0,
        timeout=start_deadline(),
        what="beat's first recorded tick",
    )

    code, got = report(cli)

    assert code == 0, got
    assert got["database"]["reason"] == "postgresql answered, migrations applied"
    assert got["broker"]["status"] == "ok"
    assert got["workers"]["status"] == "ok"
    queue = workers.queue
    assert got["workers"]["details"]["workers"] == {
        workers.node("w1"): [queue],
        workers.node("w2"): [queue],
    }
    assert got["workers"]["reason"] == f"2 worker(s) consume queue `{queue}`"
    assert got["beat"]["status"] == "ok"
    assert got["breakers"]["reason"].startswith("none open")
    text = cli("health", "workers", "--node", workers.node("w1"))
    assert text.code == 0
    assert text.lines == [f"workers  ok              2 worker(s) consume queue `{queue}`"]

    workers.stop("beat")
    wait_until(lambda: report(cli, "beat")[0] == 1, timeout=30, what="beat's tick to age")
    assert report(cli, "beat")[1]["beat"]["reason"].startswith("last tick")

    workers.stop("w1")
    missing = cli("health", "workers", "--node", workers.node("w1"))
    assert missing.code == 1
    assert f"worker {workers.node('w1')} did not answer (1 other(s) did)" in missing.out
    workers.stop("w2")
    code, got = report(cli, "workers")
    assert code == 1
    assert got["workers"]["reason"] == "no worker answered within 2 s"


def test_a_worker_on_another_queue_does_not_count(cli, workers, settings):
    settings.FLOWPILOT_HEALTH_TIMEOUT = 1
    saved = current_app.conf.task_default_queue
    current_app.conf.task_default_queue = "nobody-listens-here"
    try:
        code, got = report(cli, "workers")
    finally:
        current_app.conf.task_default_queue = saved

    assert code == 1
    assert got["workers"]["reason"] == (
        "2 worker(s) answered, none consumes queue `nobody-listens-here`"
    )


def test_the_broker_at_a_closed_port(cli, settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    saved = current_app.conf.broker_url
    current_app.conf.broker_url = f"redis://127.0.0.1:{port}/0"
    try:
        code, got = report(cli, "database", "broker", "workers")
    finally:
        current_app.conf.broker_url = saved

    assert code == 1
    assert got["database"]["status"] == "ok"
    assert got["broker"]["status"] == got["workers"]["status"] == "failing"
    assert f"127.0.0.1:{port}" in got["broker"]["reason"]


def test_a_queue_an_active_workflow_routes_to_needs_a_worker(cli, workers, settings):
    from types import SimpleNamespace

    from tests.celery_support import gauge_fan_out, load_gauge_tool
    from tests.factories import WorkflowFactory
    from workflows.models import WorkflowStatus

    settings.FLOWPILOT_HEALTH_TIMEOUT = 1
    heavy = f"{workers.queue}-heavy"
    load_gauge_tool(SimpleNamespace(url="http://127.0.0.1:9"), "heavy_gauge", queue=heavy)
    data = gauge_fan_out("routed_health", 2, delay=0)
    data["steps"][0]["tool"] = "heavy_gauge"
    WorkflowFactory(data=data, status=WorkflowStatus.ACTIVE)

    code, got = report(cli, "workers")

    assert code == 1
    assert got["workers"]["reason"] == (
        f"no worker consumes `{heavy}` (tool heavy_gauge): start one with "
        f"`celery -A config worker -Q {heavy}`"
    )
    assert got["workers"]["details"]["routed"] == {heavy: ["tool heavy_gauge"]}

    workers.start_worker("w-heavy", concurrency=1, queues=(heavy,))
    try:
        # A worker that has just said "ready." may miss a 1 s broadcast on a loaded
        # machine; the claim is that health turns ok once it answers.
        code, got = wait_until(
            lambda: (result := report(cli, "workers"))[0] == 0 and result,
            timeout=start_deadline(),
            what="health to see the worker on the routed queue",
        )
    finally:
        workers.stop("w-heavy")

    assert code == 0, got
    assert got["workers"]["status"] == "ok"
