"""Runs over the API say what their model calls cost: ``llm_cost`` on the run (detail and
list; the amount exact, as decimal text) and on each step (null: it called no model)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import LLMCallState
from tests.factories import LLMCallFactory, RunFactory, StepResultFactory
from tools.llm.prices import PICO

pytestmark = pytest.mark.django_db

VIEW = "runs.view_run"
NOTHING = {
    "usd": "0",
    "calls": 0,
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "unpriced_calls": 0,
    "in_flight": 0,
    "estimated_calls": 0,
}


@pytest.fixture
def run():
    """A run whose `report` step called a model twice, $0.01 each; `load` called none."""
    run = RunFactory()
    StepResultFactory(run=run, step_id="load")
    StepResultFactory(run=run, step_id="report")
    LLMCallFactory(run=run, step_id="report", cost_pico=PICO // 100)
    LLMCallFactory(run=run, step_id="report", cost_pico=PICO // 100, prompt_tokens=900)
    return run


def test_the_detail_has_the_run_s_and_each_step_s_cost(make_client, run):
    body = make_client(VIEW).get(f"/api/v1/runs/{run.pk}/").json()

    expected = {
        "usd": "0.02",
        "calls": 2,
        "prompt_tokens": 1000,
        "completion_tokens": 20,
        "unpriced_calls": 0,
        "in_flight": 0,
        "estimated_calls": 0,
    }
    assert body["llm_cost"] == expected
    steps = {step["step_id"]: step for step in body["steps"]}
    assert steps["report"]["llm_cost"] == expected
    assert steps["load"]["llm_cost"] is None


def test_the_amount_is_exact_with_unpriced_and_in_flight_calls(make_client):
    run = RunFactory()
    StepResultFactory(run=run, step_id="report")
    LLMCallFactory(run=run, step_id="report", cost_pico=450_000_000)  # $0.00045
    LLMCallFactory(run=run, step_id="report", cost_pico=None, model="local")
    LLMCallFactory(run=run, step_id="report", state=LLMCallState.RESERVED, cost_pico=1)

    body = make_client(VIEW).get(f"/api/v1/runs/{run.pk}/").json()

    assert body["llm_cost"]["usd"] == "0.000450000001"
    assert (body["llm_cost"]["unpriced_calls"], body["llm_cost"]["in_flight"]) == (1, 1)
    assert body["steps"][0]["llm_cost"] == body["llm_cost"]


def test_a_run_that_called_no_model_costs_nothing(make_client, run):
    other = RunFactory()
    StepResultFactory(run=other, step_id="load")

    body = make_client(VIEW).get(f"/api/v1/runs/{other.pk}/").json()

    assert body["llm_cost"] == NOTHING
    assert body["steps"][0]["llm_cost"] is None


def test_the_list_has_each_run_s_cost_in_one_query(make_client, run):
    quiet = RunFactory()
    client = make_client(VIEW)

    with CaptureQueriesContext(connection) as captured:
        results = client.get("/api/v1/runs/").json()["results"]

    costs = {r["id"]: r["llm_cost"] for r in results}
    assert costs[run.pk]["usd"] == "0.02"
    assert costs[run.pk]["calls"] == 2
    assert costs[quiet.pk] == NOTHING
    assert len([q for q in captured.captured_queries if "runs_llmcall" in q["sql"]]) == 1


def test_the_detail_reads_the_costs_in_two_queries_whatever_the_steps(make_client):
    run = RunFactory()
    for i in range(12):
        StepResultFactory(run=run, step_id=f"s{i}")
        LLMCallFactory(run=run, step_id=f"s{i}")
    client = make_client(VIEW)

    with CaptureQueriesContext(connection) as captured:
        body = client.get(f"/api/v1/runs/{run.pk}/").json()

    assert body["llm_cost"]["usd"] == "0.12"
    assert all(step["llm_cost"]["calls"] == 1 for step in body["steps"])
    assert len([q for q in captured.captured_queries if "runs_llmcall" in q["sql"]]) == 2


def test_the_schema_documents_llm_cost(make_client):
    schema = (
        make_client()
        .get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
        .json()["components"]["schemas"]
    )

    cost = schema["LLMCost"]
    assert cost["properties"]["usd"]["type"] == "string"
    assert {cost["properties"][n]["type"] for n in NOTHING if n != "usd"} == {"integer"}
    assert sorted(cost["required"]) == sorted(NOTHING)
    ref = {"$ref": "#/components/schemas/LLMCost"}
    for name in ("Run", "RunDetail"):
        assert schema[name]["properties"]["llm_cost"]["allOf"] == [ref]
        assert "llm_cost" in schema[name]["required"]
    assert schema["StepResult"]["properties"]["llm_cost"]["oneOf"] == [ref, {"type": "null"}]
    assert schema["RunDetail"]["properties"]["steps"]["items"] == {
        "$ref": "#/components/schemas/StepResult"
    }
