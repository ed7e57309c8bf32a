"""``/metrics`` (health/metrics.py): off is a 404, a stranger gets a 401, a staff user or
the token gets the counters and the state read at the scrape."""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.engine.metrics import forget_process_metrics, process_metrics
from tests.factories import RunFactory, UserFactory
from tools.breaker.core import BreakerPolicy
from tools.breaker.db_store import DatabaseBreakerStore

pytestmark = pytest.mark.django_db

TOKEN = "metrics-token-7f3e"


@pytest.fixture
def on(settings):
    forget_process_metrics()
    settings.FLOWPILOT_METRICS = True
    settings.FLOWPILOT_METRICS_TOKEN = TOKEN
    settings.FLOWPILOT_BREAKER_BACKEND = "database"
    yield settings
    forget_process_metrics()


def test_off_is_not_found(client, settings):
    settings.FLOWPILOT_METRICS = False
    assert client.get("/metrics").status_code == 404


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer "])
def test_a_stranger_is_refused(client, on, header):
    extra = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = client.get("/metrics", **extra)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="flowpilot metrics"'
    assert b"flowpilot_" not in response.content


def test_no_token_configured_lets_no_bearer_in(client, on):
    on.FLOWPILOT_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_a_non_staff_user_is_refused(client, on):
    client.force_login(UserFactory(username="someone", is_staff=False))
    assert client.get("/metrics").status_code == 401


def test_the_token_reads_the_counters_and_the_state_now(client, on):
    metrics = process_metrics()
    assert metrics is not None
    metrics.try_done(workflow="w", tool="t", status="succeeded", seconds=0.02, number=2, error=None)
    RunFactory(status="running")
    RunFactory(status="running")
    RunFactory(status="succeeded")
    DatabaseBreakerStore().record_failure(
        "api.example.com:443", now=timezone.now(), policy=BreakerPolicy(failures=1, cooldown=60)
    )

    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    text = response.content.decode()
    assert 'flowpilot_step_tries_total{status="succeeded",tool="t",workflow="w"} 1.0' in text
    assert 'flowpilot_step_retries_total{tool="t",workflow="w"} 1.0' in text
    assert 'flowpilot_runs_in_progress{status="running"} 2.0' in text
    assert 'status="succeeded"} ' not in text.split("flowpilot_runs_in_progress")[-1]
    assert 'flowpilot_breaker_state{host="api.example.com:443"} 2.0' in text
    assert "flowpilot_queue_length" in text  # no broker here: the family, no samples


def test_a_staff_user_reads_them_too(client, on):
    client.force_login(UserFactory(username="ops"))
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"flowpilot_runs_in_progress" in response.content


def test_a_bearer_of_any_text_is_refused_not_an_error(client, on):
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer m\u00e9trics")
    assert response.status_code == 401


def test_a_part_that_cannot_be_read_leaves_the_rest(client, on, monkeypatch):
    def down():
        raise ConnectionError("breaker store unreachable")

    monkeypatch.setattr("health.metrics._breaker_values", down)
    RunFactory(status="running")
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'flowpilot_runs_in_progress{status="running"} 1.0' in text
    assert "flowpilot_breaker_state" in text  # the family, without samples
    assert "flowpilot_breaker_state{host=" not in text
