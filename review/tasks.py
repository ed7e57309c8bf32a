"""The review tasks, each one service call: settle the approval of a finished
validation run; plan a plan request."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from review.plans import PLAN_TASK, plan_request_execute
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


@shared_task(name=PLAN_TASK)
def plan_execute(request_id: int) -> str:
    """Plan request ``request_id`` (queued by ``plan_request_create``); its final status."""
    return plan_request_execute(request_id=request_id).status
