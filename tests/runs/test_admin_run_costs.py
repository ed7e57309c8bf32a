"""The run page says what the run's model calls cost, and each step that called a model
its own, beside the step; a run that called none says nothing of it. The costs are two
queries whatever the steps, and the status polls read none."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import LLMCallState
from tests.factories import LLMCallFactory, UserFactory, finished_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_client(client):
    client.force_login(UserFactory(username="root", superuser=True))
    return client


def _page(client, run) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(f"/admin/runs/run/{run.pk}/change/")
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def _card(html: str, step_id: str) -> str:
    """The step's card on the page."""
    match = re.search(
        rf'<article class="fp-step [^"]*" data-step-id="{step_id}".*?</article>', html, re.S
    )
    assert match is not None, step_id
    return match.group(0)


def _timeline_row(html: str, step_id: str) -> str:
    match = re.search(
        rf'<div class="fp-gantt-row [^"]*" role="row" data-step-id="{step_id}".*?</div>', html, re.S
    )
    assert match is not None, step_id
    return match.group(0)


def test_the_run_and_each_step_show_their_cost(root_client):
    run = finished_run(3)
    LLMCallFactory(run=run, step_id="s0001")
    LLMCallFactory(run=run, step_id="s0001", prompt_tokens=1200, completion_tokens=30)
    LLMCallFactory(run=run, step_id="s0002", model="local-model", cost_pico=None)

    html, _ = _page(root_client, run)

    assert (
        '<p class="fp-run-cost" id="fp-run-cost">Model cost: $0.0200 over 3 model calls '
        "(1,400 prompt + 50 completion tokens); 1 at a model with no price, not in the "
        "total</p>"
    ) in html
    assert (
        '<p class="fp-step-cost">Model cost: $0.0200 over 2 model calls '
        "(1,300 prompt + 40 completion tokens)</p>"
    ) in _card(html, "s0001")
    assert (
        '<p class="fp-step-cost">Model cost: $0.0000 over 1 model call '
        "(100 prompt + 10 completion tokens); 1 at a model with no price, not in the total</p>"
    ) in _card(html, "s0002")
    assert "fp-step-cost" not in _card(html, "s0000")
    assert '<span class="fp-gantt-cost" title="model cost">$0.0200</span>' in _timeline_row(
        html, "s0001"
    )
    assert "fp-gantt-cost" not in _timeline_row(html, "s0000")


def test_a_call_in_flight_counts_at_its_estimate(root_client):
    run = finished_run(1)
    LLMCallFactory(run=run, step_id="s0000", state=LLMCallState.RESERVED, prompt_tokens=0)

    html, _ = _page(root_client, run)

    assert (
        "Model cost: $0.0100 over 1 model call (0 prompt + 10 completion tokens); "
        "1 in flight, at their estimate"
    ) in html


def test_a_run_that_called_no_model_says_nothing_of_it(root_client):
    run = finished_run(2)
    LLMCallFactory(step_id="s0000")  # another run's call

    html, _ = _page(root_client, run)

    assert "fp-run-cost" not in html
    assert "fp-step-cost" not in html
    assert "fp-gantt-cost" not in html
    assert "Model cost" not in html


def test_the_costs_are_two_queries_whatever_the_steps(root_client):
    small, large = finished_run(2, name="small_flow"), finished_run(60, name="large_flow")
    for run, steps in ((small, 2), (large, 60)):
        for i in range(steps):
            LLMCallFactory(run=run, step_id=f"s{i:04d}")
    _page(root_client, small)  # the first page of the process reads the session, etc.

    html, queries = _page(root_client, large)

    assert len(queries) == len(_page(root_client, small)[1])
    assert len([q for q in queries if "runs_llmcall" in q]) == 2
    assert "Model cost: $0.6000 over 60 model calls" in html


def test_the_status_polls_read_no_cost(root_client):
    run = finished_run(2)
    LLMCallFactory(run=run, step_id="s0000")

    with CaptureQueriesContext(connection) as captured:
        response = root_client.get(f"/admin/runs/run/{run.pk}/status.json")

    assert response.status_code == 200
    assert "cost" not in response.content.decode()
    assert not [q for q in captured.captured_queries if "runs_llmcall" in q["sql"]]


def test_the_page_links_to_the_runs_trace_when_a_trace_url_is_configured(root_client, settings):
    run = finished_run(1)
    html, _ = _page(root_client, run)
    assert 'id="fp-run-trace"' not in html

    settings.FLOWPILOT_TRACE_URL = "https://tempo.example/explore?trace={trace_id}&x=1"
    html, _ = _page(root_client, run)

    assert (
        f'<a href="https://tempo.example/explore?trace={run.uuid.hex}&amp;x=1" target="_blank" '
        f'rel="noopener noreferrer">Its trace</a> (trace id {run.uuid.hex})'
    ) in html
