"""The review app's run-finished hook (named in ``config/settings.py``): when a validation
run finishes — in this process or on a worker — queue the task that settles its approval."""

from __future__ import annotations

from review.tasks import validation_settle as validation_settle_task
from runs.dispatch import task_send
from runs.models import Run, RunTrigger


def run_finished(*, run_id: int) -> None:
    if Run.objects.filter(pk=run_id, trigger=RunTrigger.VALIDATION).exists():
        task_send(validation_settle_task, run_id)
