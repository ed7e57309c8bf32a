"""The one dot-path rule (tools/paths.py), and that every reader of a path follows it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runs.engine.resolve import resolve
from tools.errors import TemplateError
from tools.http_client import extract
from tools.paths import (
    MISSING,
    PathError,
    get,
    is_segment,
    list_index,
    parse_path,
    step_into,
    walk,
)
from tools.redaction import Redactor
from tools.spec import HttpConfig
from tools.templating import placeholders, render
from workflows.expressions import ExpressionError, compile_condition
from workflows.expressions.evaluator import Evaluator
from workflows.expressions.parser import parse
from workflows.references import InputRef, Literal, ReferenceError_, StepRef, parse_value

ITEMS = list(range(10, 21))  # 11 items: index 10 is 20, the last
VALUE = {
    "items": ITEMS,
    "rows": [{"name": "a"}, {"name": None}],
    "map": {"0": "zero", "1_0": "key 1_0", "-1": "key -1"},
    "null": None,
    "text": "hello",
    "n": 5,
    "flag": False,
}
ARABIC_ONE = "\u0661"  # a digit to str.isdigit() and int(), never an index
ARABIC_THREE = "\u0663"
HOSTILE = [
    *("1_0", "+1", " 1", "1 ", "1\n", ARABIC_ONE, ARABIC_THREE),
    *("1.0", "0x1", "1e3", "", "-", "--1", "1-"),
]


# --- parse_path --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        ("a", ("a",)),
        ("results.0.lat", ("results", "0", "lat")),
        ("items.-1", ("items", "-1")),
        ("a_b.c-d.1_0", ("a_b", "c-d", "1_0")),
        ("007", ("007",)),
    ],
)
def test_parse_path_splits_on_dots(text, segments):
    assert parse_path(text) == segments


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty segment"),
        ("a..b", "empty segment"),
        (".a", "empty segment"),
        ("a.", "empty segment"),
        ("a b", "segment 'a b'"),
        (" a", "segment ' a'"),
        ("a.+1", "segment '+1'"),
        ("a." + ARABIC_ONE, "segment " + repr(ARABIC_ONE)),
        ("é", "segment 'é'"),
        ("a.$b", "segment '$b'"),
        ("a.b\n", "segment 'b\\n'"),
        ("a[0]", "segment 'a[0]'"),
    ],
)
def test_parse_path_refuses_bad_segments_naming_them(text, why):
    with pytest.raises(PathError, match=r"only ASCII letters|empty segment") as caught:
        parse_path(text)
    assert why in str(caught.value)
    assert repr(text) in str(caught.value)


def test_parse_path_refuses_non_text_and_shortens_long_paths():
    with pytest.raises(PathError, match="must be text, got int"):
        parse_path(3)  # type: ignore[arg-type]
    with pytest.raises(PathError) as caught:
        parse_path("a" * 500 + ". x")
    assert len(str(caught.value)) < 250


def test_is_segment():
    assert is_segment("a-b_0")
    assert [s for s in HOSTILE if is_segment(s)] == ["1_0", "0x1", "1e3", "-", "--1", "1-"]
    assert not is_segment(None)


# --- list_index ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("segment", "index"),
    [("0", 0), ("10", 10), ("-1", -1), ("007", 7), ("-0", 0), ("-007", -7), ("0" * 5000 + "1", 1)],
)
def test_list_index_reads_ascii_digits_with_an_optional_minus(segment, index):
    assert list_index(segment) == index


@pytest.mark.parametrize("segment", [*HOSTILE, "9" * 19, "-" + "9" * 5000, "a", None])
def test_list_index_refuses_everything_else(segment):
    assert list_index(segment) is None


# --- walking -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("items.0", 10),
        ("items.10", 20),
        ("items.-1", 20),
        ("items.-11", 10),
        ("items.007", 17),
        ("items.-0", 10),
        ("rows.0.name", "a"),
        ("rows.-1.name", None),  # present null
        ("map.0", "zero"),  # a dict is indexed by key, even by a number-like one
        ("map.1_0", "key 1_0"),
        ("map.-1", "key -1"),
        ("null", None),
        ("flag", False),
        ("items", ITEMS),
    ],
)
def test_walk_finds(path, expected):
    assert walk(VALUE, parse_path(path)) == expected
    assert get(VALUE, parse_path(path)) == expected


@pytest.mark.parametrize(
    "path",
    [
        "items.11",
        "items.-12",
        "items.1_0",  # Python's int("1_0") is 10; here it is no index
        "items.0x1",
        "items.1e3",
        "items.9999999999999999999999",
        "items.name",
        "map.1",
        "null.x",  # null has no parts
        "text.0",  # strings are not indexed by character
        "n.0",
        "flag.x",
        "absent",
        "absent.deeper",
        "rows.0.name.x",
    ],
)
def test_walk_misses(path):
    assert walk(VALUE, parse_path(path)) is MISSING
    assert get(VALUE, parse_path(path)) is None


@pytest.mark.parametrize("segment", HOSTILE)
def test_hostile_segments_never_index_a_list(segment):
    assert step_into(ITEMS, segment) is MISSING
    assert step_into(tuple(ITEMS), segment) is MISSING


def test_hostile_segments_are_plain_keys_of_a_dict():
    """walk takes parsed segments: a dict key is matched exactly, whatever it holds."""
    odd = {" 1": "space", ARABIC_ONE: "arabic", "": "empty"}
    assert [walk(odd, [k]) for k in odd] == ["space", "arabic", "empty"]
    assert walk(odd, ["1"]) is MISSING


def test_missing_differs_from_null():
    assert walk({"a": None}, ["a"]) is None
    assert walk({}, ["a"]) is MISSING
    assert MISSING is not None
    assert not MISSING
    assert repr(MISSING) == "MISSING"
    assert walk(VALUE, []) is VALUE


def test_walk_never_reads_attributes():
    class Thing:
        secret = "x"

    assert walk(Thing(), ["secret"]) is MISSING
    assert walk({"t": Thing()}, ["t", "__class__"]) is MISSING
    assert walk("text", ["upper"]) is MISSING


# --- every reader agrees -------------------------------------------------------

AGREED = [
    ("items.0", 10),
    ("items.-1", 20),
    ("items.007", 17),
    ("items.-0", 10),
    ("items.1_0", None),
    ("items.11", None),
    ("items.-12", None),
    ("items.99999999999999999999999", None),
    ("items." + "0" * 1500 + "3", 13),  # conditions are at most 2000 characters
    ("rows.1.name", None),
    ("rows.0.name", "a"),
    ("map.0", "zero"),
    ("map.1_0", "key 1_0"),
    ("map.-1", "key -1"),
    ("text.0", None),
    ("n.0", None),
    ("absent.x", None),
    ("items", ITEMS),
    ("flag", False),
]


def _template(value, path):
    return render("{{v." + path + "}}", {"v": value}, env={})


def _step_reference(value, path):
    parsed = parse_value("v." + path, {"v"})
    assert isinstance(parsed, StepRef)
    return resolve(parsed, inputs={}, step_value=lambda _id: value, env={}, redactor=Redactor())[0]


def _input_reference(value, path):
    parsed = parse_value("$input.v." + path, set())
    assert isinstance(parsed, InputRef)
    return resolve(
        parsed, inputs={"v": value}, step_value=lambda _id: None, env={}, redactor=Redactor()
    )[0]


def _item_reference(value, path):
    parsed = parse_value("$item." + path, set())
    return resolve(
        parsed, inputs={}, step_value=lambda _id: None, env={}, redactor=Redactor(), item=value
    )[0]


def _condition(value, path):
    source = "v." + path
    compile_condition(source + " == null", names={"v"})  # accepted by the checker too
    return Evaluator(source, {"v": value}).value(parse(source))


def _extraction(value, path):
    config = HttpConfig(base_url="https://a.example", response_extract={"k": path})
    return extract(value, config.response_extract)["k"]


READERS = [_template, _step_reference, _input_reference, _item_reference, _condition, _extraction]


@pytest.mark.parametrize(("path", "expected"), AGREED)
def test_every_reader_reads_a_path_the_same_way(path, expected):
    got = {reader.__name__: reader(VALUE, path) for reader in READERS}
    assert got == {reader.__name__: expected for reader in READERS}
    assert get(VALUE, parse_path(path)) == expected


@pytest.mark.parametrize("segment", ["+1", " 1", ARABIC_ONE, "a b", "", "$x", "1.", "é"])
def test_every_reader_refuses_a_segment_outside_the_rule(segment):
    path = "items." + segment
    with pytest.raises(TemplateError, match="malformed placeholder"):
        placeholders("{{v." + path + "}}")
    assert isinstance(parse_value("v." + path, {"v"}), Literal)  # not a step reference
    with pytest.raises(ReferenceError_):
        parse_value("$input.v." + path, set())
    with pytest.raises(ReferenceError_):
        parse_value("$item." + path, set())
    with pytest.raises(ExpressionError):
        compile_condition("v." + path + " == 1", names={"v"})
    with pytest.raises(ValidationError, match="response_extract 'k'"):
        HttpConfig(base_url="https://a.example", response_extract={"k": path})
