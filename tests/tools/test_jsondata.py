"""tools.jsondata: the storage escape, the strict copy, duplicate keys — all iterative."""

from __future__ import annotations

import json

import pytest

from tools.jsondata import (
    DuplicateKey,
    NotJSON,
    duplicate_key_location,
    json_preview,
    json_snapshot,
    loads_strict,
    storage_problem,
    store_escape,
    store_unescape,
)


def nested(depth: int, leaf="x") -> dict:
    value: dict = {"leaf": leaf}
    for _ in range(depth):
        value = {"d": value}
    return value


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",
        "␀",
        "␀0",
        "\x00␀",
        "␀\x00",
        "␀␀00\x00\x00",
        "lone \ud800 and \udfff",
        "␀ud800",
        {"k\x00": ["\x00", {"␀": "␀␀"}]},
        [1, 2.5, None, True, "plain"],
    ],
)
def test_the_storage_escape_round_trips_and_leaves_no_nul(value):
    stored = store_escape(value)

    assert "\\u0000" not in json.dumps(stored)
    assert store_unescape(stored) == value


def test_the_escape_is_documented_shape():
    assert store_escape({"a\x00": "x\x00␀"}) == {"a␀0": "x␀0␀␀"}
    assert store_escape("no change") == "no change"


def test_walks_handle_a_600_deep_value():
    deep = nested(600, "\x00")

    assert store_unescape(store_escape(deep)) == deep
    assert json_snapshot(deep) == deep
    assert storage_problem(deep).endswith("holds a NUL character (\\u0000), which cannot be stored")
    assert json_preview(deep).startswith("{")


def test_json_snapshot_copies_and_names_what_is_not_json():
    source = {"a": [1, {"b": 2}]}
    copy = json_snapshot(source)
    copy["a"][1]["b"] = 3
    assert source == {"a": [1, {"b": 2}]}

    with pytest.raises(NotJSON, match=r"`set` at `\$.a\[1\].b`"):
        json_snapshot({"a": [1, {"b": {1}}]})
    with pytest.raises(NotJSON, match=r"float \(nan\)"):
        json_snapshot([float("nan")])


def test_storage_problem_names_the_place_and_what_is_there():
    assert storage_problem({"a": ["ok", "b\x00"]}) == (
        "the text at `$.a[1]` holds a NUL character (\\u0000), which cannot be stored"
    )
    assert storage_problem({"k\x00": 1}).startswith("a key at `$` ('k\\x00') holds a NUL")
    assert "lone surrogate (\\ud800)" in storage_problem({"a": "x\ud800"})
    assert storage_problem({"n": [1, float("nan")]}) == (
        "`$.n[1]` is the number nan, which JSON cannot hold"
    )
    assert storage_problem({"a": "fine", "b": [1.5, "␀"]}) is None


def test_loads_strict_refuses_duplicate_keys_with_the_line():
    text = '{\n  "steps": [],\n  "name": "x",\n  "steps": [1]\n}'

    with pytest.raises(DuplicateKey, match="'steps' appears twice"):
        loads_strict(text)
    assert duplicate_key_location(text).startswith("line 4, column 3:")
    assert loads_strict('{"a": {"a": 1}}') == {"a": {"a": 1}}


def test_json_preview_is_capped():
    text = json_preview({"x": "y" * 50_000}, limit=1000)

    assert len(text) < 1100
    assert text.endswith("characters shown]")
