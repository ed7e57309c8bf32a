"""The circuit breaker in runs: a step refused by an open breaker fails fast with
``circuit_open``, and a retry waits for the breaker's retry time instead of spinning
through its attempts. Runs go through ``runflow`` against the recording fake."""

from __future__ import annotations

import pytest
from django.db import connection

from runs.models import Run, StepResult
from tests.conftest import write_flow
from tests.runs.test_e2e_failures import repo_flow, runflow
from tools.breaker.core import breaker_host
from tools.breaker.db_store import DatabaseBreakerStore

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def breaker_settings(settings):
    settings.FLOWPILOT_BREAKER_BACKEND = "database"
    settings.FLOWPILOT_BREAKER_FAILURES = 2
    settings.FLOWPILOT_BREAKER_COOLDOWN = 0.4
    return settings


def test_a_retry_waits_for_the_half_open_trial(fake_api, cli, tmp_path, breaker_settings):
    fake_api.fail("github_repo", status=503, times=2)
    retry = {"max_attempts": 4, "initial_delay": 0.01, "max_delay": 5, "jitter": 0}
    flow = write_flow(tmp_path, repo_flow(retry=retry))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 0, result.out + result.err
    assert [r.status for r in fake_api.requests("github_repo")] == [503, 503, 200]
    log = StepResult.objects.get().attempt_log
    assert [a["error"]["type"] for a in log[:3]] == ["http_error", "http_error", "circuit_open"]
    refused = log[2]
    assert refused["error"]["host"] == breaker_host(fake_api.url)
    assert 0.2 < refused["retry_in"] <= 0.4  # until the breaker's retry time, not 0.04 s
    assert log[3]["status"] == "succeeded"  # the half-open trial


def test_a_run_against_an_open_breaker_fails_fast(fake_api, cli, tmp_path, breaker_settings):
    breaker_settings.FLOWPILOT_BREAKER_COOLDOWN = 600
    fake_api.fail("github_repo", status=503)
    flow = write_flow(tmp_path, repo_flow(retry={"max_attempts": 2, "initial_delay": 0}))
    assert runflow(cli, flow, "owner=octo-org", "repo=widgets").code == 1
    assert len(fake_api.requests("github_repo")) == 2  # the second failure opened it

    once = write_flow(tmp_path, repo_flow(retry={"max_attempts": 1}), name="once.yaml")
    result = runflow(cli, once, "owner=octo-org", "repo=widgets")

    assert result.code == 1
    assert len(fake_api.requests("github_repo")) == 2  # nothing sent
    step = StepResult.objects.get(run=Run.objects.order_by("-pk")[0])
    assert step.error["type"] == "circuit_open"
    assert step.error["host"] == breaker_host(fake_api.url)
    assert step.error["retry_at"] in step.error["message"]
    assert "circuit breaker" in result.out + result.err


def test_a_healthy_host_costs_the_step_threads_no_statement(
    fake_api, cli, tmp_path, breaker_settings, monkeypatch
):
    """In process, the database store is read by the run's coordinating thread (the set
    of hosts with a row); a call to a healthy host reads nothing from its step thread."""
    admitted, listed = [], []
    monkeypatch.setattr(DatabaseBreakerStore, "admit", _spy(DatabaseBreakerStore.admit, admitted))
    monkeypatch.setattr(DatabaseBreakerStore, "hosts", _spy(DatabaseBreakerStore.hosts, listed))
    flow = write_flow(tmp_path, repo_flow())

    assert runflow(cli, flow, "owner=octo-org", "repo=widgets").code == 0
    assert admitted == []
    assert len(listed) >= 1
    assert len(fake_api.requests("github_repo")) == 1


def test_a_run_leaves_no_database_connection_behind(fake_api, cli, tmp_path, breaker_settings):
    """A step thread that had to read or write a breaker row (a failing host) closes its
    connection: runs do not pile up idle sessions on the database."""
    if connection.vendor != "postgresql":
        pytest.skip("counts the server's sessions: the PostgreSQL pass")
    breaker_settings.FLOWPILOT_BREAKER_FAILURES = 5
    fake_api.fail("github_repo", status=503, times=2)
    retry = {"max_attempts": 3, "initial_delay": 0.01, "jitter": 0}
    flow = write_flow(tmp_path, repo_flow(retry=retry))
    before = _sessions()

    for _ in range(3):
        assert runflow(cli, flow, "owner=octo-org", "repo=widgets").code == 0

    assert _sessions() == before
    assert [r.status for r in fake_api.requests("github_repo")] == [503, 503, 200, 200, 200]


def _spy(method, calls: list):
    def spied(self, *args, **kwargs):
        calls.append(args)
        return method(self, *args, **kwargs)

    return spied


def _sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        )
        return cursor.fetchone()[0]
