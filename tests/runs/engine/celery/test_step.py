"""One step as a Celery task (``runs.engine.celery.step``): a run whose context cannot be
built fails at once, a step reading an output stored truncated fails clearly, what the
tasks of a run log carries its ids, and the connections around a worker's task.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import time

import pytest

from runs.engine import caches
from runs.engine.celery import step as step_module
from runs.engine.celery import sweep
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, results, started
from tools.logformat import JsonFormatter
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_what_the_tasks_of_a_run_log_carries_its_ids(echo_api, restore_loggers):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("flowpilot")
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)

    run, bus = started(fan_out_flow("fan", 2))
    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    engine = [line for line in lines if line["logger"].startswith("flowpilot.engine")]
    messages = {line["message"] for line in engine}
    assert f"run {run.pk} started on the Celery workers" in messages  # the run's start
    assert f"run {run.pk}: step s01 started (try 1)" in messages  # a step task, outside its try
    assert f"run {run.pk} succeeded" in messages  # the advance that finished it
    for line in engine:
        assert (line["run_id"], line["trace_id"]) == (run.pk, run.uuid.hex), line
    steps = [line for line in engine if "step_id" in line]
    assert {line["step_id"] for line in steps} == {"s01", "s02", "join"}
    assert all(line["step_id"] in line["message"] for line in steps)


# --- connections around a task (config/celery_app.py) ---------------------------------


class _Request:
    def __init__(self, eager: bool) -> None:
        self.is_eager = eager


class _Task:
    def __init__(self, eager: bool) -> None:
        self.request = _Request(eager)


def test_a_worker_task_recycles_old_connections_and_an_eager_one_leaves_them(monkeypatch):
    celery_app = sys.modules["config.celery_app"]  # `config.celery_app` is also the app
    calls = []
    monkeypatch.setattr(celery_app, "close_old_connections", lambda: calls.append("closed"))

    celery_app._recycle_old_connections(sender=_Task(eager=True))
    assert calls == []  # eager: the caller's own connection and transaction
    celery_app._recycle_old_connections(sender=_Task(eager=False))
    assert calls == ["closed"]


def test_a_step_slow_to_resolve_keeps_its_lease_and_calls_its_tool_once(
    echo_api, settings, monkeypatch
):
    """The lease runs from the claim: resolving the inputs (slow on a busy machine) is
    covered by the heartbeat, so the sweeper never takes the step back meanwhile and a
    second worker never calls the tool again."""
    settings.FLOWPILOT_STEP_LEASE = 0.6  # beats every 0.2 s
    run, bus = started(fan_out_flow("slow_resolve", 1))
    real_resolved = step_module._resolved
    swept = []

    def slow_resolved(ctx, run, step, known):
        if step.id == "s01":
            time.sleep(1.2)  # twice the lease the claim wrote
            swept.append(sweep.steps_sweep(publish=bus, broker_lost=lambda: False))
        return real_resolved(ctx, run, step, known)

    monkeypatch.setattr(step_module, "_resolved", slow_resolved)

    bus.drain(worker=WORKER)

    assert [counts["requeued"] for counts in swept] == [0], swept
    rows = results(run)
    assert [e["status"] for e in rows["s01"].attempt_log] == ["succeeded"]
    assert [r.segments[2] for r in echo_api.requests("echo")] == ["n01"]
