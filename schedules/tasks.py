"""Celery tasks of the schedules: ids in, one service call each.

``schedules.fire`` is what beat sends for every schedule (its ``PeriodicTask``);
``schedules.start_run`` starts a fire's run after its jitter; ``schedules.run_finished``
is queued by the run-finished hook; ``schedules.retention_sweep`` is the daily purge.
"""

from __future__ import annotations

import random

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from runs.dispatch import task_send
from runs.models import Run, RunStatus
from runs.services import run_enqueue
from schedules.firing import schedule_fire, schedule_run_finished
from schedules.retention import retention_sweep

INFRASTRUCTURE_ERRORS = (OperationalError, InterfaceError)


def start_later(run_id: int, delay: float) -> None:
    """The ``Starter`` the tasks give the services: start the run after ``delay`` seconds
    (without a broker, now: there is no worker to wait for)."""
    task_send(start_run, run_id, countdown=delay)


@shared_task(name="schedules.fire", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def fire(schedule_id: int) -> None:
    schedule_fire(
        schedule_id=schedule_id, now=timezone.now(), start=start_later, rng=random.Random()
    )


@shared_task(name="schedules.start_run", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS)
def start_run(run_id: int) -> None:
    """Start a scheduled run that is still pending (it may have been cancelled meanwhile)."""
    run = Run.objects.filter(pk=run_id, status=RunStatus.PENDING).first()
    if run is not None:
        run_enqueue(run=run)


@shared_task(
    name="schedules.run_finished", ignore_result=True, autoretry_for=INFRASTRUCTURE_ERRORS
)
def run_finished(run_id: int) -> None:
    schedule_run_finished(run_id=run_id, start=start_later, rng=random.Random())


@shared_task(name="schedules.retention_sweep", autoretry_for=INFRASTRUCTURE_ERRORS, max_retries=3)
def retention(**_: object) -> dict:
    sweep = retention_sweep(now=timezone.now())
    return {"removed": sweep.removed, "total": sweep.total}
