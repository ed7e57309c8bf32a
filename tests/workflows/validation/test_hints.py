"""workflows.validation.hints: what to write instead when a condition or a JMESPath
expression does not compile, or an output schema uses a Python type name."""

from __future__ import annotations

import pytest

from workflows.validation.hints import condition_fix, schema_type_fix, transform_fix


def test_a_condition_reading_a_reference_is_told_the_mapped_name():
    assert condition_fix("$input.limit > 3", {"limit": "$input.limit"}) == (
        "a condition reads only mapped names: write `limit` for `$input.limit`"
    )
    assert "map `$input.max` in its `input_mapping`" in condition_fix("$input.max > 3", {})


@pytest.mark.parametrize("text", ["done == True", "x if y else z"])
def test_python_in_a_condition_is_told_the_expression_form(text):
    assert "constants are lowercase `true`, `false`, `null`" in condition_fix(text, {})


def test_arithmetic_in_a_condition_goes_upstream_and_else_there_is_no_advice():
    assert condition_fix("price * 2 > 10", {}) == (
        "compute the value in a `transform` step upstream and map its result"
    )
    assert condition_fix("count >", {}) == ""


def test_a_transform_is_told_to_close_what_is_open_innermost_first():
    assert transform_fix("{a: b[0") == "close what is open: add `]`, `}`"
    assert transform_fix("{a: '[', b: c}") == ""  # brackets inside quotes do not count


def test_interpolation_and_arithmetic_in_a_transform_are_named():
    assert "no string interpolation" in transform_fix("f'{name} is here'")
    assert "no string interpolation" in transform_fix("'hello {name}'")
    assert "no arithmetic" in transform_fix("price * quantity")
    assert transform_fix("`a-b`") == ""  # a minus inside a literal is no arithmetic


def test_a_python_type_name_in_a_schema_is_translated():
    assert schema_type_fix("'list' is not valid under any of the given schemas") == (
        "; JSON Schema calls `list` `array` "
        "(types: string, number, integer, boolean, object, array, null)"
    )
    assert schema_type_fix("'array' is fine") == ""
