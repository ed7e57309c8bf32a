"""The condition language of decision steps: parsing, static checks, evaluation, hostile input."""

from __future__ import annotations

import contextlib
import dataclasses
import random

import pytest

from tools.errors import FlowpilotError
from workflows.expressions import (
    MAX_DEPTH,
    MAX_LENGTH,
    CompiledCondition,
    ExpressionError,
    compile_condition,
)
from workflows.expressions.nodes import BoolOp, Call, Compare, Literal, Not, Path

DATA = {
    "temp": 21.5,
    "raining": False,
    "status": "warn",
    "count": 4,
    "items": [{"name": "first"}, {"name": "second"}, {"name": "last"}],
    "geo": {"lat": 52.5, "error": None},
    "fetch": {"error": {"retryable": False, "message": "boom"}},
    "repo": {"stars": 1500, "language": "Python", "topics": []},
    "user": {"roles": ["admin", "dev"], "name": "Ada", "odd key": 1},
    "text": "hello world",
    "empty_text": "",
    "zero": 0,
    "flag": True,
    "nums": [1, 2.0, 3],
}


def evaluate(text: str, values=DATA) -> bool:
    return compile_condition(text).evaluate(values)


def compile_error(text: str, **kwargs) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        compile_condition(text, **kwargs)
    return info.value


def runtime_error(text: str, values) -> ExpressionError:
    condition = compile_condition(text)
    with pytest.raises(ExpressionError) as info:
        condition.evaluate(values)
    return info.value


# -- the examples of the design ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("temp > 25 and not raining", False),
        ("temp > 20 and not raining", True),
        ('status == "ok" or status in ["warn", "degraded"]', True),
        ("len(items) >= 10", False),
        ("len(items) >= 3", True),
        ("exists(geo.error)", False),
        ("exists(fetch.error)", True),
        ("geo.error != null", False),
        ("fetch.error != null", True),
        ('repo.stars >= 1000 and repo.language == "Python"', True),
        ("fetch.error.retryable == false", True),
        ('"admin" in user.roles', True),
        ('"root" in user.roles', False),
        ("not (temp < 3 or count >= 4)", False),
        ("not (temp < 3 or count >= 5)", True),
    ],
)
def test_design_examples(text, expected):
    assert evaluate(text) is expected


def test_compiled_condition_is_a_frozen_value_with_its_root_names():
    condition = compile_condition("repo.stars > 1 and exists(geo.error) or repo.language == 'x'")
    assert isinstance(condition, CompiledCondition)
    assert condition.source == "repo.stars > 1 and exists(geo.error) or repo.language == 'x'"
    assert condition.names == frozenset({"repo", "geo"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        condition.source = "true"  # type: ignore[misc]
    assert condition == compile_condition(condition.source)


def test_expression_error_is_a_flowpilot_error_with_a_code():
    error = compile_error("len(items) > )")
    assert isinstance(error, FlowpilotError)
    assert error.code == "expression_invalid"
    assert error.retryable is False
    assert error.column == 14
    assert error.source == "len(items) > )"
    assert error.as_dict()["type"] == "expression_invalid"


# -- precedence and grouping -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        # and binds tighter than or
        ("a or b and c", {"a": True, "b": False, "c": False}, True),
        ("(a or b) and c", {"a": True, "b": False, "c": False}, False),
        ("a and b or c", {"a": False, "b": True, "c": True}, True),
        ("a and (b or c)", {"a": False, "b": True, "c": True}, False),
        # not binds tighter than and/or, looser than comparisons
        ("not a and b", {"a": False, "b": False}, False),
        ("not (a and b)", {"a": False, "b": False}, True),
        ("not a or b", {"a": True, "b": False}, False),
        ("not x == 1", {"x": 2}, True),
        ("not x == 1", {"x": 1}, False),
        ('not "a" in xs', {"xs": ["a"]}, False),
        ("not not a", {"a": 1}, True),
        ("not not not a", {"a": 1}, False),
        # long chains flatten and keep meaning
        ("a and b and c and d", {"a": 1, "b": 1, "c": 1, "d": 0}, False),
        ("a or b or c or d", {"a": 0, "b": 0, "c": 0, "d": 1}, True),
        ("((a))", {"a": True}, True),
        ("(x > 1) == true", {"x": 2}, True),
    ],
)
def test_precedence(text, values, expected):
    assert evaluate(text, values) is expected


