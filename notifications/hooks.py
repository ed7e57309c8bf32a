"""The notifications' hook (named in ``config/settings.py``): queue the report task."""

from __future__ import annotations

from notifications.tasks import run_finished as run_finished_task
from runs.dispatch import task_send


def run_finished(*, run_id: int) -> None:
    task_send(run_finished_task, run_id)
