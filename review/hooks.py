"""The review app's run-finished hook (named in ``config/settings.py``): when a validation
run finishes — in this process or on a worker — queue the task that settles its approval."""

from __future__ import annotations

from typing import Any

from review.tasks import validation_settle as validation_settle_task
from runs.dispatch import task_send
from runs.models import RunTrigger
from runs.selectors import run_trigger


def run_finished(*, run_id: int, trigger: str | None = None, **_: Any) -> None:
    if run_trigger(run_id=run_id, trigger=trigger) == RunTrigger.VALIDATION:
        task_send(validation_settle_task, run_id)
