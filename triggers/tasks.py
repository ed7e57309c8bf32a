"""Celery tasks of the event triggers: ids in, one service call each.

``triggers.on_workflow_finished`` is queued by the run-finished hook
(``triggers.hooks``) for a run whose workflow some trigger waits for;
``triggers.start_run`` starts a run an event created, once its row is committed;
``triggers.sweep`` (beat) takes the events the hook missed. ``triggers.polls_due``
(beat, every ``FLOWPILOT_TRIGGER_POLL_TICK`` seconds) claims the poll triggers whose
time has come and queues ``triggers.poll`` for each (``triggers.polls``).
"""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from runs.dispatch import task_send
from runs.models import Run, RunStatus
from runs.services import run_enqueue
from triggers.events import on_workflow_finished, triggers_sweep
from triggers.polls import poll_trigger, polls_due

INFRASTRUCTURE_ERRORS = (OperationalError, InterfaceError)


def start_later(run_id: int) -> None:
    """The ``Starter`` the task gives the service: start the run on the workers (without
    a broker, now, in this process)."""
    task_send(start_run, run_id)


@shared_task(
    name="triggers.on_workflow_finished", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS
)
def workflow_finished(run_id: int) -> None:
    on_workflow_finished(run_id=run_id, start=start_later)


@shared_task(name="triggers.start_run", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def start_run(run_id: int) -> None:
    """Start a run an event created, if it is still pending (it may have been cancelled
    meanwhile)."""
    run = Run.objects.filter(pk=run_id, status=RunStatus.PENDING).first()
    if run is not None:
        run_enqueue(run=run)


@shared_task(name="triggers.sweep", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def sweep() -> None:
    triggers_sweep(now=timezone.now(), start=start_later)


@shared_task(name="triggers.polls_due", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def polls_tick() -> None:
    polls_due(now=timezone.now(), send=send_poll)


def send_poll(trigger_id: int) -> None:
    task_send(poll, trigger_id)


@shared_task(name="triggers.poll", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def poll(trigger_id: int) -> None:
    poll_trigger(trigger_id=trigger_id, start=start_later)
