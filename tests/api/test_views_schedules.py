"""Schedules over the API: manage them, refuse hostile rules naming the field, list fires."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from schedules.firing import schedule_fire
from schedules.models import Schedule
from tests.api.conftest import assert_error
from tests.factories import WorkflowFactory

pytestmark = pytest.mark.django_db

MANAGE = (
    "schedules.view_schedule",
    "schedules.add_schedule",
    "schedules.change_schedule",
    "schedules.delete_schedule",
    "schedules.view_schedulefire",
)
URL = "/api/v1/schedules/"
ONE = URL + "sales_report/nightly/"
NIGHTLY = {"workflow": "sales_report", "name": "nightly", "cron": "0 2 * * *"}


@pytest.fixture
def client(make_client, output_dir):
    WorkflowFactory(status="active")
    return make_client(*MANAGE)


@pytest.fixture
def nightly(client):
    body = {**NIGHTLY, "timezone": "Europe/Paris", "inputs": {"top": 2}, "jitter": 5}
    response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_create_stores_the_rule_and_policies_and_a_beat_entry(nightly):
    schedule = Schedule.objects.get()

    assert nightly["workflow"] == "sales_report"
    assert (nightly["cron"], nightly["timezone"], nightly["interval"]) == (
        "0 2 * * *",
        "Europe/Paris",
        None,
    )
    assert (nightly["inputs"], nightly["jitter"], nightly["overlap"]) == ({"top": 2}, 5, "skip")
    assert (nightly["catchup_window"], nightly["pause_after_failures"]) == (3600, None)
    assert schedule.periodic_task.crontab.timezone.key == "Europe/Paris"
    assert nightly["source"] == "operator"
    assert nightly["paused"] is False


def test_list_is_ordered_and_filters_by_workflow_and_paused(client, nightly):
    client.post(URL, {**NIGHTLY, "name": "hourly", "interval": 3600, "cron": ""}, format="json")
    client.post(ONE + "pause/", {}, format="json")

    every = client.get(URL).json()
    paused = client.get(URL, {"paused": "true"}).json()
    running = client.get(URL, {"paused": "false"}).json()
    other = client.get(URL, {"workflow": "nope"}).json()

    assert [s["name"] for s in every["results"]] == ["hourly", "nightly"]
    assert every["count"] == 2
    assert [s["name"] for s in paused["results"]] == ["nightly"]
    assert [s["name"] for s in running["results"]] == ["hourly"]
    assert other["results"] == []
    for bad in ("null", "", "yes"):  # given but not a boolean: a 400, not ignored
        body = assert_error(client.get(URL, {"paused": bad}), 400, "invalid")
        assert body["details"][0]["path"] == "paused"


def test_detail_update_pause_resume_and_delete(client, nightly):
    assert client.get(ONE).json() == nightly

    updated = client.put(ONE, {"interval": 600, "overlap": "allow_all"}, format="json")
    paused = client.post(ONE + "pause/", {"reason": "maintenance"}, format="json")
    again = client.post(ONE + "pause/", {}, format="json")
    resumed = client.post(ONE + "resume/")

    assert updated.status_code == 200, updated.json()
    assert (updated.json()["cron"], updated.json()["interval"]) == ("", 600)
    assert updated.json()["overlap"] == "allow_all"
    assert (paused.json()["paused"], paused.json()["paused_reason"]) == (True, "maintenance")
    assert again.json()["paused_reason"] == "maintenance"  # already paused: unchanged
    assert (resumed.json()["paused"], resumed.json()["paused_reason"]) == (False, "")
    assert client.delete(ONE).status_code == 204
    assert not Schedule.objects.exists()
    assert_error(client.get(ONE), 404, "not_found")


def test_the_fire_log_lists_fires_and_events_newest_first_paginated(
    client, nightly, django_capture_on_commit_callbacks
):
    schedule = Schedule.objects.get()
    starts: list = []
    now = datetime(2026, 6, 1, 0, 30, tzinfo=UTC)  # 02:30 in Paris: the 02:00 fire is due
    with django_capture_on_commit_callbacks(execute=True):
        fire = schedule_fire(
            schedule_id=schedule.pk,
            now=now,
            start=lambda run_id, delay: starts.append(run_id),
            rng=random.Random(7),
        )
    client.post(ONE + "pause/", {"reason": "maintenance"}, format="json")

    log = client.get(ONE + "fires/").json()
    first = client.get(ONE + "fires/", {"limit": 1}).json()

    assert log["count"] == 2
    assert fire.run_id is not None
    assert starts == [fire.run_id]
    assert [f["outcome"] for f in log["results"]] == ["paused", "started"]
    assert log["results"][1]["fire_time"] == "2026-06-01T00:00:00Z"
    assert log["results"][1]["run"] == fire.run_id
    assert log["results"][0]["detail"] == "maintenance"
    assert [f["id"] for f in first["results"]] == [log["results"][0]["id"]]
    assert first["next"] is not None


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"cron": "0 2 * *"}, "cron"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"cron": "* * * * * *"}, "cron"),  # a sixth field: every second
        ({"cron": "", "interval": 0}, "interval"),
        ({"cron": "0 0 30 2 *"}, "cron"),  # February 30: never fires
        ({"cron": "", "interval": 366 * 86400 + 1}, "interval"),  # over a year: use a cron
        ({"interval": 60}, "cron"),  # both: exactly one of them
        ({"workflow": "nope"}, "workflow"),
        ({"name": "Bad Name"}, "name"),
        ({"jitter": -1}, "jitter"),
        ({"pause_after_failures": 0}, "pause_after_failures"),
    ],
)
def test_hostile_rules_are_refused_naming_the_field(client, changes, field):
    response = client.post(URL, {**NIGHTLY, **changes}, format="json")

    body = assert_error(response, 400, "schedule_invalid")
    assert [d["path"] for d in body["details"]] == [field]
    assert f"`{field}`" in body["message"]
    assert not Schedule.objects.exists()


def test_a_hostile_update_is_refused_and_changes_nothing(client, nightly):
    response = client.put(ONE, {"cron": "* * * * * *"}, format="json")

    body = assert_error(response, 400, "schedule_invalid")
    assert body["details"][0]["path"] == "cron"
    assert Schedule.objects.get().cron == "0 2 * * *"


def test_a_malformed_body_is_a_validation_error(client):
    response = client.post(URL, {"workflow": "sales_report", "overlap": "sometimes"}, format="json")

    body = assert_error(response, 400, "invalid")
    assert {d["path"] for d in body["details"]} == {"name", "overlap"}


def test_an_unknown_schedule_is_a_404(client):
    for url in (URL + "sales_report/nope/", URL + "sales_report/nope/fires/"):
        assert_error(client.get(url), 404, "not_found")
    assert_error(client.post(URL + "sales_report/nope/pause/"), 404, "not_found")


ENDPOINTS = [
    ("get", URL),
    ("post", URL),
    ("get", ONE),
    ("put", ONE),
    ("delete", ONE),
    ("post", ONE + "pause/"),
    ("post", ONE + "resume/"),
    ("get", ONE + "fires/"),
]


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_anonymous_callers_are_refused(anon, nightly, method, url):
    assert_error(getattr(anon, method)(url, {}, format="json"), 401, "not_authenticated")
    assert Schedule.objects.get().paused is False


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_callers_without_the_permission_are_refused(make_client, nightly, method, url):
    viewer = make_client("schedules.view_schedule")
    nobody = make_client()

    response = getattr(nobody, method)(url, {}, format="json")

    assert_error(response, 403, "permission_denied")
    if (method, url) not in {("get", URL), ("get", ONE)}:  # a viewer may only read
        assert_error(getattr(viewer, method)(url, {}, format="json"), 403, "permission_denied")
    assert Schedule.objects.get().paused is False


def test_seconds_beyond_what_the_database_holds_are_refused(client):
    response = client.post(URL, {**NIGHTLY, "cron": "", "interval": 2**31}, format="json")

    body = assert_error(response, 400, "invalid")
    assert [d["path"] for d in body["details"]] == ["interval"]