def test_tree_shape_follows_precedence():
    tree = compile_condition("a or b and not c == 1").tree
    assert isinstance(tree, BoolOp)
    assert tree.op == "or"
    a, right = tree.operands
    assert a == Path("a", (), 0)
    assert isinstance(right, BoolOp)
    assert right.op == "and"
    assert isinstance(right.operands[1], Not)
    assert isinstance(right.operands[1].operand, Compare)


def test_chains_of_and_are_flat():
    tree = compile_condition(" and ".join(f"x{i}" for i in range(200))).tree
    assert isinstance(tree, BoolOp)
    assert len(tree.operands) == 200


def test_comparisons_do_not_chain():
    error = compile_error("a < b < c")
    assert error.column == 7
    assert "cannot be chained" in error.message
    assert "join them with `and`" in error.message
    assert compile_condition("a < b and b < c")


# -- comparisons -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count == 4", True),
        ("count == 4.0", True),
        ("count != 4", False),
        ("count < 5", True),
        ("count <= 4", True),
        ("count > 4", False),
        ("count >= 4", True),
        ("temp > -1", True),
        ("temp < -1.5", False),
        ("temp == 21.5", True),
        ('status == "warn"', True),
        ("status == 'warn'", True),
        ('status != "warn"', False),
        ('status < "x"', True),
        ('status >= "warn"', True),
        ('"abc" < "abd"', True),
        ("1e3 == 1000", True),
        ("2.5e-1 == 0.25", True),
        ("flag == true", True),
        ("raining == false", True),
        ("geo.error == null", True),
        ("missing == null", True),
        ("nums == [1, 2, 3]", True),
        ("nums == [1, 2]", False),
        ('user.roles == ["admin", "dev"]', True),
        ("repo.topics == []", True),
        ("items.0 == items.0", True),
        ("items.0 == items.1", False),
    ],
)
def test_comparison_operators(text, expected):
    assert evaluate(text) is expected


@pytest.mark.parametrize(
    ("text", "values", "expected"),
    [
        # == never raises: different kinds are simply unequal
        ("x == 1", {"x": "1"}, False),
        ("x == 1", {"x": True}, False),
        ("x == true", {"x": 1}, False),
        ("x == 0", {"x": False}, False),
        ("x == [1]", {"x": [True]}, False),
        ("x == y", {"x": {"a": 1}, "y": {"a": True}}, False),
        ("x == y", {"x": {"a": [1, {"b": 2}]}, "y": {"a": [1.0, {"b": 2}]}}, True),
        ("x != 1", {"x": "1"}, True),
        ("x == null", {"x": 0}, False),
        ("x == null", {"x": ""}, False),
        ("x == y", {"x": None}, True),  # both missing/null
    ],
)
def test_equality_is_strict_about_kinds(text, values, expected):
    assert evaluate(text, values) is expected


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
@pytest.mark.parametrize(
    "values", [{"x": None, "y": 1}, {"x": 1, "y": None}, {"y": "a"}, {}, {"x": {}}]
)
def test_ordering_with_null_is_false_and_never_raises(op, values):
    assert evaluate(f"x.nope {op} y", values) is False
    assert evaluate(f"y {op} x.nope", values) is False
    assert evaluate(f"not (x.nope {op} y)", values) is True


# -- functions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("len(items) == 3", True),
        ("len(text) == 11", True),
        ("len(user) == 3", True),
        ("len(repo.topics) == 0", True),
        ('len("héllo") == 5', True),
        ("len([1, 2, 3]) == 3", True),
        ("len(missing) == null", True),
        ("len(missing) > 0", False),
        ("len(missing) < 1", False),
        ("len(items)", True),
        ("len(repo.topics)", False),
        ("exists(geo.lat)", True),
        ("exists(geo.error)", False),
        ("exists(geo.nope.deeper)", False),
        ("exists(items.2.name)", True),
        ("exists(items.3.name)", False),
        ("exists(raining)", True),  # false is a value, not null
        ("exists(zero)", True),
        ("exists(empty_text)", True),
        ("empty(missing)", True),
        ("empty(geo.error)", True),
        ("empty(empty_text)", True),
        ("empty(text)", False),
        ("empty(repo.topics)", True),
        ("empty(items)", False),
        ("empty(user)", False),
        ('empty("")', True),
        ("empty([])", True),
        ("not empty(items)", True),
    ],
)
def test_functions(text, expected):
    assert evaluate(text) is expected


