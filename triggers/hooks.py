"""The event triggers' hooks (named in ``config/settings.py``): each queues one task or
calls one service.

``run_finished`` queues the event of a finished run whose workflow some trigger waits
for (no query for the others: ``triggers.events.waited_for``); ``workflow_activated``
makes the trigger rows match the version just activated.
"""

from __future__ import annotations

from typing import Any

from runs.dispatch import task_send
from runs.models import Run
from triggers.events import NOT_EVENTS, triggers_sync_declared, waited_for
from triggers.tasks import workflow_finished
from workflows.models import Workflow


def run_finished(
    *, run_id: int, trigger: str | None = None, workflow: str | None = None, **_: Any
) -> None:
    if trigger in NOT_EVENTS:
        return
    if workflow is None:  # announced without its name: read it
        workflow = Run.objects.filter(pk=run_id).values_list("workflow__name", flat=True).first()
    if workflow is not None and waited_for(workflow_name=workflow):
        task_send(workflow_finished, run_id)


def workflow_activated(*, workflow_id: int) -> None:
    triggers_sync_declared(workflow=Workflow.objects.get(pk=workflow_id))
