"""workflows.schema_llm: an LLM step's settings become the options of every model call,
the unset ones left to the endpoint; their bounds are checked where they are written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workflows.schema_llm import MAX_SEED, LLMBudget, LLMSettings


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
