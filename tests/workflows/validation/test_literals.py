"""workflows.validation.literals: plain strings that were meant as references — a mistyped
step, `input.x` without `$`, a bare step id, a bracket index, a `{{template}}`, a
look-alike letter — are errors saying what to write; ordinary text passes."""

from __future__ import annotations

import pytest

from tools.registry import ToolRegistry
from workflows.validator import validate_workflow


def found(value: object) -> dict[str, str]:
    steps = [
        {
            "id": "weather",
            "kind": "transform",
            "expression": "{temperature: t}",
            "input_mapping": {"t": 1},
        },
        {"id": "post", "kind": "transform", "expression": "{v: v}", "input_mapping": {"v": value}},
    ]
    data = {"name": "l", "inputs": {"city": {"default": "Oslo"}}, "steps": steps}
    report = validate_workflow(data, registry=ToolRegistry([]))
    return {i.code: i.message for i in report.errors if i.path == "steps[1].input_mapping.v"}


@pytest.mark.parametrize(
    ("value", "code", "fix"),
    [
        ("wether.temperature", "unknown_step_reference", "(did you mean `weather`?)"),
        ("input.city", "input_without_dollar", "read as `$input.city` (with `$`)"),
        ("weather", "step_reference_without_field", "`$step.weather` for its whole output"),
        ("weather.list[0]", "invalid_reference", "write `weather.list.0`"),
        ("{{weather.temperature}}", "template_in_mapping", "weather.temperature"),
        ("w\u0435ather.temperature", "confusable_character", "CYRILLIC SMALL LETTER IE"),
        ("forecast.temperature", "unknown_step_reference", "`weather.temperature` outputs it"),
    ],
)
def test_a_string_meant_as_a_reference_is_an_error_with_its_fix(value, code, fix):
    issues = found(value)
    assert code in issues, issues
    assert fix in issues[code]


@pytest.mark.parametrize(
    ("value", "ref"),
    [
        ("Issue #$input.city", "$input.city"),
        ("Bearer $env.API_TOKEN", "$env.API_TOKEN"),
        ("all of $step.weather, as text", "$step.weather"),
        ("row $item.name, at $index", "$item.name"),
    ],
)
def test_a_reference_inside_longer_text_is_an_error_with_its_fix(value, ref):
    message = found(value)["reference_in_text"]
    assert f"`{ref}`" in message
    assert "sent as written" in message
    assert "`transform` step" in message
    assert "prompt template" in message


@pytest.mark.parametrize(
    "value",
    [
        "costs $5",
        "US$ 3.50",
        "api.example.com",
        "digest.html",
        "Oslo",
        {"$literal": "weather.temperature"},
    ],
)
def test_ordinary_text_and_explicit_literals_pass(value):
    assert found(value) == {}