# -- null, paths and truthiness ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("items.0.name == 'first'", True),
        ("items.2.name == 'last'", True),
        ("items.-1.name == 'last'", True),
        ("items[-1].name == 'last'", True),
        ("items[0]['name'] == 'first'", True),
        ('user["odd key"] == 1', True),
        ("items.3.name == null", True),
        ("items.-4 == null", True),
        ("items.name == null", True),  # a word does not index a list
        ("text.0 == null", True),  # strings are not traversed
        ("temp.x == null", True),
        ("missing.a.b.c == null", True),
        ("geo.error.retryable == null", True),
    ],
)
def test_paths_resolve_or_yield_null(text, expected):
    assert evaluate(text) is expected


def test_numeric_key_reaches_dict_key_too():
    assert evaluate("codes.200 == 'ok'", {"codes": {"200": "ok"}}) is True
    assert evaluate("codes[200] == 'ok'", {"codes": {"200": "ok"}}) is True


def test_keys_with_dashes_are_path_segments():
    assert evaluate("headers.content-type == 'json'", {"headers": {"content-type": "json"}})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        (None, False),
        (0, False),
        (0.0, False),
        (3, True),
        ("", False),
        ("x", True),
        ([], False),
        ([0], True),
        ({}, False),
        ({"a": 1}, True),
    ],
)
def test_truthiness_of_a_bare_name(value, expected):
    assert evaluate("v", {"v": value}) is expected
    assert evaluate("not v", {"v": value}) is (not expected)
    assert evaluate("v and true", {"v": value}) is expected
    assert evaluate("v or false", {"v": value}) is expected


def test_missing_root_is_null_at_run_time():
    assert evaluate("raining", {}) is False
    assert evaluate("not raining", {}) is True


def test_result_is_always_a_bool():
    for text in ["v", "v and w", "v or w", "len(v)", "true"]:
        assert type(evaluate(text, {"v": [1], "w": "x"})) is bool


def test_and_or_short_circuit_past_type_errors():
    values = {"x": 5}
    assert evaluate("false and len(x) > 1", values) is False
    assert evaluate("true or len(x) > 1", values) is True
    assert evaluate("exists(y) and len(y) > 1", values) is False


def test_python_objects_are_not_traversed():
    class Secretive:
        secret = "s3cret"

        def __getattr__(self, name):  # pragma: no cover - must never be reached
            raise AssertionError("attribute access attempted")

    values = {"obj": Secretive(), "holder": {"obj": Secretive()}}
    assert evaluate("obj.secret == null", values) is True
    assert evaluate("exists(holder.obj.secret)", values) is False
    assert evaluate("exists(obj)", values) is True


# -- membership --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"admin" in user.roles', True),
        ('"admin" not in user.roles', False),
        ('"root" not in user.roles', True),
        ('status in ["ok", "warn"]', True),
        ('status not in ["ok", "warn"]', False),
        ("count in [1, 2, 4]", True),
        ("count in [1.0, 4.0]", True),
        ('count in ["4"]', False),
        ("flag in [1]", False),
        ("1 in [true]", False),
        ("null in [null]", True),
        ("missing in [null, 1]", True),
        ("[1] in [[1], [2]]", True),
        ('"world" in text', True),
        ('"World" in text', False),
        ('"" in text', True),
        ('"name" in user', True),
        ('"age" in user', False),
        ('"odd key" in user', True),
        ("status in missing", False),
        ("status not in missing", True),
        ("missing in text", False),
        ("missing in user", False),
        ("items.0 in items", True),
    ],
)
def test_membership(text, expected):
    assert evaluate(text) is expected


