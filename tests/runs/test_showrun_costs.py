"""``showrun`` says what the run's model calls cost, and each step that called a model its
own; ``--json`` gives them as ``llm_cost`` (the API's form). A run that called no model
prints no cost line."""

from __future__ import annotations

import json

import pytest

from tests.factories import LLMCallFactory, RunFactory, StepResultFactory

pytestmark = pytest.mark.django_db

RUN_LINE = "model cost: $0.0200 over 2 model calls (1,100 prompt + 30 completion tokens)"
STEP_LINE = f"      {RUN_LINE}"


@pytest.fixture
def run():
    """A run of sales_report whose `report` step called a model twice ($0.01 each)."""
    run = RunFactory()
    for step_id in ("load", "report"):
        StepResultFactory(run=run, step_id=step_id, output={"rows": 1})
    LLMCallFactory(run=run, step_id="report")
    LLMCallFactory(run=run, step_id="report", prompt_tokens=1000, completion_tokens=20)
    return run


def test_showrun_prints_the_run_s_and_the_step_s_cost(cli, run):
    result = cli("showrun", str(run.pk))

    assert result.code == 0, result.err
    lines = result.lines
    assert lines[2] == RUN_LINE  # under the run's times, above its steps
    assert lines[3] == "steps (2): 2 succeeded"
    assert lines[4].startswith("  succeeded  load ")
    assert lines[5] == "      output: object with 1 key: rows (11 B)"
    assert lines[6].startswith("  succeeded  report ")
    assert lines[7:] == ["      output: object with 1 key: rows (11 B)", STEP_LINE]


def test_showrun_json_has_llm_cost(cli, run):
    result = cli("showrun", str(run.pk), "--json")

    assert result.code == 0, result.err
    record = json.loads(result.out)
    assert record["llm_cost"] == {
        "usd": "0.02",
        "calls": 2,
        "prompt_tokens": 1100,
        "completion_tokens": 30,
        "unpriced_calls": 0,
        "in_flight": 0,
        "estimated_calls": 0,
    }
    steps = {step["step_id"]: step for step in record["steps"]}
    assert steps["report"]["llm_cost"] == record["llm_cost"]
    assert steps["load"]["llm_cost"] is None
    assert "cost" not in steps["load"]  # the text form's dataclass is not in the record


def test_a_run_without_model_calls_prints_no_cost(cli):
    run = RunFactory()
    StepResultFactory(run=run, step_id="load")

    text = cli("showrun", str(run.pk))
    record = json.loads(cli("showrun", str(run.pk), "--json").out)

    assert "model cost" not in text.out
    assert record["llm_cost"]["usd"] == "0"
    assert record["llm_cost"]["calls"] == 0
    assert record["steps"][0]["llm_cost"] is None
