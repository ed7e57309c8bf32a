"""The circuit breaker in runs: a step refused by an open breaker fails fast with
``circuit_open``, and a retry waits for the breaker's retry time instead of spinning
through its attempts. Runs go through ``runflow`` against the recording fake."""

from __future__ import annotations

import pytest

from runs.models import Run, StepResult
from tests.conftest import write_flow
from tests.runs.test_e2e_failures import repo_flow, runflow
from tools.breaker.core import breaker_host

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
