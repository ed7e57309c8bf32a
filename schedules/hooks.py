"""The schedules' hooks (named in ``config/settings.py``): each queues one task or service.

``run_finished`` reacts only to scheduled runs; ``workflow_activated`` makes the
schedule a workflow file declares match the version just activated.
"""

from __future__ import annotations

from typing import Any

from runs.dispatch import task_send
from runs.models import RunTrigger
from runs.selectors import run_trigger
from schedules.services import schedule_sync_declared
from schedules.tasks import run_finished as run_finished_task
from workflows.models import Workflow


def run_finished(*, run_id: int, trigger: str | None = None, **_: Any) -> None:
    if run_trigger(run_id=run_id, trigger=trigger) == RunTrigger.SCHEDULE:
        task_send(run_finished_task, run_id)


def workflow_activated(*, workflow_id: int) -> None:
    schedule_sync_declared(workflow=Workflow.objects.get(pk=workflow_id))
