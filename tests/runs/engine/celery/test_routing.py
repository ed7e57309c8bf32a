"""Worker routing and ``max_parallel`` on the Celery driver, with a stand-in broker.

The ``Bus`` records the queue of every published step task (``broker.step_queue``): a
tool's ``queue`` wins for its steps, the workflow's ``queue`` covers the rest, and none
means the default queue. A chain continued in one task never crosses queues. A
workflow's ``max_parallel`` keeps the run's queued and running steps at the bound.
Real workers consuming the queues: ``tests/runs/test_celery_routing.py``.
"""

from __future__ import annotations

import pytest

from runs.engine.celery.broker import step_queue
from runs.engine.celery.run import run_context, run_start
from runs.engine.celery.step import step_execute
from runs.models import Run
from runs.services import run_create
from runs.state import STEP_IN_FLIGHT
from tests.celery_support import (
    Bus,
    Gauge,
    gauge_fan_out,
    import_flow,
    load_gauge_tool,
)
from tests.fakes import FakeAPI
from tests.runs.engine.celery.conftest import WORKER, by_id

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def gauge():
    fake, gauge = FakeAPI().start(), Gauge()
    gauge.install(fake)
    load_gauge_tool(fake)
    load_gauge_tool(fake, "heavy_gauge", queue="heavy")
    gauge.fake = fake
    yield gauge
    fake.stop()


def start(data: dict) -> tuple[Run, Bus]:
    bus = Bus()
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": "t"})
    run_start(run=run, publish=bus)
    return run, bus


def chain(name: str, tools: list[str], **flow: object) -> dict:
    ids = [f"c{i}" for i in range(1, len(tools) + 1)]
    steps = [
        {
            "id": sid,
            "kind": "tool",
            "tool": tool,
            "input_mapping": {
                "tag": "$input.tag" if i == 0 else f"{ids[i - 1]}.tag",
                "name": sid,
                "delay": 0,
            },
        }
        for i, (sid, tool) in enumerate(zip(ids, tools, strict=True))
    ]
    return {"name": name, "inputs": {"tag": {"type": "string"}}, "steps": steps, **flow}


def published_queues(run: Run, bus: Bus) -> dict[str, set[str | None]]:
    names = by_id(run)
    queues: dict[str, set[str | None]] = {}
    for message in bus.published:
        if message.step_result_id in names:  # a step of this run
            queues.setdefault(names[message.step_result_id], set()).add(message.queue)
    return queues


def test_a_tools_queue_wins_and_the_workflows_covers_the_other_steps(gauge):
    data = gauge_fan_out("routed", 4, delay=0)
    data["steps"][1]["tool"] = data["steps"][3]["tool"] = "heavy_gauge"
    run, bus = start({**data, "queue": "team-a"})

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    queues = published_queues(run, bus)
    assert {sid: queues[sid] for sid in ("g01", "g02", "g03", "g04")} == {
        "g01": {"team-a"},
        "g02": {"heavy"},
        "g03": {"team-a"},
        "g04": {"heavy"},
    }
    # The join ran where its workflow's steps run: in a task of that queue.
    assert queues.get("join", {"team-a"}) == {"team-a"}


def test_without_any_queue_every_step_goes_to_the_default_queue(gauge):
    run, bus = start(gauge_fan_out("unrouted", 3, delay=0))
    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert {m.queue for m in bus.published} == {None}


def test_step_queue_reads_the_tool_then_the_workflow(gauge):
    data = chain("queues_read", ["gauge", "heavy_gauge"], queue="light")
    data["steps"].append({"id": "shape", "kind": "transform", "expression": "@"})
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": "t"})

    with run_context(run) as ctx:
        assert [step_queue(ctx, step) for step in ctx.spec.steps] == ["light", "heavy", "light"]


def test_a_chain_continues_in_its_task_only_while_the_queue_stays_the_same(gauge):
    run, bus = start(chain("chain_routed", ["gauge", "heavy_gauge", "heavy_gauge", "gauge"]))

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert [v.status for v in verdicts] == ["succeeded"] * 4
    # c2 left c1's task for the heavy queue; c3 followed c2 in its task (same queue);
    # c4 went back to the default queue.
    assert published_queues(run, bus) == {"c1": {None}, "c2": {"heavy"}, "c4": {None}}


def test_a_retry_goes_back_to_the_queue_of_its_step(gauge):
    gauge.fake.fail("gauge", status=503, times=1)
    run, bus = start(chain("retry_routed", ["heavy_gauge"]))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert [(m.countdown > 0, m.queue) for m in bus.published] == [
        (False, "heavy"),
        (True, "heavy"),
    ]


def test_a_workflows_max_parallel_keeps_the_run_at_the_bound(gauge):
    run, bus = start({**gauge_fan_out("bounded", 7, delay=0), "max_parallel": 2})
    rows = run.step_results

    assert len(bus.messages) == 2
    assert rows.filter(status__in=STEP_IN_FLIGHT).count() == 2
    while bus.messages:  # a task may run more steps (one it queued for itself) before returning
        message = bus.messages.pop(0)
        step_execute(step_result_id=message.step_result_id, worker=WORKER, publish=bus)
        assert rows.filter(status__in=STEP_IN_FLIGHT).count() <= 2

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert len(gauge.seen) == 7


def test_max_parallel_of_one_runs_a_fan_out_one_step_at_a_time(gauge):
    run, bus = start({**gauge_fan_out("serial", 3, delay=0), "max_parallel": 1})

    queued = []
    while bus.messages:
        queued.append(len(bus.messages))
        message = bus.messages.pop(0)
        step_execute(step_result_id=message.step_result_id, worker=WORKER, publish=bus)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert set(queued) == {1}


@pytest.mark.usefixtures("echo_api")
def test_run_level_tasks_go_to_their_workflows_queue(tasks):
    from runs.engine.kinds import workflow as workflow_kind
    from runs.hooks import SETTLE_PARENT_TASK
    from tests.runs.engine.conftest import settle
    from tests.runs.subflows import activate, child_flow, parent_flow

    activate({**child_flow(), "queue": "kids"})
    parent = activate({**parent_flow(), "queue": "parents"})
    bus = Bus()
    run = run_create(workflow=parent, trigger="api", inputs={"tag": "q"})
    run_start(run=run, publish=bus)

    settle(bus, tasks)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    # The child's start on the child's queue; the parked step's settle on the parent's.
    assert tasks.options == [
        (workflow_kind.START_TASK, {"queue": "kids"}),
        (SETTLE_PARENT_TASK, {"queue": "parents"}),
    ]
    child = Run.objects.get(parent_run=run)
    queues = published_queues(child, bus) | published_queues(run, bus)
    assert queues == {"say": {"kids"}, "sub": {"parents"}, "after": {"parents"}}


@pytest.mark.usefixtures("echo_api")
def test_run_level_tasks_of_workflows_without_a_queue_go_to_the_default_one(tasks):
    from tests.runs.engine.conftest import settle, start

    run, bus = start("d1")
    settle(bus, tasks)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert [options for _, options in tasks.options] == [{}, {}]
