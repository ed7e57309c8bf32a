"""The review task: settle the approval of a finished validation run (one service call)."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from review.services import validation_settle as validation_settle_service


@shared_task(
    name="review.validation_settle",
    ignore_result=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=5,
)
def validation_settle(run_id: int) -> None:
    validation_settle_service(run_id=run_id)