# -- literals and escapes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r'"plain"', "plain"),
        (r"'single'", "single"),
        (r'"it\'s"', "it's"),
        (r"'it\'s'", "it's"),
        (r'"say \"hi\""', 'say "hi"'),
        (r"'say \"hi\"'", 'say "hi"'),
        ("'say \"hi\"'", 'say "hi"'),
        ('"it\'s"', "it's"),
        (r'"back\\slash"', "back\\slash"),
        (r'"a\nb"', "a\nb"),
        (r'"a\tb"', "a\tb"),
        (r'"a\rb"', "a\rb"),
        (r'"a\/b"', "a/b"),
        (r'"\u00e9t\u00C9"', "étÉ"),
        ('"ünïcödé ✓"', "ünïcödé ✓"),
        (r'""', ""),
        ('"and or not in null"', "and or not in null"),
    ],
)
def test_string_literals_and_escapes(literal, value):
    assert evaluate(f"v == {literal}", {"v": value}) is True
    assert compile_condition(f"v == {literal}").tree.right == Literal(value, 5)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        (r'v == "\q"', 7, r"unknown escape `\q`"),
        (r'v == "\u12"', 7, r"unknown escape `\u12"),
        (r'v == "\uZZZZ"', 7, r"unknown escape `\uZZZZ`"),
        ('v == "open', 6, "unterminated string"),
        ("v == 'open", 6, "unterminated string"),
        (r'v == "ends with backslash\"', 6, "unterminated string"),
    ],
)
def test_bad_strings(text, column, fragment):
    error = compile_error(text)
    assert fragment in error.message
    assert error.column == column


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("x == " + "9" * 1500, {"x": int("9" * 1500)}),
        ("x < 1" + "0" * 1000, {"x": 5}),
        ("x < 1e999", {"x": 10**400}),
        ("x > -1e999", {"x": -1.5}),
        ("x == 0.000000000000000000001", {"x": 1e-21}),
    ],
)
def test_huge_numeric_literals(text, values):
    assert evaluate(text, values) is True


# -- static checks at compile time -------------------------------------------------------------


def test_unknown_name_lists_mapped_names_in_mapping_order():
    error = compile_error("tmp > 25", names=["temp", "raining"])
    assert "unknown name `tmp` (mapped: temp, raining)" in error.message
    assert "at column 1 in `tmp > 25`" in error.message
    assert "did you mean `temp`?" in error.message


def test_unknown_name_is_found_anywhere_and_sets_are_sorted():
    error = compile_error("temp > 1 and (raining or not len(windy.speed) > 3)", names={"temp", "b"})
    assert "unknown name `raining` (mapped: b, temp)" in error.message
    assert error.column == 15


def test_unknown_name_with_nothing_mapped():
    assert "(mapped: nothing)" in compile_error("x", names=[]).message


def test_python_spellings_get_a_hint():
    assert "write `true`" in compile_error("x == True", names=["x"]).message
    assert "write `null`" in compile_error("x == None", names=["x"]).message


def test_known_names_compile():
    condition = compile_condition("temp > 25 and not raining", names={"temp": 1, "raining": 2})
    assert condition.names == {"temp", "raining"}


