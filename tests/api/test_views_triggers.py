"""Event and poll triggers over the REST API: listed and filtered, read-only, with the
events they took; a poll trigger made due now by whoever may start runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import RunTrigger
from tests.api.conftest import assert_error
from tests.factories import RunFactory
from triggers.models import EventTrigger, TriggerEvent

pytestmark = pytest.mark.django_db

VIEW = ("triggers.view_eventtrigger",)


@pytest.fixture
def rows():
    later = timezone.now() + timedelta(hours=1)
    waits = EventTrigger.objects.create(
        workflow_name="report", position=0, kind="on_workflow", source="nightly",
        statuses="failed,succeeded",
    )  # fmt: skip
    polls = EventTrigger.objects.create(
        workflow_name="intake", position=1, kind="poll", source="list_orders", statuses="",
        every_seconds=300, next_poll_at=later, cursor={"since": 41}, cursor_version=3,
        last_error="GET https://api.example.com/orders returned HTTP 503",
    )  # fmt: skip
    source, started = RunFactory(status="succeeded"), RunFactory(trigger=RunTrigger.EVENT)
    TriggerEvent.objects.create(
        workflow_name="report", position=0, event_key="run:a", source_run=source, run=started,
        outcome="started",
    )  # fmt: skip
    TriggerEvent.objects.create(
        workflow_name="intake", position=1, event_key="item:42", outcome="refused",
        message="inputs invalid: `total` must be a number",
    )  # fmt: skip
    return waits, polls, source, started


def test_the_triggers_are_listed_with_what_each_waits_for_or_polls(make_client, rows):
    waits, polls, _, _ = rows
    client = make_client(*VIEW)
    body = client.get("/api/v1/triggers/").json()
    assert body["count"] == 2
    by_workflow = {row["workflow"]: row for row in body["results"]}
    assert by_workflow["report"]["statuses"] == ["failed", "succeeded"]
    assert by_workflow["report"]["source"] == "nightly"
    polled = by_workflow["intake"]
    assert (polled["kind"], polled["source"], polled["every_seconds"]) == (
        "poll",
        "list_orders",
        300,
    )
    assert (polled["cursor"], polled["cursor_version"], polled["statuses"]) == (
        {"since": 41},
        3,
        [],
    )
    assert "HTTP 503" in polled["last_error"]
    only = client.get("/api/v1/triggers/", {"kind": "poll"}).json()["results"]
    assert [row["id"] for row in only] == [polls.pk]
    named = client.get("/api/v1/triggers/", {"workflow": "report"}).json()["results"]
    assert [row["id"] for row in named] == [waits.pk]
    assert client.get(f"/api/v1/triggers/{polls.pk}/").json()["source"] == "list_orders"


def test_the_events_are_listed_newest_first_and_filtered(make_client, rows):
    _, _, source, started = rows
    client = make_client("triggers.view_triggerevent")
    body = client.get("/api/v1/trigger-events/").json()
    assert [e["event_key"] for e in body["results"]] == ["item:42", "run:a"]
    refused = body["results"][0]
    assert (refused["run"], refused["source_run"], refused["outcome"]) == (None, None, "refused")
    assert "`total` must be a number" in refused["message"]
    by_source = client.get("/api/v1/trigger-events/", {"source_run": source.pk}).json()
    assert [(e["source_run"], e["run"]) for e in by_source["results"]] == [(source.pk, started.pk)]
    assert client.get("/api/v1/trigger-events/", {"run": started.pk}).json()["count"] == 1
    assert client.get("/api/v1/trigger-events/", {"outcome": "refused"}).json()["count"] == 1


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"kind": "cron"}, "kind"),
        ({"source_run": "1.5"}, "source_run"),
        ({"run": "0"}, "run"),
        ({"run": str(2**63)}, "run"),
        ({"outcome": "maybe"}, "outcome"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(make_client, rows, params, field):
    client = make_client(*VIEW, "triggers.view_triggerevent")
    url = "/api/v1/triggers/" if "kind" in params else "/api/v1/trigger-events/"
    response = client.get(url, params)
    assert response.status_code == 400
    assert field in str(response.json())


def test_poll_now_makes_a_poll_trigger_due_for_whoever_may_start_runs(make_client, rows):
    waits, polls, _, _ = rows
    refused = make_client(*VIEW).post(f"/api/v1/triggers/{polls.pk}/poll/")
    assert refused.status_code == 403
    client = make_client(*VIEW, "runs.add_run")
    before = timezone.now()
    response = client.post(f"/api/v1/triggers/{polls.pk}/poll/")
    assert response.status_code == 200, response.json()
    polls.refresh_from_db()
    assert before <= polls.next_poll_at <= timezone.now()
    not_a_poll = client.post(f"/api/v1/triggers/{waits.pk}/poll/")
    assert_error(not_a_poll, 400, "invalid")
    assert "only a poll trigger can be polled" in str(not_a_poll.json())
    assert client.post("/api/v1/triggers/999999/poll/").status_code == 404


def test_reading_needs_the_view_permissions_and_nothing_is_written(make_client, rows):
    _, polls, _, _ = rows
    nobody = make_client()
    assert nobody.get("/api/v1/triggers/").status_code == 403
    assert nobody.get("/api/v1/trigger-events/").status_code == 403
    client = make_client(*VIEW)
    assert client.patch(f"/api/v1/triggers/{polls.pk}/", {"cursor": 1}).status_code == 405
    assert client.delete(f"/api/v1/triggers/{polls.pk}/").status_code == 405
