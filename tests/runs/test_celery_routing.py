"""Worker routing and ``max_parallel`` on real Celery workers (Redis broker, PostgreSQL).

Named after the feature. Two ``celery worker`` subprocesses: ``dflt`` consumes only the
default queue (this module's own), ``heavy`` only the heavy queue (``<default>-heavy``),
as a team would start them (``celery -A config worker -Q heavy``). The ``heavy_gauge``
tool names the heavy queue; ``gauge`` names none. Every step records the worker that
claimed it and every try the worker that made it, so "the heavy worker got the heavy
tool's steps and the default worker never did" is read from the database. The bounds
are read on a loopback server counting the requests in flight (``Gauge``).
"""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.services import run_create, run_enqueue
from tests.celery_support import (
    Gauge,
    gauge_fan_out,
    gauge_foreach,
    import_flow,
    load_gauge_tool,
    start_cluster,
    wait_until,
)
from tests.conftest import statuses
from tests.fakes import FakeAPI

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]

RUN_TIMEOUT = 90


@pytest.fixture(scope="module")
def routed_cluster(django_db_setup, tmp_path_factory):
    """``dflt`` on the default queue (concurrency 4), ``heavy`` on the heavy one (2)."""
    with start_cluster(tmp_path_factory.mktemp("routing"), workers=()) as cluster:
        cluster.heavy = f"{cluster.queue}-heavy"
        cluster.start_worker("dflt", concurrency=4)
        cluster.start_worker("heavy", concurrency=2, queues=(cluster.heavy,))
        yield cluster


@pytest.fixture(scope="module")
def gauge_server():
    fake, gauge = FakeAPI().start(), Gauge()
    gauge.install(fake)
    yield fake, gauge
    fake.stop()


@pytest.fixture
def gauge(routed_cluster, gauge_server, settings):
    from tests.celery_support import WORKER_SETTINGS

    for name, value in WORKER_SETTINGS.items():
        setattr(settings, name, float(value))
    fake, gauge = gauge_server
    fake.heal()
    fake.clear()
    gauge.reset()
    load_gauge_tool(fake)
    load_gauge_tool(fake, "heavy_gauge", queue=routed_cluster.heavy)
    return gauge


def enqueue(data: dict, **inputs) -> Run:
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": "t", **inputs})
    return run_enqueue(run=run)


def finished(run: Run, cluster) -> Run:
    def done() -> bool:
        run.refresh_from_db()
        at_rest = not run.step_results.filter(status__in=["queued", "running"]).exists()
        return run.status in {"succeeded", "failed", "cancelled"} and at_rest

    try:
        wait_until(done, timeout=RUN_TIMEOUT, what=f"run {run.pk} to finish")
    except AssertionError:
        raise AssertionError(f"run {run.pk}: {statuses(run)}\n{cluster.logs()}") from None
    return run


def workers_of(run: Run) -> dict[str, set[str]]:
    """Per step, the workers that made its tries and the one that claimed it last."""
    found: dict[str, set[str]] = {}
    for result in run.step_results.all():
        names = {entry.get("worker", "") for entry in result.attempt_log or []}
        found[result.step_id] = {name.split("@")[0] for name in names | {result.worker} if name}
    return found


def test_the_heavy_worker_runs_the_heavy_tools_steps_and_the_default_worker_never_does(
    gauge, routed_cluster
):
    data = gauge_fan_out("routed_fan", 6, delay=0.05)
    heavy_steps = {"g02", "g04", "g06"}
    for step in data["steps"]:
        if step["id"] in heavy_steps:
            step["tool"] = "heavy_gauge"
    # A chain across queues too: light → heavy → heavy → light (a task continues a chain
    # only on its own queue).
    data["steps"] += [
        {"id": "h1", "kind": "tool", "tool": "heavy_gauge",
         "input_mapping": {"tag": "g01.tag", "name": "h1", "delay": 0}},
        {"id": "h2", "kind": "tool", "tool": "heavy_gauge",
         "input_mapping": {"tag": "h1.tag", "name": "h2", "delay": 0}},
        {"id": "l1", "kind": "tool", "tool": "gauge",
         "input_mapping": {"tag": "h2.tag", "name": "l1", "delay": 0}},
    ]  # fmt: skip
    heavy_steps |= {"h1", "h2"}
    runs = [enqueue(data) for _ in range(3)]

    for run in runs:
        run = finished(run, routed_cluster)
        assert run.status == "succeeded", (run.error_summary, routed_cluster.logs())
        workers = workers_of(run)
        assert set(workers) == {*(f"g0{i}" for i in range(1, 7)), "join", "h1", "h2", "l1"}
        for step_id, names in workers.items():
            expected = {"heavy"} if step_id in heavy_steps else {"dflt"}
            assert names == expected, (step_id, names)


def test_a_retry_of_a_heavy_step_stays_on_the_heavy_worker(gauge, routed_cluster, gauge_server):
    fake, _ = gauge_server
    fake.fail("gauge", status=503, times=2)
    data = gauge_fan_out("routed_retry", 1, delay=0)
    data["steps"][0]["tool"] = "heavy_gauge"

    run = finished(enqueue(data), routed_cluster)

    assert run.status == "succeeded", run.error_summary
    step = run.step_results.get(step_id="g01")
    assert [entry["status"] for entry in step.attempt_log] == ["failed", "failed", "succeeded"]
    assert workers_of(run)["g01"] == {"heavy"}


def test_a_workflows_queue_takes_its_steps_without_a_tool_queue(gauge, routed_cluster):
    data = {**gauge_fan_out("routed_flow", 3, delay=0), "queue": routed_cluster.heavy}

    run = finished(enqueue(data), routed_cluster)

    assert run.status == "succeeded", run.error_summary
    assert set().union(*workers_of(run).values()) == {"heavy"}


def test_max_parallel_bounds_a_wide_run_across_the_workers(gauge, routed_cluster):
    # 10 light and 4 heavy steps, both workers busy, the run's bound 3: the server never
    # sees more than 3 of them at once (6 worker slots would allow 6).
    data = {**gauge_fan_out("bounded_fan", 14, delay=0.4), "max_parallel": 3}
    for step in data["steps"][:4]:
        step["tool"] = "heavy_gauge"

    run = finished(enqueue(data), routed_cluster)

    assert run.status == "succeeded", run.error_summary
    assert len(gauge.seen) == 14
    assert 2 <= gauge.most <= 3


def test_a_foreach_steps_max_parallel_holds_on_a_worker(gauge, routed_cluster):
    items = [f"i{i:02d}" for i in range(8)]
    run = finished(
        enqueue(gauge_foreach("bounded_each", delay=0.3, max_parallel=2), items=items),
        routed_cluster,
    )

    assert run.status == "succeeded", run.error_summary
    assert sorted(name for _, name in gauge.seen) == items
    assert gauge.most == 2
