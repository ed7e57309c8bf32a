"""The notification tasks: queued by the run-finished hook and by an approval step's
request, one service call each."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from notifications.services import notification_approval_requested, notification_run_finished


@shared_task(
    name="notifications.run_finished",
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def run_finished(run_id: int) -> None:
    notification_run_finished(run_id=run_id)


@shared_task(
    name="notifications.approval_requested",
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def approval_requested(request_id: int) -> None:
    notification_approval_requested(request_id=request_id)
