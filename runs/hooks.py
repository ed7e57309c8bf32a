"""The runs app's own run-finished hook (``FLOWPILOT_RUN_FINISHED_HOOKS``).

A child run of a `workflow` step parked on Celery wakes its parent step: the hook queues
``runs.settle_parent_step`` (``runs.engine.celery.children.parent_step_settle``) on the
parent workflow's ``queue`` (the default queue when it names none). A run
under a concurrency limit frees its slot: the hook queues ``runs.fill_slots``
(``runs.concurrency.slots_fill``), which starts the next queued runs of its pool (a lost
message is recovered by the periodic ``runs.sweep_queued_runs``). In process there is
nothing to do: the parent step waits for its child itself, and the driver that ended a
limited run executes the next ones (``runs.services.run_execute``).
"""

from __future__ import annotations

from typing import Any

from celery import current_app

from runs.engine.celery import broker
from runs.engine.celery.broker import run_task_options
from runs.models import Run

SETTLE_PARENT_TASK = "runs.settle_parent_step"
FILL_SLOTS_TASK = "runs.fill_slots"


def run_finished(
    *, run_id: int, child: bool | None = None, limited: bool | None = None, **_: Any
) -> None:
    if broker.in_process():
        return
    if limited or (
        limited is None and Run.objects.filter(pk=run_id, concurrency_key__isnull=False).exists()
    ):
        current_app.send_task(FILL_SLOTS_TASK, args=[run_id])
    if child is False:
        return
    found = (
        Run.objects.filter(pk=run_id, parent_step__isnull=False)
        .values_list("pk", "parent_step__run__workflow__definition__queue")
        .first()
    )
    if found is not None:  # on the parent workflow's queue: a run-level task of its run
        queue = found[1] if isinstance(found[1], str) and found[1] else None
        current_app.send_task(SETTLE_PARENT_TASK, args=[run_id], **run_task_options(queue))
