"""The planner's safety net: mistakes a planner makes that the validator catches,
each with a message that says how to fix it (the text asserted here)."""

from __future__ import annotations

import pytest

from tests.workflows.planner_mistakes import example_registry
from workflows.validator import validate_workflow

CITY = {"city": {"type": "string"}}
GEO = {
    "id": "geo",
    "kind": "tool",
    "tool": "geocode_city",
    "input_mapping": {"name": "$input.city"},
}


@pytest.fixture(scope="module")
def registry():
    return example_registry()


def issues(registry, steps, **extra):
    data = {"name": "net", "inputs": CITY, "steps": steps, **extra}
    report = validate_workflow(data, registry=registry)
    return {(i.code, i.path): i.message for i in report.errors}


def test_a_dotted_reference_in_an_llm_mapping_to_no_step(registry):
    ask = {"id": "ask", "kind": "llm", "prompt": "Sum up {{t}}",
           "input_mapping": {"t": {"now": "forecast.temperature"}}}  # fmt: skip
    found = issues(registry, [GEO, ask])
    message = found[("unknown_step_reference", "steps[1].input_mapping.t.now")]
    assert "`forecast` is not a step" in message
    assert "the steps: `ask`, `geo`" in message


@pytest.mark.parametrize(
    "prompt",
    [
        "Call the weather_current tool for {{lat}} and report",
        "Use `weather_current` at {{lat}}",
        "Fetch the weather with the exchange_rate tool, {{lat}}",
    ],
)
def test_a_prompt_that_names_a_tool_the_step_does_not_offer(registry, prompt):
    ask = {"id": "ask", "kind": "llm", "prompt": prompt, "tools": ["geocode_city"],
           "input_mapping": {"lat": "geo.latitude"}}  # fmt: skip
    found = issues(registry, [GEO, ask])
    message = found[("prompt_tool_not_offered", "steps[1].prompt")]
    assert "add it to the step's `tools`" in message
    assert "or take it out of the prompt" in message


def test_a_prompt_that_mentions_a_word_that_is_a_tool_name_passes(registry):
    ask = {"id": "ask", "kind": "llm", "prompt": "Aggregate what you know of {{lat}}",
           "input_mapping": {"lat": "geo.latitude"}}  # fmt: skip
    assert issues(registry, [GEO, ask]) == {}


@pytest.mark.parametrize(
    "broken",
    [
        {"id": "x", "kind": "transform", "expresion": "a"},
        {"id": "x", "kind": "http", "url": "u"},
        {"id": "x"},
    ],
)
def test_a_near_miss_tool_is_caught_beside_a_schema_error(registry, broken):
    geo = {**GEO, "tool": "geocode_cty"}
    found = issues(registry, [geo, broken])
    assert any(code == "schema_invalid" for code, _ in found)
    assert "(did you mean `geocode_city`?)" in found[("unknown_tool", "steps[0].tool")]


def test_env_written_inside_prompt_text(registry):
    ask = {"id": "ask", "kind": "llm", "prompt": "Key $env.GITHUB_TOKEN, at {{lat}}",
           "input_mapping": {"lat": "geo.latitude"}}  # fmt: skip
    message = issues(registry, [GEO, ask])[("env_in_prompt", "steps[1].prompt")]
    assert "`$env.GITHUB_TOKEN`" in message
    assert "map the value from a step's output" in message


def test_a_jmespath_syntax_error_says_how_to_fix_it(registry):
    bad = {"id": "t", "kind": "transform", "expression": "{a: lat +}",
           "input_mapping": {"lat": "geo.latitude"}}  # fmt: skip
    message = issues(registry, [GEO, bad])[("transform_invalid", "steps[1].expression")]
    assert "literals in backticks" in message
    assert "`sum([a, b])`" in message


def test_template_braces_in_a_condition_say_how_to_fix_it(registry):
    decide = {"id": "d", "kind": "decision", "branches": ["hi", "lo"],
              "conditions": {"hi": "{{lat}} > `3`"}, "default": "lo",
              "input_mapping": {"lat": "geo.latitude"}}  # fmt: skip
    message = issues(registry, [GEO, decide])[("condition_invalid", "steps[1].conditions.hi")]
    assert "write `lat > `3``" in message


def test_a_foreach_without_its_item_mapping_says_how_to_fix_it(registry):
    each = {"id": "each", "kind": "foreach", "tool": "country_info",
            "input_mapping": {"items": "$input.codes"}}  # fmt: skip
    data = {"name": "net", "inputs": {"codes": {"type": "array"}}, "steps": [each]}
    found = {(i.code, i.path): i.message for i in validate_workflow(data, registry=registry).errors}
    message = found[("missing_required_param", "steps[0].input_mapping")]
    assert "`item_mapping: {code: $item}`" in message


def test_an_allowlist_entry_that_is_not_registered(registry):
    found = issues(registry, [GEO], tools=["geocode_city", "weather_curent"])
    message = found[("unknown_tool", "tools[1]")]
    assert "(did you mean `weather_current`?)" in message
    assert "loadtools" in message


def test_a_tool_the_allowlist_leaves_out_says_how_to_fix_it(registry):
    found = issues(registry, [GEO], tools=["weather_current"])
    message = found[("tool_not_allowed", "steps[0].tool")]
    assert "add `geocode_city` to the workflow's `tools`" in message


def test_an_input_read_before_it_is_declared(registry):
    data = {"name": "net", "inputs": {"cities": {"type": "string"}}, "steps": [GEO]}
    found = {(i.code, i.path): i.message for i in validate_workflow(data, registry=registry).errors}
    message = found[("unknown_input", "steps[0].input_mapping.name")]
    assert "(did you mean `cities`?)" in message
    assert "declare it under `inputs`" in message


def test_a_decision_reading_a_step_an_edge_runs_later(registry):
    weather = {
        "id": "w",
        "kind": "tool",
        "tool": "weather_current",
        "input_mapping": {"latitude": "geo.latitude", "longitude": "geo.longitude"},
    }
    decide = {"id": "d", "kind": "decision", "branches": ["hot", "cold"],
              "conditions": {"hot": "t > `20`"}, "default": "cold",
              "input_mapping": {"t": "w.temperature"}}  # fmt: skip
    found = issues(registry, [GEO, decide, weather], edges=[{"from": "d", "to": "w"}])
    message = found[("not_ancestor", "steps[1].input_mapping.t")]
    assert "drop the edge that makes `w` wait for `d`" in message
