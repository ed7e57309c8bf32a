"""The API's Celery task: one planning session per plan request."""

from celery import shared_task

from api.services.plans import plan_request_execute


@shared_task(name="api.plan_execute")
def plan_execute(request_id: int) -> str:
    return plan_request_execute(request_id=request_id).status
