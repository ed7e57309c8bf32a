"""Poll triggers on real Celery workers and beats: every worker killed in the middle of
a poll, then two beats ticking each second, against a loopback API whose pages overlap;
each item starts exactly one run. These tests never run on SQLite."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from runs.models import Run, RunStatus, RunTrigger
from tests.celery_support import wait_until
from tests.fakes import FakeAPI
from tests.triggers.polls_support import Orders, activate, load_orders_tool, poll_flow
from triggers.models import EventTrigger, TriggerEvent, TriggerKind
from triggers.tasks import send_poll

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]


@pytest.fixture
def orders():
    fake = FakeAPI().start()
    api = Orders(fake)
    load_orders_tool(fake.url, auth=False)
    yield api
    fake.stop()


def events() -> list[str]:
    return sorted(TriggerEvent.objects.values_list("event_key", flat=True))


def finished_order_ids() -> list[int]:
    runs = Run.objects.filter(trigger=RunTrigger.EVENT, status=RunStatus.SUCCEEDED)
    return sorted(run.inputs["order_id"] for run in runs)


def test_a_poll_killed_with_every_worker_then_two_beats_start_one_run_per_item(workers, orders):
    activate(poll_flow(every=600))
    row = EventTrigger.objects.get(kind=TriggerKind.POLL)
    orders.add(3)

    # Every worker killed while the poll waits for its answer: nothing was stored.
    release = orders.fake.hold("orders")
    send_poll(row.pk)
    wait_until(lambda: orders.fake.requests("orders"), timeout=60, what="the poll's call")
    workers.kill("w1")
    workers.kill("w2")
    release.set()
    assert (events(), Run.objects.count()) == ([], 0)
    row.refresh_from_db()
    assert (row.cursor, row.cursor_version) == (None, 0)

    # Restarted: the next poll reads the same page from the same cursor.
    workers.start_worker("w1")
    workers.start_worker("w2")
    send_poll(row.pk)
    wait_until(lambda: finished_order_ids() == [1, 2, 3], timeout=90, what="three runs")
    row.refresh_from_db()
    assert (row.cursor, row.cursor_version) == (3, 1)

    # Two beats, each ticking every second, and one due time: one poll, whose page
    # overlaps the last (order 3 again), starts runs for orders 4 and 5 only.
    orders.fake.clear()
    orders.add(2)
    EventTrigger.objects.filter(pk=row.pk).update(next_poll_at=timezone.now())
    tick = {"FLOWPILOT_TRIGGER_POLL_TICK": "1"}
    try:
        workers.start_beat("beat1", env=tick)
        workers.start_beat("beat2", env=tick)
        wait_until(lambda: finished_order_ids() == [1, 2, 3, 4, 5], timeout=90, what="5 runs")
        time.sleep(3)  # several more ticks of both beats
    finally:
        workers.stop("beat1")
        workers.stop("beat2")
    assert [r.arg("since") for r in orders.fake.requests("orders")] == ["3"], workers.logs()
    assert events() == [f"item:list_orders:{n}" for n in range(1, 6)]
    assert finished_order_ids() == [1, 2, 3, 4, 5]
    assert Run.objects.count() == 5
