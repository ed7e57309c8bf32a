"""Runs over the API: create (Idempotency-Key), list filters, detail, cancel, resume, wait."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import runs.idempotency
from runs.models import Run, RunIdempotencyKey
from tests.api.conftest import assert_error, client_for, grant
from tests.factories import RunFactory, UserFactory, WorkflowFactory, sales_report_data

VIEW = "runs.view_run"
ADD = "runs.add_run"
OPERATE = "runs.operate_run"


@pytest.fixture
def active(db):
    return WorkflowFactory(status="active")


@pytest.mark.django_db
def test_create_runs_the_active_version_and_shows_its_steps(make_client, active, output_dir):
    client = make_client(VIEW, ADD)

    response = client.post(
        "/api/v1/runs/", {"workflow": "sales_report", "inputs": {"top": 2}}, format="json"
    )

    assert response.status_code == 201, response.json()
    run = response.json()
    assert (run["workflow"], run["version"], run["trigger"], run["status"]) == (
        "sales_report",
        1,
        "api",
        "succeeded",
    )
    assert run["outputs"]["rows_read"] == 40
    steps = {s["step_id"]: s for s in run["steps"]}
    assert steps["load"]["inputs"] == {"path": "data/sales.csv"}
    assert steps["load"]["attempts"] == 1
    assert steps["load"]["attempt_log"]
    assert steps["top_products"]["status"] == "succeeded"
    assert steps["report"]["started_at"]
    assert steps["report"]["finished_at"]
    # Who started it is recorded and shown; a run from the command line has no one.
    assert run["started_by"] == client.user.username
    assert Run.objects.get(pk=run["id"]).started_by == client.user
    listed = client.get("/api/v1/runs/").json()["results"]
    assert [r["started_by"] for r in listed] == [client.user.username]
    RunFactory(workflow=active)
    assert client.get("/api/v1/runs/?trigger=cli").json()["results"][0]["started_by"] is None


@pytest.mark.django_db
def test_a_version_pending_review_is_refused_naming_its_state(make_client, db):
    WorkflowFactory(status="pending_review")
    client = make_client(VIEW, ADD)
    for body in ({"workflow": "sales_report", "version": 1}, {"workflow": "sales_report"}):
        refused = assert_error(
            client.post("/api/v1/runs/", body, format="json"), 409, "workflow_not_active"
        )
        assert "v1 is pending_review, not active" in refused["message"]
        assert refused["details"][0]["status"] == "pending_review"
    assert not Run.objects.exists()


def test_create_refusals_name_the_problem(make_client, active):
    client = make_client(VIEW, ADD)
    body = assert_error(
        client.post(
            "/api/v1/runs/", {"workflow": "sales_report", "inputs": {"top": "x"}}, format="json"
        ),
        400,
        "inputs_invalid",
    )
    assert body["details"][0]["path"] == "inputs.top"
    assert_error(client.post("/api/v1/runs/", {"workflow": "nope"}), 404, "workflow_not_found")
    assert_error(
        client.post("/api/v1/runs/", {"workflow": "sales_report", "version": 3}),
        404,
        "workflow_not_found",
    )
    assert_error(client.post("/api/v1/runs/", {}), 400, "invalid")
    assert_error(
        make_client(VIEW).post("/api/v1/runs/", {"workflow": "sales_report"}),
        403,
        "permission_denied",
    )
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_one_idempotency_key_one_run(make_client, active, output_dir):
    client = make_client(VIEW, ADD)
    request = {"workflow": "sales_report", "inputs": {"top": 2}}

    first = client.post("/api/v1/runs/", request, format="json", HTTP_IDEMPOTENCY_KEY="order-7")
    again = client.post("/api/v1/runs/", request, format="json", HTTP_IDEMPOTENCY_KEY="order-7")
    other = make_client(VIEW, ADD).post(
        "/api/v1/runs/", request, format="json", HTTP_IDEMPOTENCY_KEY="order-7"
    )

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]
    assert Run.objects.count() == 2  # keys are per user
    changed = {"workflow": "sales_report", "inputs": {"top": 3}}
    body = assert_error(
        client.post("/api/v1/runs/", changed, format="json", HTTP_IDEMPOTENCY_KEY="order-7"),
        422,
        "idempotency_key_reused",
    )
    assert str(first.json()["id"]) in body["message"]
    assert_error(
        client.post("/api/v1/runs/", request, format="json", HTTP_IDEMPOTENCY_KEY="x" * 300),
        400,
        "idempotency_key_invalid",
    )


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_posts_with_one_key_create_one_run(monkeypatch, output_dir):
    if connection.vendor != "postgresql":
        pytest.skip("two writers from two threads need PostgreSQL in tests (SQLite locks)")
    WorkflowFactory(status="active")
    user = grant(UserFactory(username="racer", permissions=None), VIEW, ADD)
    both_checked = threading.Barrier(2, timeout=10)
    create = runs.idempotency.run_create

    def create_after_both_checked(**kwargs):
        both_checked.wait()  # each request has seen no key yet: a real race
        return create(**kwargs)

    monkeypatch.setattr(runs.idempotency, "run_create", create_after_both_checked)
    answers: list = []

    def post() -> None:
        try:
            answers.append(
                client_for(user).post(
                    "/api/v1/runs/",
                    {"workflow": "sales_report"},
                    format="json",
                    HTTP_IDEMPOTENCY_KEY="same",
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(a.status_code for a in answers) == [200, 201], [a.json() for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    assert Run.objects.count() == 1
    assert RunIdempotencyKey.objects.count() == 1


@pytest.mark.django_db
def test_list_filters_and_orders_newest_first(make_client, active):
    other = WorkflowFactory(data=sales_report_data(name="other"), status="active")
    old = RunFactory(workflow=active, status="failed", trigger="cli")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    new = RunFactory(workflow=active, status="succeeded", trigger="api")
    elsewhere = RunFactory(workflow=other, status="succeeded", trigger="api")
    client = make_client(VIEW)

    def ids(**query):
        return [r["id"] for r in client.get("/api/v1/runs/", query).json()["results"]]

    hooked = RunFactory(workflow=active, status="succeeded", trigger="webhook")
    agent = RunFactory(workflow=active, status="succeeded", trigger="mcp")
    assert (ids(trigger="webhook"), ids(trigger="mcp")) == ([hooked.pk], [agent.pk])
    Run.objects.filter(pk__in=[hooked.pk, agent.pk]).delete()
    assert ids() == [elsewhere.pk, new.pk, old.pk]
    assert ids(workflow="sales_report") == [new.pk, old.pk]
    assert ids(status="failed") == [old.pk]
    assert ids(trigger="api", workflow="other") == [elsewhere.pk]
    since = (timezone.now() - timedelta(days=1)).isoformat()
    assert ids(created_after=since) == [elsewhere.pk, new.pk]
    assert ids(created_before=since) == [old.pk]
    assert_error(client.get("/api/v1/runs/", {"status": "bogus"}), 400, "invalid")
    assert_error(client.get("/api/v1/runs/", {"created_after": "yesterday"}), 400, "invalid")
    # Offsets PostgreSQL refuses are read as the same instant in UTC; a time that has
    # no UTC form is a 400, not a database error.
    far = (timezone.now() - timedelta(days=1)).astimezone(timezone.get_fixed_timezone(-1164))
    assert ids(created_after=far.isoformat()) == [elsewhere.pk, new.pk]
    early = {"created_before": "0001-01-01T00:00:00+01:00"}
    assert_error(client.get("/api/v1/runs/", early), 400, "invalid")


@pytest.mark.django_db
def test_cancel_resume_and_their_permissions(make_client, active, output_dir):
    from runs.services import run_create

    run = run_create(workflow=active, trigger="api")  # pending, with its steps
    url = f"/api/v1/runs/{run.pk}/"
    assert_error(make_client(VIEW).post(url + "cancel/"), 403, "permission_denied")
    client = make_client(VIEW, OPERATE)

    assert client.post(url + "cancel/").json()["status"] == "cancelled"
    resumed = client.post(url + "resume/", {}, format="json").json()

    assert resumed["status"] == "succeeded"
    assert_error(client.post(url + "resume/", {}), 409, "run_state_invalid")
    assert_error(client.post("/api/v1/runs/999999/cancel/"), 404, "not_found")


@pytest.mark.django_db
def test_wait_answers_at_once_for_a_finished_run_and_after_the_timeout_otherwise(
    make_client, active, settings
):
    settings.FLOWPILOT_API_MAX_WAIT = 0.3
    done = RunFactory(workflow=active, status="succeeded")
    running = RunFactory(workflow=active, status="running")
    client = make_client(VIEW)

    assert client.get(f"/api/v1/runs/{done.pk}/wait/").json()["status"] == "succeeded"
    started = timezone.now()
    body = client.get(f"/api/v1/runs/{running.pk}/wait/", {"timeout": 120}).json()
    waited = (timezone.now() - started).total_seconds()

    assert body["status"] == "running"
    assert 0.3 <= waited < 5  # capped at FLOWPILOT_API_MAX_WAIT
    assert_error(client.get(f"/api/v1/runs/{done.pk}/wait/", {"timeout": -1}), 400, "invalid")
    assert_error(client.get("/api/v1/runs/999999/wait/"), 404, "not_found")


@pytest.mark.django_db
def test_wait_returns_when_the_run_finishes():
    from runs.waiting import run_wait

    workflow = WorkflowFactory(status="active")
    run = RunFactory(workflow=workflow, status="running")
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds
        Run.objects.filter(pk=run.pk).update(status="succeeded")

    found, finished = run_wait(run_id=run.pk, timeout=10, clock=lambda: now[0], sleep=sleep)

    assert finished
    assert found.status == "succeeded"
    assert now[0] == 0.25


@pytest.mark.django_db
def test_anonymous_is_401_everywhere(anon, active):
    run = RunFactory(workflow=active, status="succeeded")
    for url in (
        "/api/v1/runs/",
        f"/api/v1/runs/{run.pk}/",
        "/api/v1/runs/999/",
        "/api/v1/tools/",
        "/api/v1/workflows/",
        "/api/v1/plans/",
        "/api/v1/webhooks/",
    ):
        body = assert_error(anon.get(url), 401, "not_authenticated")
        assert body["details"] == []
    schema = anon.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert_error(schema, 401, "not_authenticated")
    assert anon.get("/api/v1/docs/").status_code == 401
    assert anon.get("/api/v1/redoc/").status_code == 401
    assert_error(anon.post("/api/v1/runs/", {"workflow": "sales_report"}), 401, "not_authenticated")
    assert not Run.objects.exclude(pk=run.pk).exists()


@pytest.mark.django_db
def test_bad_filter_and_page_values_are_a_400_naming_the_parameter(make_client, active):
    first = RunFactory(workflow=active, status="succeeded")
    RunFactory(workflow=active, status="failed")
    client = make_client(VIEW)

    for query in (
        {"version": "0.5"},
        {"version": "1e3"},
        {"version": str(10**30)},
        {"created_before": ""},
        {"created_after": " "},
        {"offset": "null"},
        {"offset": "-1"},
        {"limit": "null"},
        {"limit": "0"},
    ):
        body = assert_error(client.get("/api/v1/runs/", query), 400, "invalid")
        assert body["details"][0]["path"] == next(iter(query)), (query, body)
    huge = "9" * 5000  # read as the most, without parsing 5,000 digits
    page = client.get("/api/v1/runs/", {"version": "1", "limit": huge, "offset": "1"}).json()
    assert [r["id"] for r in page["results"]] == [first.pk]  # a limit past 1000 reads as 1000


@pytest.mark.django_db
def test_a_wait_timeout_that_is_not_a_finite_number_is_a_400(make_client, active, settings):
    settings.FLOWPILOT_API_MAX_WAIT = 0.3
    running = RunFactory(workflow=active, status="running")
    client = make_client(VIEW)

    for value in ("nan", "NaN", "inf", "-inf", "1" * 5000):
        response = client.get(f"/api/v1/runs/{running.pk}/wait/", {"timeout": value})
        assert_error(response, 400, "invalid")
