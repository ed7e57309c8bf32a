"""The notifications' hooks (named in ``config/settings.py``): queue the report task, or
the task telling an approval step's recipients that it waits."""

from __future__ import annotations

from typing import Any

from notifications.services import QUIET_TRIGGERS
from notifications.tasks import approval_requested as approval_requested_task
from notifications.tasks import run_finished as run_finished_task
from runs.dispatch import task_send


def run_finished(
    *, run_id: int, trigger: str | None = None, reports: bool | None = None, **_: Any
) -> None:
    if trigger in QUIET_TRIGGERS or reports is False:
        return  # validation and replay runs report elsewhere; no channel: nothing to send
    task_send(run_finished_task, run_id)


def approval_requested(*, request_id: int, **_: Any) -> None:
    """An approval step started to wait, and its ``notify`` names someone."""
    task_send(approval_requested_task, request_id)