def test_path_segments_are_not_names():
    assert compile_condition("geo.temp > 1", names=["geo"]).names == {"geo"}


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("len(3)", 1, "`len()` expects a string, list or object, not a number"),
        ("len(true) > 1", 1, "not a boolean"),
        ("len(null) > 1", 1, "not null"),
        ("empty(0)", 1, "`empty()` expects a string, list or object, not a number"),
        ("len(a == b) > 1", 1, "not a boolean"),
        ('exists("geo.error")', 8, "`exists()` expects a path"),
        ("exists(len(x))", 8, "`exists()` expects a path"),
        ('"a" < 3', 5, "`<` cannot compare a string with a number"),
        ("3 >= 'a'", 3, "`>=` cannot compare a number with a string"),
        ("len(x) > 'a'", 8, "`>` cannot compare a number with a string"),
        ("x < null", 3, "`<` cannot order null at column 3 in `x < null`; use `== null`"),
        ("x > true", 3, "`>` cannot order a boolean"),
        ("x > [1]", 3, "`>` cannot order a list"),
        ("(a < b) < 3", 9, "`<` cannot order a boolean"),
        ("1 in 2", 3, "`in` needs a list, string or object on its right, not a number"),
        ("x in true", 3, "not a boolean"),
        ("x not in null", 3, "`not in` needs a list, string or object"),
        ('1 in "abc"', 3, "tests for a substring; needs a string, not a number"),
        ('[1] in "abc"', 5, "not a list"),
        ('len(x) == "3"', 8, "`==` between a number and a string is always false"),
        ("1 != true", 3, "`!=` between a number and a boolean is always true"),
        ('"ok"', 1, "a string literal is not a condition"),
        ("3", 1, "a number literal is not a condition"),
        ("null", 1, "null literal is not a condition"),
        ("[x]", 1, "a list literal is not a condition"),
        ('x and "y"', 7, "a string literal is not a condition"),
        ("not 0", 5, "a number literal is not a condition"),
    ],
)
def test_static_type_errors(text, column, fragment):
    error = compile_error(text)
    assert fragment in error.message
    assert error.column == column
    assert f"in `{text}`" in error.message


@pytest.mark.parametrize(
    "text",
    [
        "true",
        "false",
        "x == null",
        "len(x) == null",
        "null == x",
        "x in [1, 'a', null, true]",
        'x in "abc"',
        "x in y",
        "len(x) > len(y)",
        '"a" < x',
        "x == y",
        "[1, 2] == x",
        "exists(x.y.0)",
        "empty(x) or empty('')",
    ],
)
def test_static_checks_accept_what_data_could_make_right(text):
    compile_condition(text)


# -- syntax errors name the column -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("len(items) > )", "unexpected `)` at column 14 in `len(items) > )`"),
        ("a and", "unexpected end of expression at column 6 in `a and`"),
        ("(a", "expected `)` to close the `(` at column 1, found end of expression at column 3"),
        ("len(items > 3", "expected `)` to close the `(` at column 4, found end of expression"),
        ("[1 2] == x", "expected `]` to close the `[` at column 1, found `2` at column 4"),
        ("x == 1)", "unexpected `)` at column 7"),
        ("x y", "unexpected `y` at column 3"),
        ("x == = 1", "unexpected character `=` at column 6"),
        ("x = 1", "unexpected character `=` at column 3 in `x = 1`; use `==` to compare"),
        ("a && b", "unexpected character `&` at column 3 in `a && b`; use `and`"),
        ("a || b", "use `or`"),
        ("!a", "use `not` or `!=`"),
        ("count % 2 == 0", "unexpected character `%` at column 7 in `count % 2 == 0`; arithmetic"),
        ("a + 1 > 2", "unexpected character `+` at column 3"),
        ("a - 1 > 2", "unexpected `-` at column 3 in `a - 1 > 2`; arithmetic is not supported"),
        ("x > -y", "`-` must be followed by a number at column 5"),
        ("x ==", "unexpected end of expression at column 5"),
        ("== x", "unexpected `==` at column 1"),
        ("x not y", "unexpected `not` at column 3"),
        ("x in", "unexpected end of expression at column 5"),
        ("and", "unexpected `and` at column 1"),
        ("a.", "expected a key or index right after `.` at column 3"),
        ("a. b", "expected a key or index right after `.` at column 3"),
        (".a == 1", "unexpected `.` at column 1"),
        ("a..b", "expected a key or index right after `.` at column 3"),
        ("true.x", "unexpected `.` at column 5"),
        ("x[", "expected a quoted key or an integer index, found end of expression at column 3"),
        ("x[y] == 1", "expected a quoted key or an integer index, found `y` at column 3"),
        ("x[1.5] == 1", "a list index must be an integer, found `1.5` at column 3"),
        ("x[0 == 1", "expected `]`, found `==` at column 5"),
        ("1.2.3 == x", "malformed number `1.2.3` at column 1"),
        ("10items > 1", "malformed number `10items` at column 1"),
        ("x == 1e", "malformed number `1e` at column 6"),
        ("len()", "`len()` takes exactly one argument (0 given) at column 1"),
        ("len(a, b) > 1", "`len()` takes exactly one argument (2 given)"),
        ("size(x) > 1", "unknown function `size` at column 1 in `size(x) > 1`; available: empty"),
        ("len(,)", "unexpected `,` at column 5"),
        ("[,] == x", "unexpected `,` at column 2"),
        ("x == [1,,2]", "unexpected `,` at column 9"),
        ("café == 1", "unexpected character `é` at column 4"),
        ("x == 'a' 'b'", "unexpected `'b'` at column 10"),
    ],
)
def test_syntax_errors_name_expression_and_column(text, message):
    assert message in compile_error(text).message


