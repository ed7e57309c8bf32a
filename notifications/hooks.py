"""The notifications' hook (named in ``config/settings.py``): queue the report task."""

from __future__ import annotations

from notifications.tasks import run_finished as run_finished_task


def run_finished(*, run_id: int) -> None:
    run_finished_task.delay(run_id)
