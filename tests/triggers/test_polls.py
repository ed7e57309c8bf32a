"""triggers.polls: a poll trigger calls its http tool (a real server on loopback whose
pages overlap), and each new item starts one run — whatever reads a page twice, dies
before its commit or polls at the same time — with the cursor stored with the runs."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.models import Run, RunTrigger
from tests.fakes import FakeAPI, FakeResponse
from tests.triggers.polls_support import TOKEN, Orders, activate, load_orders_tool, poll_flow
from triggers import polls
from triggers.events import triggers_sweep, triggers_sync_declared
from triggers.models import EventOutcome, EventTrigger, TriggerEvent, TriggerKind
from triggers.polls import event_key, poll_trigger, polls_due
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


class Starts:
    """Records the runs a poll started, instead of queuing them."""

    def __init__(self) -> None:
        self.run_ids: list[int] = []

    def __call__(self, run_id: int) -> None:
        self.run_ids.append(run_id)


@pytest.fixture
def orders(monkeypatch):
    monkeypatch.setenv("ORDERS_TOKEN", TOKEN)
    fake = FakeAPI().start()
    api = Orders(fake)
    load_orders_tool(fake.url)
    yield api
    fake.stop()


def trigger_row(name: str = "order_intake") -> EventTrigger:
    return EventTrigger.objects.get(workflow_name=name, kind=TriggerKind.POLL)


def polled(**kwargs):
    starts = Starts()
    outcome = poll_trigger(trigger_id=trigger_row().pk, start=starts, **kwargs)
    return outcome, starts


def order_ids() -> list[int]:
    runs = Run.objects.filter(trigger=RunTrigger.EVENT).order_by("pk")
    return [run.inputs["order_id"] for run in runs]


def test_activation_makes_a_poll_due_at_once(orders):
    before = timezone.now()
    activate(poll_flow(every=300))
    row = trigger_row()
    assert (row.source, row.every_seconds, row.cursor_version) == ("list_orders", 300, 0)
    assert before <= row.next_poll_at <= timezone.now()
    assert str(row) == "order_intake polling list_orders"


def test_each_new_item_starts_one_run_and_an_overlapping_page_starts_only_the_new(orders):
    activate(poll_flow())
    orders.add(5)
    first, starts = polled()
    assert (first.items, len(first.started), first.seen, first.error) == (3, 3, 0, "")
    assert starts.run_ids == first.started  # started once the transaction committed
    assert trigger_row().cursor == 3
    second, _ = polled()  # since=3: orders 3, 4, 5; 3 was taken
    assert (second.items, len(second.started), second.seen) == (3, 2, 1)
    third, _ = polled()  # since=5: order 5 again, nothing new
    assert (third.items, third.started, third.seen, third.cursor_moved) == (1, [], 1, True)
    assert order_ids() == [1, 2, 3, 4, 5]
    assert [r.inputs["total"] for r in Run.objects.order_by("pk")] == [10.5, 21, 31.5, 42, 52.5]
    assert [r.arg("since") for r in orders.fake.requests("orders")] == ["0", "3", "5"]
    assert {r.headers["authorization"] for r in orders.fake.requests("orders")} == {
        f"Bearer {TOKEN}"
    }
    keys = sorted(TriggerEvent.objects.values_list("event_key", flat=True))
    assert keys == [f"item:list_orders:{n}" for n in range(1, 6)]
    assert set(TriggerEvent.objects.values_list("outcome", flat=True)) == {EventOutcome.STARTED}


def test_a_poll_that_dies_before_its_commit_leaves_nothing_and_the_next_takes_each_once(
    orders, monkeypatch
):
    activate(poll_flow())
    orders.add(3)

    def die(self, output, items):
        raise RuntimeError("the worker died while storing the cursor")

    monkeypatch.setattr(polls._Poll, "_next_cursor", die)
    with pytest.raises(RuntimeError):
        polled()
    assert (Run.objects.count(), TriggerEvent.objects.count()) == (0, 0)
    assert (trigger_row().cursor, trigger_row().cursor_version) == (None, 0)
    monkeypatch.undo()
    monkeypatch.setenv("ORDERS_TOKEN", TOKEN)
    outcome, _ = polled()  # the same page again, from the same cursor
    assert [r.arg("since") for r in orders.fake.requests("orders")] == ["0", "0"]
    assert len(outcome.started) == 3
    assert order_ids() == [1, 2, 3]


@pytest.mark.postgres
def test_two_polls_at_once_start_each_item_once_and_move_the_cursor_once(orders):
    if connection.vendor != "postgresql":
        pytest.skip("the race between connections is PostgreSQL's")
    activate(poll_flow())
    orders.add(3)
    release = orders.fake.hold("orders")
    outcomes: list = []
    errors: list = []

    def one() -> None:
        try:
            outcomes.append(polled()[0])
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = timezone.now() + timedelta(seconds=30)
    while len(orders.fake.requests("orders")) < 2 and timezone.now() < deadline:
        threading.Event().wait(0.05)
    release.set()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(orders.fake.requests("orders")) == 2  # both were in flight at once
    assert sum(len(o.started) for o in outcomes) == 3
    assert sorted(order_ids()) == [1, 2, 3]
    assert (trigger_row().cursor, trigger_row().cursor_version) == (3, 1)


def test_beat_claims_each_due_time_once_however_many_beats_ask(orders):
    activate(poll_flow(every=60))
    row = trigger_row()
    due = row.next_poll_at
    sent: list[int] = []
    now = due + timedelta(seconds=1)
    assert polls_due(now=now, send=sent.append) == [row.pk]
    assert polls_due(now=now, send=sent.append) == []  # a second beat, the same tick
    assert sent == [row.pk]
    assert trigger_row().next_poll_at == due + timedelta(seconds=60)  # no drift
    assert polls_due(now=now + timedelta(seconds=30), send=sent.append) == []  # not due yet
    late = due + timedelta(minutes=10)  # beat was down: one poll now, the next an interval on
    assert polls_due(now=late, send=sent.append) == [row.pk]
    assert trigger_row().next_poll_at == late + timedelta(seconds=60)


def test_a_send_that_fails_is_logged_and_polled_at_the_next_due_time(orders, caplog):
    activate(poll_flow(every=60))
    now = trigger_row().next_poll_at + timedelta(seconds=1)

    def broker_down(pk: int) -> None:
        raise ConnectionError("broker unreachable")

    assert polls_due(now=now, send=broker_down) == []
    assert "not sent (ConnectionError: broker unreachable)" in caplog.text
    assert trigger_row().next_poll_at > now


def test_a_failed_call_keeps_the_cursor_and_records_the_error_masked(orders):
    activate(poll_flow())
    orders.add(2)
    polled()
    orders.fake.fail("orders", status=401, body={"error": f"token {TOKEN} expired"}, times=1)
    outcome, _ = polled()
    assert outcome.started == []
    assert "401" in outcome.error
    row = trigger_row()
    assert TOKEN not in row.last_error
    assert "401" in row.last_error
    assert (row.cursor, row.cursor_version) == (2, 1)
    assert row.polled_at is not None
    again, _ = polled()  # the API is back: the error is cleared
    assert again.error == ""
    assert trigger_row().last_error == ""


def test_an_answer_without_a_list_where_items_says_is_an_error_naming_the_path(orders):
    activate(poll_flow(items="orders"))
    orders.add(1)
    outcome, _ = polled()
    assert outcome.error == (
        "`items` (`orders`) is null (nothing there), not a list of items; set `items` to the "
        "path of the list in the answer (an answer that is a JSON list is the tool's `items`)"
    )
    assert Run.objects.count() == 0
    activate(poll_flow(items=None))  # the whole answer: an object
    assert "the tool's output is an object, not a list" in polled()[0].error


def test_an_item_without_a_key_starts_nothing_and_one_the_workflow_refuses_is_recorded_once(
    orders,
):
    activate(poll_flow())
    page = [
        {"total": 1},  # no id
        {"id": 7, "total": "a lot"},  # not a number: the run is refused
        {"id": 8, "total": 3},
    ]
    orders.fake.respond("orders", lambda request, match: FakeResponse.json({"data": page}))
    outcome, _ = polled()
    assert (outcome.unkeyed, outcome.refused, len(outcome.started)) == (1, 1, 1)
    refused = TriggerEvent.objects.get(event_key="item:list_orders:7")
    assert refused.outcome == EventOutcome.REFUSED
    assert refused.run is None
    assert "total" in refused.message
    again, _ = polled()  # the refused item is an event taken: not tried again
    assert (again.refused, again.started) == (0, [])


def test_a_dedup_key_of_any_shape_is_a_stable_key_a_long_one_hashed():
    assert event_key("t", "A-1") == "item:t:A-1"
    assert event_key("t", 12) == "item:t:12"
    assert event_key("t", {"b": 1, "a": 2}) == event_key("t", {"a": 2, "b": 1})
    assert event_key("t", {"a": 2}) == 'item:t:{"a": 2}'
    long = event_key("t" * 64, "x" * 500)
    assert long.startswith("item:" + "t" * 64 + ":sha256:")
    assert len(long) <= 200
    assert event_key("t" * 64, "x" * 500) == long


def test_a_new_interval_keeps_the_cursor_and_a_changed_poll_starts_no_item_twice(orders):
    activate(poll_flow(every=3600))
    orders.add(2)
    polled()
    pk = trigger_row().pk
    EventTrigger.objects.filter(pk=pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    activate(poll_flow(every=60))
    row = trigger_row()
    assert (row.pk, row.every_seconds, row.cursor) == (pk, 60, 2)
    assert row.next_poll_at <= timezone.now() + timedelta(seconds=60)  # not an hour on
    flow = poll_flow(every=60, cursor={"initial": 1, "next": "$max.id"})
    flow["triggers"].insert(0, {"on_workflow": {"name": "other"}, "inputs": {"order_id": 1}})
    activate(flow)  # the poll moved and its cursor changed: a new row, a fresh cursor
    row = trigger_row()
    assert row.pk != pk
    assert (row.position, row.cursor, row.cursor_version) == (1, None, 0)
    assert EventTrigger.objects.filter(kind=TriggerKind.POLL).count() == 1
    again, _ = polled()  # since=1: orders 1 and 2 again, both taken already
    assert (again.started, again.seen) == ([], 2)


def test_a_poll_of_a_row_the_active_version_no_longer_declares_does_nothing(orders):
    workflow = activate(poll_flow())
    orders.add(1)
    stale = trigger_row().pk
    Workflow.objects.filter(pk=workflow.pk).update(status="archived")
    assert poll_trigger(trigger_id=stale, start=Starts()) is None
    triggers_sync_declared(workflow=workflow)
    assert not EventTrigger.objects.filter(kind=TriggerKind.POLL).exists()
    assert orders.fake.requests("orders") == []


def test_a_run_whose_start_was_lost_is_started_by_the_sweep(orders):
    activate(poll_flow())
    orders.add(1)

    def lost(run_id: int) -> None:
        raise ConnectionError("broker unreachable")

    outcome = poll_trigger(trigger_id=trigger_row().pk, start=lost)
    assert len(outcome.started) == 1
    starts = Starts()
    later = timezone.now() + timedelta(minutes=2)
    triggers_sweep(now=later, start=starts)
    assert starts.run_ids == outcome.started


def test_the_on_workflow_lookup_never_reads_a_poll_as_a_workflow_waited_for(orders):
    from triggers.events import waited_for, waited_for_forget

    activate(poll_flow())
    waited_for_forget()
    assert not waited_for(workflow_name="list_orders")


def test_the_admin_poll_now_action_makes_the_trigger_due(orders, admin_client):
    activate(poll_flow(every=3600))
    row = trigger_row()
    EventTrigger.objects.filter(pk=row.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    response = admin_client.post(
        "/admin/triggers/eventtrigger/",
        {"action": "poll_now", "_selected_action": [row.pk]},
        follow=True,
    )
    assert "1 poll triggers due now" in response.content.decode()
    assert trigger_row().next_poll_at <= timezone.now()


def test_an_answer_that_is_a_json_list_is_read_as_the_tools_items(orders):
    orders.fake.respond("orders", lambda request, match: FakeResponse.json([{"id": 4}]))
    activate(poll_flow(items="items", cursor={"initial": 0, "next": "$last.id"}))
    outcome, _ = polled()
    assert (len(outcome.started), trigger_row().cursor) == (1, 4)


def test_a_tool_changed_since_approval_is_not_called(orders):
    from tools.registry import ToolRegistry
    from workflows.pins import workflow_tool_pins
    from workflows.services import workflow_spec

    workflow = activate(poll_flow())
    pins = workflow_tool_pins(spec=workflow_spec(workflow), registry=ToolRegistry.from_db())
    assert set(pins) == {"list_orders"}  # approving pins the polled tool
    Workflow.objects.filter(pk=workflow.pk).update(tool_pins=pins)
    orders.add(1)
    load_orders_tool(orders.fake.url + "/v2")  # its URL changed after the approval
    outcome, _ = polled()
    assert "tool `list_orders` changed since `order_intake v1` was approved" in outcome.error
    assert "re-approve the version" in outcome.error
    assert orders.fake.requests("orders") == []
    assert Run.objects.count() == 0


def test_a_workflow_that_cannot_run_takes_no_item_and_keeps_the_cursor(orders, monkeypatch):
    from tools.errors import FlowpilotError

    activate(poll_flow())
    orders.add(2)

    def refuse(**kwargs):
        raise FlowpilotError("tool `send_mail` changed since `order_intake v1` was approved")

    monkeypatch.setattr(polls, "run_create", refuse)
    outcome, _ = polled()
    assert outcome.started == []
    assert "changed since" in outcome.error
    assert (TriggerEvent.objects.count(), trigger_row().cursor_version) == (0, 0)
    monkeypatch.undo()
    monkeypatch.setenv("ORDERS_TOKEN", TOKEN)
    assert len(polled()[0].started) == 2  # once it can run, the items start