def test_trailing_comma_and_empty_list_are_fine():
    assert evaluate("x in [1, 2,]", {"x": 2}) is True
    assert evaluate("x == []", {"x": []}) is True
    assert evaluate("x == [ ]", {"x": []}) is True


def test_whitespace_and_newlines_are_ignored():
    assert evaluate("\n  temp >\t20\r\n and\n not raining  ") is True


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_condition(text):
    assert compile_error(text).message == "condition is empty"


@pytest.mark.parametrize("value", [None, 3, b"x > 1", ["x"]])
def test_non_string_condition(value):
    assert "a condition must be a string" in compile_error(value).message


def test_long_sources_are_shown_as_a_window_around_the_error():
    text = "x == 1 and " * 30 + "y == )"
    message = compile_error(text).message
    assert f"at column {len(text)}" in message
    assert "y == )`" in message
    assert "`…" in message
    assert len(message) < 300


# -- run-time type errors ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values", "fragment"),
    [
        ("len(x) > 1", {"x": 5}, "`len()` expects a string, list or object, but got the number 5"),
        ("len(x) > 1", {"x": True}, "but got the boolean true"),
        ("empty(x)", {"x": 0}, "`empty()` expects a string, list or object, but got the number 0"),
        ("x > 3", {"x": "21.5"}, '`>` cannot compare the string "21.5" with the number 3'),
        ("x < y", {"x": 1, "y": "2"}, "`<` cannot compare the number 1 with the string"),
        ("x >= 1", {"x": True}, "`>=` cannot compare the boolean true with the number 1"),
        ("x < y", {"x": [1], "y": [2]}, "`<` cannot compare the list [1] with the list [2]"),
        ("x <= y", {"x": {}, "y": {}}, "cannot compare the object {} with the object {}"),
        (
            "1 in x",
            {"x": 5},
            "`in` needs a list, string or object on its right, but got the number",
        ),
        ("1 not in x", {"x": False}, "`not in` needs a list, string or object"),
        ("x in s", {"x": 5, "s": "abc"}, "`in` on a string tests for a substring"),
        ("x in o", {"x": 1, "o": {"1": 2}}, "`in` on an object tests for a key"),
        ("x", {"x": object()}, "a value of type `object` is not JSON data"),
    ],
)
def test_runtime_type_errors(text, values, fragment):
    error = runtime_error(text, values)
    assert fragment in error.message
    assert f"in `{text}`" in error.message
    assert error.column is not None


def test_runtime_error_points_at_the_operator():
    error = runtime_error("ok == true and len(x) > 1", {"ok": True, "x": 5})
    assert error.column == 16


def test_long_values_are_shortened_in_messages():
    error = runtime_error("x > 1", {"x": "y" * 5000})
    assert len(error.message) < 200


def test_deeply_nested_data_compared_with_equals():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    error = runtime_error("x == y", {"x": deep, "y": deep})
    assert "too deeply nested" in error.message


# -- hostile input -----------------------------------------------------------------------------


def _nested(opener: str, inner: str, closer: str, depth: int) -> str:
    return opener * depth + inner + closer * depth


