"""The notifications' hook (named in ``config/settings.py``): queue the report task."""

from __future__ import annotations

from typing import Any

from notifications.services import QUIET_TRIGGERS
from notifications.tasks import run_finished as run_finished_task
from runs.dispatch import task_send


def run_finished(*, run_id: int, trigger: str | None = None, **_: Any) -> None:
    if trigger in QUIET_TRIGGERS:
        return  # the review page and the replay report show their own results
    task_send(run_finished_task, run_id)
