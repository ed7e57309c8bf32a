"""Transform steps: JMESPath compiled and checked once, applied to mapped values."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from types import MappingProxyType

import pytest

from tools.errors import FlowpilotError
from workflows.transform import (
    MAX_DEPTH,
    MAX_LENGTH,
    CompiledTransform,
    TransformError,
    compile_transform,
)

VALUES = {
    "search": {
        "total": 3,
        "items": [
            {"name": "flowpilot", "stars": 1200, "language": "Python", "topics": ["dag"]},
            {"name": "tiny", "stars": 4, "language": None, "topics": []},
            {"name": "rusty", "stars": 870, "language": "Rust", "topics": ["cli", "dag"]},
        ],
    },
    "geo": {"results": [{"latitude": 52.52, "longitude": 13.4}]},
    "weather": {"hourly": {"temperature_2m": [10.5, 12.0, 9.5]}},
    "user": {"first": "Ada", "last": "Lovelace", "roles": ["admin"]},
    "tags": ["b", "a", "c"],
    "count": 7,
}


def apply(expression: str, values=VALUES):
    return compile_transform(expression).apply(values)


def compile_error(expression) -> TransformError:
    with pytest.raises(TransformError) as info:
        compile_transform(expression)
    return info.value


def runtime_error(expression: str, values) -> TransformError:
    compiled = compile_transform(expression)
    with pytest.raises(TransformError) as info:
        compiled.apply(values)
    return info.value


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("count", 7),
        ("missing", None),
        ("search.total", 3),
        ("search.items[0].name", "flowpilot"),
        ("search.items[-1].name", "rusty"),
        ("search.items[*].name", ["flowpilot", "tiny", "rusty"]),
        ("search.items[?stars > `100`].name", ["flowpilot", "rusty"]),
        ("search.items[?language == 'Python'] | [0].stars", 1200),
        ("search.items[?contains(topics, 'dag')].name", ["flowpilot", "rusty"]),
        ("search.items[].topics[]", ["dag", "cli", "dag"]),
        ("length(search.items)", 3),
        ("sort_by(search.items, &stars)[*].name", ["tiny", "rusty", "flowpilot"]),
        ("max_by(search.items, &stars).name", "flowpilot"),
        ("sum(search.items[*].stars)", 2074),
        ("avg(weather.hourly.temperature_2m)", pytest.approx(32.0 / 3)),
        ("max(weather.hourly.temperature_2m)", 12.0),
        ("sort(tags)", ["a", "b", "c"]),
        ("join(', ', sort(tags))", "a, b, c"),
        ("reverse(tags)", ["c", "a", "b"]),
        ("keys(user)", ["first", "last", "roles"]),
        ("not_null(search.items[1].language, 'unknown')", "unknown"),
        ("search.items[:2].name", ["flowpilot", "tiny"]),
        ("search.items[::2].name", ["flowpilot", "rusty"]),
        ("geo.results[0].[latitude, longitude]", [52.52, 13.4]),
        (
            "{lat: geo.results[0].latitude, lon: geo.results[0].longitude}",
            {"lat": 52.52, "lon": 13.4},
        ),
        (
            "{name: user.first, admin: contains(user.roles, 'admin')}",
            {"name": "Ada", "admin": True},
        ),
        ("merge(user, {first: 'Grace'}).first", "Grace"),
        ("search.items[?stars > `100` && language != null] | length(@)", 2),
        ("`[1, 2, 3]`", [1, 2, 3]),
        ("'literal'", "literal"),
        ("@.count", 7),
        ("to_string(count)", "7"),
        ("to_number('12.5')", 12.5),
        ("type(search)", "object"),
        ("map(&name, search.items)", ["flowpilot", "tiny", "rusty"]),
        ('"search".total', 3),
    ],
)
def test_valid_expressions_over_nested_data(expression, expected):
    assert apply(expression) == expected


def test_compiled_transform_is_a_frozen_value():
    compiled = compile_transform("search.items[*].name")
    assert isinstance(compiled, CompiledTransform)
    assert compiled.source == "search.items[*].name"
    assert compiled == compile_transform("search.items[*].name")
    assert "parsed" not in repr(compiled)
    with pytest.raises(dataclasses.FrozenInstanceError):
        compiled.source = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "values",
    [VALUES, OrderedDict(VALUES), MappingProxyType(VALUES)],
    ids=["dict", "ordered", "proxy"],
)
def test_any_mapping_of_values(values):
    assert apply("keys(@)", values) == list(VALUES)
    assert apply("search.total", values) == 3


def test_apply_is_pure():
    before = repr(VALUES)
    apply("sort_by(search.items, &stars)")
    apply("merge(user, {first: 'Grace'})")
    assert repr(VALUES) == before


def test_transform_error_is_a_flowpilot_error_with_a_code():
    error = compile_error("foo[")
    assert isinstance(error, FlowpilotError)
    assert error.code == "transform_invalid"
    assert error.retryable is False
    assert error.source == "foo["
    assert error.column == 5


# -- syntax errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("foo[", "invalid JMESPath: incomplete expression at column 5 in `foo[`"),
        ("{a: b", "incomplete expression at column 6 in `{a: b`"),
        ("foo[?a == ", "incomplete expression at column 11"),
        (
            "foo.",
            "invalid JMESPath: expected a quoted name, a name, `[` or `{`, "
            "found end of expression at column 5 in `foo.`",
        ),
        ("a.`1`", "found `1` at column 3"),
        ("{a b}", "expected `:`, found `b` at column 4 in `{a b}`"),
        ("a | | b", "invalid JMESPath: unexpected `|` at column 5 in `a | | b`"),
        ("a b", "unexpected `b` at column 3"),
        ("@@", "unexpected `@` at column 2"),
        ("'unterminated", "invalid JMESPath: unclosed ' delimiter at column 1 in `'unterminated`"),
        ("a ~ b", "invalid JMESPath: unknown token ~ at column 3 in `a ~ b`"),
        ("$input.x", "unknown token $ at column 1"),
        ("foo[1:2:3:4]", "at column 10 in `foo[1:2:3:4]`"),
        ('"x"(a)', "quoted identifier not allowed for function names"),
    ],
)
def test_syntax_errors_name_expression_and_column(expression, message):
    assert message in compile_error(expression).message


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "nosuch(a)",
            "unknown function `nosuch()` at column 1 in `nosuch(a)`; available: abs, avg",
        ),
        ("items[*].upper(name)", "unknown function `upper()` at column 10"),
        ("length(a, b)", "`length()` takes 1 argument, 2 given at column 1 in `length(a, b)`"),
        ("a | sort_by(@)", "`sort_by()` takes 2 arguments, 1 given at column 5"),
        ("merge()", "`merge()` takes at least 1 argument, 0 given"),
        ("not_null()", "`not_null()` takes at least 1 argument, 0 given"),
        ("{x: length()}", "`length()` takes 1 argument, 0 given at column 5"),
    ],
)
def test_functions_are_checked_at_compile_time(expression, message):
    assert message in compile_error(expression).message


@pytest.mark.parametrize("expression", ["merge(a)", "merge(a, b, c)", "not_null(a, b, c, d)"])
def test_variadic_functions_take_more(expression):
    compile_transform(expression)


@pytest.mark.parametrize(("expression", "message"), [("", "empty"), ("  \n", "empty")])
def test_empty(expression, message):
    assert message in compile_error(expression).message


@pytest.mark.parametrize("value", [None, 3, ["a"], b"a"])
def test_non_string(value):
    assert "a transform must be a string" in compile_error(value).message


# -- run-time errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "values", "message"),
    [
        (
            "length(a)",
            {"a": 1},
            "transform `length(a)` failed: `length()` expects string or array or object, "
            "got number 1",
        ),
        ("sort(a)", {"a": [1, "x"]}, "`sort()` expects array-string or array-number"),
        ("sum(a)", {"a": ["x"]}, "`sum()` expects array-number"),
        ("abs(a)", {"a": "x"}, "`abs()` expects number, got string 'x'"),
        ("keys(a)", {"a": [1]}, "`keys()` expects object"),
        ("starts_with(a, 'x')", {"a": 5}, "`starts_with()` expects string"),
        ("a < b", {"a": "x", "b": 1}, "transform `a < b` failed: values cannot be compared"),
        ("max_by(a, &b)", {"a": [{"b": "x"}, {"b": 1}]}, "values cannot be compared"),
        ("sort_by(a, &b)", {"a": [{"b": "x"}, {"b": 1}]}, "failed:"),
    ],
)
def test_runtime_type_errors(expression, values, message):
    error = runtime_error(expression, values)
    assert message in error.message
    assert error.source == expression
    assert error.__cause__ is not None


def test_runtime_error_messages_stay_short():
    error = runtime_error("abs(a)", {"a": "x" * 10_000})
    assert len(error.message) < 300


def test_deeply_nested_data():
    deep: dict = {}
    for _ in range(5000):
        deep = {"a": deep}
    assert apply("x.a.a.a | type(@)", {"x": deep}) == "object"


def test_data_too_deep_to_compare():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    error = runtime_error("x == y", {"x": deep, "y": [deep]})
    assert "data nested too deeply" in error.message


# -- hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 1000 + "a" + ")" * 1000,
        "[" * 1000 + "a" + "]" * 1000,
        "{a: " * 200 + "b" + "}" * 200,
        "a" * (MAX_LENGTH + 1),
        "length(" * 500 + "a" + ")" * 500,
        "__import__('os')",
        "a.__class__()",
        "`1` | eval(@)",
    ],
    ids=lambda text: repr(text[:20]),
)
def test_hostile_input_fails_with_transform_error_only(expression):
    error = compile_error(expression)
    assert len(error.message) < 600


def test_depth_and_length_limits():
    compile_transform("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH)
    error = compile_error("(" * (MAX_DEPTH + 1) + "a" + ")" * (MAX_DEPTH + 1))
    assert f"nests deeper than {MAX_DEPTH} levels at column {MAX_DEPTH + 1}" in error.message
    compile_transform("a" * MAX_LENGTH)
    assert f"more than the {MAX_LENGTH} allowed" in compile_error("a" * (MAX_LENGTH + 1)).message


def test_brackets_inside_strings_and_literals_do_not_count():
    many = "(" * (MAX_DEPTH + 10)
    assert apply(f"'{many}'") == many
    assert apply(f'"{many}"', {many: 1}) == 1
    assert apply(f'`"{many}"`') == many
    assert apply("'it\\'s (' ") == "it's ("


# --- bounded evaluation (size and time) ---------------------------------------------------

EIGHTFOLD = "{a: @, b: @, c: @, d: @, e: @, f: @, g: @, h: @}"


def test_a_transform_building_more_than_the_cap_fails_at_the_first_operation_past_it():
    from tools.sizes import OutputTooLarge

    nested = f"[{EIGHTFOLD}][0].{EIGHTFOLD}"  # two eightfold layers in one expression
    with pytest.raises(OutputTooLarge) as caught:
        compile_transform(nested).apply({"s": "x" * 10_000}, max_bytes=200_000)
    assert caught.value.what == "transform result"
    assert 200_000 < caught.value.size < 1_000_000  # stopped at the second layer's 650 KB


def test_functions_that_build_text_are_measured_too():
    from tools.sizes import OutputTooLarge

    expression = "join('', [s, s, s, s, s, s, s, s])"
    with pytest.raises(OutputTooLarge):
        compile_transform(expression).apply({"s": "x" * 10_000}, max_bytes=50_000)
    assert len(compile_transform(expression).apply({"s": "xy"}, max_bytes=50_000)) == 16


def test_a_transform_within_the_cap_gives_the_same_result():
    values = {"rows": [{"n": i} for i in range(50)]}
    expression = "rows[?n > `45`].n"
    compiled = compile_transform(expression)
    assert compiled.apply(values, max_bytes=1_000) == compiled.apply(values) == [46, 47, 48, 49]


def test_a_transform_past_its_time_is_stopped():
    values = {"rows": list(range(200_000))}
    with pytest.raises(TransformError, match="took longer than"):
        compile_transform("rows[*].to_string(@)").apply(values, seconds=0.01)
