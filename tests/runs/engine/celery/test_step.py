"""One step as a Celery task (``runs.engine.celery.step``): a run whose context cannot be
built fails at once, a step reading an output stored truncated fails clearly, and the
connections around a worker's task.
"""

from __future__ import annotations

import sys

import pytest

from runs.engine import caches
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, results, started
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
