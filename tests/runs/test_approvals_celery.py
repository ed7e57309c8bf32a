"""Approval steps on real Celery workers: 20 runs wait holding no task (counted on the
broker), every worker is killed, the runs are approved, and on restarted workers all
20 finish, each refund sent once. These tests never run on SQLite."""

from __future__ import annotations

import pytest

from benchmarks._workers import broker_messages
from runs.approvals import approval_decide
from runs.models import ApprovalRequest, Run
from runs.services import run_create, run_enqueue
from tests.celery_support import redis_url, wait_until
from tests.factories import UserFactory
from tests.runs.approval_support import activate, refund_flow, refunds_api

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]
RUNS = 20


def statuses(ids: list[int]) -> list[str]:
    return sorted(set(Run.objects.filter(pk__in=ids).values_list("status", flat=True)))


def test_twenty_waiting_runs_hold_no_task_survive_every_worker_killed_and_finish(workers):
    fake = refunds_api(auth=False)
    try:
        workflow = activate(refund_flow())
        ids = [
            run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"amount": n})).pk
            for n in range(1, RUNS + 1)
        ]
        wait_until(lambda: statuses(ids) == ["waiting"], timeout=120, what="20 waiting runs")
        assert broker_messages(redis_url(), workers.queue) == 0  # nothing held while waiting

        workers.kill("w1")
        workers.kill("w2")
        bob = UserFactory(username="bob")
        for request in ApprovalRequest.objects.filter(run_id__in=ids, status="pending"):
            approval_decide(request_id=request.pk, user=bob, approve=True,
                            values={"note": f"run {request.run_id}"}, via="api")  # fmt: skip
        assert statuses(ids) == ["running"]
        # Each decision queued the step it freed, for whichever worker comes up.
        assert broker_messages(redis_url(), workers.queue) == RUNS

        workers.start_worker("w1")
        workers.start_worker("w2")
        wait_until(lambda: statuses(ids) == ["succeeded"], timeout=120, what="20 finished")
        sent = sorted(r.json()["amount"] for r in fake.requests("refunds"))
        assert sent == [2 * n for n in range(1, RUNS + 1)], workers.logs()
    finally:
        fake.stop()
