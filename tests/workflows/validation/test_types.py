"""workflows.validation.types: declared types against their use — literals and whole
inputs against a tool's parameters, input defaults against their type and enum, and a
foreach's ``items`` against a list."""

from __future__ import annotations

import pytest

from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.validator import validate_workflow

GEO = ToolSpec.model_validate(
    {
        "name": "geo",
        "http": {"base_url": "https://geo.test", "request": {"url": "/"}},
        "input_schema": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "limit": {"type": "integer"},
                "box": {
                    "type": "object",
                    "properties": {"lat": {"type": "number"}},
                    "required": ["lat"],
                    "additionalProperties": False,
                },
            },
        },
    }
)


def issues(data: dict) -> dict[str, str]:
    report = validate_workflow({"name": "t", **data}, registry=ToolRegistry([GEO]))
    return {i.path: i.message for i in report.errors if i.code != "unused_input"}


def call(**mapping) -> dict:
    return {"id": "g", "kind": "tool", "tool": "geo", "input_mapping": mapping}


def test_a_literal_of_the_wrong_type_is_named_with_what_the_tool_accepts():
    found = issues({"steps": [call(limit="ten")]})
    assert found["steps[0].input_mapping.limit"] == (
        "step `g` maps `limit` to 'ten', which tool `geo` does not accept: "
        "'ten' is not of type 'integer'"
    )


def test_an_object_literal_is_checked_around_its_references():
    found = issues({"inputs": {"lat": {"type": "number"}}, "steps": [call(box={"lon": 1})]})
    assert "steps[0].input_mapping.box" in found
    assert "it takes `lat`" in found["steps[0].input_mapping.box"]
    assert (
        issues({"inputs": {"lat": {"type": "number"}}, "steps": [call(box={"lat": "$input.lat"})]})
        == {}
    )


def test_a_whole_input_of_another_type_is_told_to_declare_the_right_one():
    found = issues({"inputs": {"n": {"type": "string"}}, "steps": [call(limit="$input.n")]})
    assert "declare the input `type: integer`" in found["steps[0].input_mapping.limit"]
    assert issues({"inputs": {"n": {"type": "integer"}}, "steps": [call(limit="$input.n")]}) == {}


@pytest.mark.parametrize(
    ("spec", "fix"),
    [
        ({"type": "integer", "default": "3"}, "write an integer (`type: integer`)"),
        (
            {"type": "string", "enum": ["a", "b"], "default": "c"},
            "write one of its `enum`: `a`, `b`",
        ),
    ],
)
def test_a_default_must_fit_its_type_and_enum(spec, fix):
    found = issues({"inputs": {"x": spec}, "steps": [call(city="$input.x")]})
    assert found["inputs.x.default"].endswith(fix)


@pytest.mark.parametrize(
    ("items", "inputs", "what"),
    [
        ("Oslo", {}, "the literal 'Oslo'"),
        ({"a": 1}, {}, "an object (a mapping), not a list"),
        ("$input.city", {"city": {"type": "string"}}, "a string input (declare it `type: array`)"),
    ],
)
def test_foreach_items_must_be_a_list(items, inputs, what):
    step = {"id": "each", "kind": "foreach", "tool": "geo", "input_mapping": {"items": items},
            "item_mapping": {"city": "$item"}}  # fmt: skip
    found = issues({"inputs": inputs, "steps": [step]})
    assert what in found["steps[0].input_mapping.items"]
