"""Run inputs (workflows/inputs.py): the declared inputs as one JSON Schema, checked by the
validator tool arguments use; every problem named; text coercion for ``--input k=v``."""

from __future__ import annotations

import datetime

import pytest

from tools.errors import ToolInputError
from tools.registry import validate_arguments
from tools.spec import ToolSpec
from workflows.inputs import InputsInvalid, coerce_text, inputs_schema, resolve_inputs
from workflows.schema import InputSpec


def declared(**specs: dict) -> dict[str, InputSpec]:
    return {name: InputSpec(**spec) for name, spec in specs.items()}


DECLARED = declared(
    city={"type": "string", "description": "Where"},
    days={"type": "integer", "default": 3},
    unit={"type": "string", "enum": ["C", "F"], "default": "C"},
    tags={"type": "array", "required": False},
)


def problems(declared_inputs, given) -> list[str]:
    with pytest.raises(InputsInvalid) as caught:
        resolve_inputs(declared_inputs, given)
    assert str(caught.value) == "invalid run inputs: " + "; ".join(caught.value.problems)
    return caught.value.problems


def test_the_schema_says_types_enums_defaults_and_required():
    assert inputs_schema(DECLARED) == {
        "type": "object",
        "properties": {
            "city": {"type": ["string", "null"], "description": "Where"},
            "days": {"type": ["integer", "null"], "default": 3},
            "unit": {"type": ["string", "null"], "enum": ["C", "F", None], "default": "C"},
            "tags": {"type": ["array", "null"]},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert inputs_schema({}) == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_defaults_are_applied_and_unset_optional_inputs_are_null():
    assert resolve_inputs(DECLARED, {"city": "Oslo"}) == {
        "city": "Oslo",
        "days": 3,
        "unit": "C",
        "tags": None,
    }
    given = {"city": "Oslo", "days": 7.0, "unit": "F", "tags": ["a"]}
    assert resolve_inputs(DECLARED, given) == given


def test_null_counts_as_unset_and_passes_type_and_enum():
    got = resolve_inputs(DECLARED, {"city": None, "unit": None})
    assert got == {"city": None, "days": 3, "unit": None, "tags": None}


def test_every_problem_is_named_unknown_inputs_first():
    given = {"zeta": 1, "alpha": 2, "days": "ten", "unit": "K", "tags": {"a": 1}}
    assert problems(DECLARED, given) == [
        "unknown input `alpha` (declared: city, days, tags, unit)",
        "unknown input `zeta` (declared: city, days, tags, unit)",
        "input `city` (string) is required",
        'input `days` must be integer, got "ten"',
        'input `unit` must be one of ["C", "F"]',
        'input `tags` must be array, got {"a": 1}',
    ]


def test_one_problem_per_input_the_type_before_the_enum():
    spec = declared(level={"type": "integer", "enum": [1, 2]})
    assert problems(spec, {"level": "high"}) == ['input `level` must be integer, got "high"']
    assert problems(spec, {"level": 3}) == ["input `level` must be one of [1, 2]"]


def test_a_default_is_checked_like_a_given_value():
    spec = declared(n={"type": "integer", "default": "many"})
    assert problems(spec, {}) == ['input `n` must be integer, got "many"']


def test_an_enum_compares_json_values_not_python_ones():
    spec = declared(flag={"type": "integer", "enum": [1]})
    assert resolve_inputs(spec, {"flag": 1.0}) == {"flag": 1.0}
    assert problems(declared(choice={"type": "number", "enum": [1]}), {"choice": 2}) == [
        "input `choice` must be one of [1]"
    ]


def test_values_outside_json_are_shown_not_crashed_on():
    when = datetime.date(2024, 1, 2)
    assert problems(declared(day={"type": "string"}), {"day": when}) == [
        'input `day` must be string, got "2024-01-02"'
    ]
    long = problems(declared(text={"type": "integer"}), {"text": "x" * 500})[0]
    assert long.startswith('input `text` must be integer, got "xxx')
    assert len(long) < 140


def test_no_declared_inputs_lists_none():
    assert problems({}, {"x": 1}) == ["unknown input `x` (declared: none)"]


VALUES = [0, 1, 1.0, 1.5, -2, True, False, "1", "", [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("kind", ["string", "integer", "number", "boolean", "object", "array"])
def test_inputs_accept_exactly_what_a_tool_parameter_of_that_type_accepts(kind):
    tool = ToolSpec(
        name="t",
        kind="builtin",
        input_schema={"type": "object", "properties": {"v": {"type": kind}}},
    )
    for value in VALUES:
        try:
            validate_arguments(tool, {"v": value})
            tool_ok = True
        except ToolInputError:
            tool_ok = False
        try:
            resolve_inputs(declared(v={"type": kind}), {"v": value})
            input_ok = True
        except InputsInvalid:
            input_ok = False
        assert input_ok == tool_ok, (kind, value)


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        ("string", " 42 ", " 42 "),
        ("integer", "42", 42),
        ("number", "2.5", 2.5),
        ("boolean", "Yes", True),
        ("boolean", "off", False),
        ("boolean", "maybe", "maybe"),
        ("array", '["a", 1]', ["a", 1]),
        ("object", '{"a": 1}', {"a": 1}),
        ("integer", "ten", "ten"),
    ],
)
def test_text_is_coerced_to_the_declared_type_and_then_checked(kind, text, value):
    spec = InputSpec(type=kind)
    assert coerce_text(text, spec) == value
    ok = kind == "string" or not isinstance(value, str)
    if ok:
        assert resolve_inputs({"x": spec}, {"x": coerce_text(text, spec)}) == {"x": value}
    else:
        assert problems({"x": spec}, {"x": coerce_text(text, spec)}) == [
            f'input `x` must be {kind}, got "{value}"'
        ]


def test_text_for_an_undeclared_input_stays_text():
    assert coerce_text("42", None) == "42"


DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_input_value_is_left_as_text_for_the_type_check():
    assert coerce_text(DEEP, InputSpec(type="array")) == DEEP
