"""workflows.schema_llm: an LLM step's settings become the options of every model call,
the unset ones left to the endpoint; their bounds are checked where they are written."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from workflows.schema_llm import MAX_SEED, DecisionBudget, LLMBudget, LLMSettings, MoneyBudget
from workflows.validator import validate_workflow


def test_only_the_options_a_step_sets_are_sent():
    assert LLMSettings().call_options() == {}
    settings = LLMSettings(model="m", temperature=0, max_output_tokens=100, seed=7)
    assert settings.call_options() == {"model": "m", "temperature": 0, "max_tokens": 100, "seed": 7}


def test_the_endpoint_is_the_named_one_or_the_default():
    assert LLMSettings().llm_endpoint() is None
    assert LLMSettings(endpoint="local").llm_endpoint() == "local"


@pytest.mark.parametrize(
    "bad",
    [{"endpoint": "Local"}, {"temperature": 2.5}, {"seed": MAX_SEED + 1}, {"max_output_tokens": 0}],
)
def test_out_of_bounds_settings_are_refused(bad):
    with pytest.raises(ValidationError):
        LLMSettings(**bad)


def test_a_budget_bounds_each_count_from_its_own_floor():
    assert LLMBudget(max_tool_calls=0).max_tool_calls == 0
    with pytest.raises(ValidationError):
        LLMBudget(max_calls=0)


def test_a_budget_in_money_is_dollars_with_at_most_six_decimals():
    assert LLMBudget(usd_per_run=0.5).usd_per_run == Decimal("0.5")
    assert LLMBudget(usd_per_month="12.000001").usd_per_month == Decimal("12.000001")
    assert MoneyBudget().in_money() is False
    assert MoneyBudget(usd_per_month=0).in_money() is True
    for bad in ("-1", "0.0000001", "1000001", "NaN", "lots"):
        with pytest.raises(ValidationError):
            MoneyBudget(usd_per_run=bad)


def test_the_budgets_example_of_the_docs_is_a_valid_workflow(settings):
    """docs/observability.md's example, as written, validates and reads as documented."""
    settings.FLOWPILOT_LLM_PRICES = {}
    text = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    blocks = [part.split("```", 1)[0] for part in text.split("```yaml\n")[1:]]
    (block,) = [b for b in blocks if b.startswith("name: triage")]
    report = validate_workflow(yaml.safe_load(block), registry=None)
    assert report.ok, [i.message for i in report.issues]
    spec = report.spec
    assert spec.budget == MoneyBudget(usd_per_run=Decimal("0.5"), usd_per_month=Decimal(40))
    summary, route = spec.steps[:2]
    assert summary.budget.usd_per_month == Decimal(15)
    assert route.budget.usd_per_run == Decimal("0.01")


def test_a_decisions_budget_takes_no_count_of_calls_or_tools(settings):
    """An LLM decision makes one model call and calls no tool: a `max_calls` or
    `max_tool_calls` on it would be a limit never applied, so it is refused where it is
    written, naming the fields a decision's budget does take."""
    settings.FLOWPILOT_LLM_PRICES = {}
    decision = {
        "id": "route",
        "kind": "decision",
        "branches": ["yes", "no"],
        "decision_prompt": "Is it urgent?",
        "budget": {"max_tokens": 500, "max_calls": 2},
    }
    data = {
        "name": "routing",
        "steps": [decision],
        "edges": [],
    }
    report = validate_workflow(data, registry=None)
    issues = {(i.path, i.code): i.message for i in report.issues}
    message = issues[("steps[0].budget.max_calls", "schema_invalid")]
    assert "max_tokens" in message
    assert "usd_per_run" in message
    assert "max_tool_calls" not in message

    decision["budget"] = {"max_tokens": 500, "usd_per_run": "0.01"}
    report = validate_workflow(data, registry=None)
    assert "steps[0].budget.max_calls" not in {i.path for i in report.issues}
    assert DecisionBudget(max_tokens=500).max_tokens == 500