HOSTILE = [
    _nested("(", "a", ")", 1000),
    _nested("(", "a", ")", MAX_DEPTH + 1),
    "(" * 1999,
    _nested("[", "1", "]", 500) + " == x",
    "x in " + _nested("[", "", "]", 600),
    "not " * 400 + "x",
    _nested("len(", "x", ")", 300),
    _nested("exists(", "x", ")", 100),
    "a" * 10_000,
    "x == 1 and " * 1000 + "true",
    '"' + "a" * 10_000 + '"',
    "__import__('os')",
    "__import__('os').system('true')",
    "a.__class__",
    "a.__class__.__mro__",
    'a["__class__"]',
    "a.b.__globals__ == 1",
    "__builtins__",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: 1",
    "lambda x: x",
    "(lambda: 1)()",
    "eval('1')",
    "exec('import os')",
    "open('/etc/passwd')",
    "import os",
    "getattr(a, 'b')",
    "a.b()",
    "x if y else z",
    "[x for x in y]",
    "{'a': 1}",
    "f'{x}'",
    "x := 1",
    "a; b",
    "a\\\nb",
    "`ls`",
    "${x}",
    "{{x}}",
    "x\x00 == 1",
    "x == 1 # comment",
    "\ufeffx",
    "x == \u2019quote\u2019",
    "1 ** 999999999",
    "2 << 100",
    "x @ y",
    "x ~ y",
    "x ^ y",
    "x.y.z(",
    "len(" * 30,
    "'",
    "\\",
    ")",
    "]",
    "-",
    ",",
    "not",
    "in",
    "x in in y",
    "x not",
    "exists(x) exists(y)",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda text: repr(text[:30]))
def test_hostile_input_fails_with_expression_error_only(text):
    # pytest.raises(ExpressionError) lets any other exception (RecursionError,
    # SyntaxError, TypeError...) propagate and fail the test.
    with pytest.raises(ExpressionError) as info:
        compile_condition(text)
    assert info.value.message
    assert len(info.value.message) < 400


def test_nesting_within_the_limit_is_fine():
    assert evaluate(_nested("(", "x", ")", MAX_DEPTH), {"x": True}) is True
    assert evaluate("not " * MAX_DEPTH + "x", {"x": True}) is (MAX_DEPTH % 2 == 0)
    assert evaluate(_nested("len(", "x", ")", 1) + " == 1", {"x": "a"}) is True
    error = compile_error(_nested("(", "x", ")", MAX_DEPTH + 1))
    assert f"nests deeper than {MAX_DEPTH} levels" in error.message
    assert error.column == MAX_DEPTH + 2
    assert "deeper than" in compile_error("not " * (MAX_DEPTH + 1) + "x").message


def test_length_limit():
    at_limit = "x == " + "1" * (MAX_LENGTH - 5)
    assert len(at_limit) == MAX_LENGTH
    compile_condition(at_limit)
    error = compile_error(at_limit + "1")
    assert f"condition is {MAX_LENGTH + 1} characters long" in error.message
    assert len(error.message) < 250


def test_dunder_prefixed_keys_that_are_not_python_names_are_allowed():
    # GraphQL answers carry `__typename`; only `__x__` shapes are refused.
    assert evaluate("node.__typename == 'Repo'", {"node": {"__typename": "Repo"}}) is True


_FUZZ_ALPHABET = [
    "x", "y.z", "items.0", "len(", "exists(", "empty(", "(", ")", "[", "]", ",", "and", "or",
    "not", "in", "==", "!=", "<", ">=", "1", "-2.5", '"s"', "'t'", "true", "null", "=", "%",
    ".", "__class__", "\\", '"',
]  # fmt: skip
_FUZZ_VALUES = [
    {},
    {"x": 1, "y": {"z": "a"}, "items": [1, "b", None]},
    {"x": "1", "y": {"z": [1, 2]}, "items": {"0": True}},
    {"x": None, "y": 3, "items": "abc"},
]


def test_fuzz_only_ever_expression_error_or_a_bool():
    rng = random.Random(20240601)
    compiled = 0
    for _ in range(3000):
        text = " ".join(rng.choice(_FUZZ_ALPHABET) for _ in range(rng.randint(1, 12)))
        try:
            condition = compile_condition(text)
        except ExpressionError:
            continue
        compiled += 1
        for values in _FUZZ_VALUES:
            with contextlib.suppress(ExpressionError):
                assert type(condition.evaluate(values)) is bool
    assert compiled > 50  # the fuzzer reaches the evaluator, not only the parser


def test_call_nodes_carry_their_function():
    tree = compile_condition("empty(x)").tree
    assert tree == Call("empty", Path("x", (), 6), 0)
