"""tools.output_types: output types declared in tool files, kept small when imported,
part of a tool's hash only when declared, typed by ``$status``/``$headers`` paths."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.tools.conftest import make_spec
from tools.errors import ToolConfigError
from tools.loader import load_tool_text
from tools.output_types import (
    MAX_FIELD_SCHEMA_BYTES,
    bounded,
    extract_type,
    fields_of,
    output_types_problem,
    size_of,
)
from tools.pins import _what_changed, tool_definition_hash

TOOL = """
name: search
base_url: https://api.example.com
request: {url: /search}
inputs: {type: object, properties: {q: {type: string}}}
response_extract: {results: data.results, total: meta.total, status: $status, next: $headers.link}
"""


def test_a_tool_file_declares_a_schema_per_output_field():
    (spec,) = load_tool_text(
        TOOL + "output_types:\n  results: {type: array, items: {type: object}}\n"
        "  total: {type: integer}\n"
    )
    assert spec.output_type("results") == {"type": "array", "items": {"type": "object"}}
    assert spec.output_type("total") == {"type": "integer"}
    # A response_extract path that says its own type needs no declaration.
    assert spec.output_type("status") == {"type": "integer"}
    assert spec.output_type("next") == {"type": ["string", "null"]}
    assert spec.stored()["output_types"]["total"] == {"type": "integer"}


def test_bad_output_types_are_refused_naming_file_line_and_field():
    with pytest.raises(ToolConfigError) as bad_schema:
        load_tool_text(TOOL + "output_types:\n  total: {type: integr}\n", source="s.yaml")
    (line,) = bad_schema.value.problems
    assert line.startswith("s.yaml:8: tool 'search': field output_types.total.type:")
    assert "not a valid JSON Schema" in line
    with pytest.raises(ToolConfigError) as unknown:
        load_tool_text(TOOL + "output_types:\n  totl: {type: integer}\n", source="s.yaml")
    assert "output_types names totl, which are not outputs of this tool" in str(unknown.value)
    assert "field output_types.totl" in str(unknown.value)
    with pytest.raises(ToolConfigError, match=r"field output_types\.total: .* valid dictionary"):
        load_tool_text(TOOL + "output_types:\n  total: integer\n")


def test_an_undeclared_output_type_is_unknown_and_leaves_the_hash_as_it_was():
    spec = make_spec("/a", name="geo", extract={"lat": "results.0.latitude"})
    assert spec.output_types is None
    assert spec.output_type("lat") is None
    assert spec.output_type("missing") is None
    stored = spec.stored()
    assert "output_types" not in stored  # the stored form of the tools written before
    canonical = {k: v for k, v in stored.items() if k not in ("deprecated", "replacement")}
    canonical = {
        k: v for k, v in canonical.items() if not (k in ("queue", "rate_limit") and v is None)
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    assert tool_definition_hash(spec) == hashlib.sha256(text.encode()).hexdigest()


def test_a_declared_or_changed_output_type_is_a_change_of_the_tools_outputs():
    spec = make_spec("/a", name="geo", extract={"lat": "results.0.latitude"})
    typed = spec.model_copy(update={"output_types": {"lat": {"type": "number"}}})
    retyped = spec.model_copy(update={"output_types": {"lat": {"type": "string"}}})
    hashes = {tool_definition_hash(s) for s in (spec, typed, retyped)}
    assert len(hashes) == 3
    assert _what_changed(typed.stored(), retyped.stored()) == "its outputs changed"
    assert _what_changed(spec.stored(), typed.stored()) == "its outputs changed"


def test_bounded_cuts_a_large_schema_to_fewer_levels_and_keeps_a_small_one():
    small = {"type": "object", "properties": {"id": {"type": "integer"}}}
    assert bounded(small) is small
    deep = {
        "type": "array",
        "items": {
            "type": "object",
            "description": "x" * 5000,
            "properties": {f"p{n}": {"type": "string", "description": "y" * 50} for n in range(40)},
        },
    }
    cut = bounded(deep)
    assert cut is not None
    assert size_of(cut) <= MAX_FIELD_SCHEMA_BYTES
    assert cut["type"] == "array"
    assert cut["items"]["type"] == "object"
    assert cut["items"]["properties"]["p0"] == {"type": "string"}
    assert "description" not in cut["items"]
    huge_enum = {"type": "string", "enum": ["v" * 100 + str(n) for n in range(200)]}
    assert bounded(huge_enum) == {"type": "string"}
    assert bounded("not a schema") is None


def test_fields_of_an_output_schema_keeps_its_defs_for_references():
    schema = {
        "type": "object",
        "$defs": {"hit": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "properties": {
            "hits": {"type": "array", "items": {"$ref": "#/$defs/hit"}},
            "count": {"type": "integer"},
            "anything": True,
        },
    }
    found = fields_of(schema)
    assert found["hits"]["$defs"] == schema["$defs"]
    assert "$defs" not in found["count"]  # it refers to nothing
    assert "anything" not in found
    assert fields_of(None) == {}
    assert fields_of({"type": "object"}) == {}


def test_output_types_problem_and_extract_type():
    assert output_types_problem({"a": {"type": "string"}}) is None
    assert output_types_problem({"a": {"type": 3}})[0] == ["a", "type"]
    too_big = {f"f{n}": {"description": "z" * 3000} for n in range(100)}
    assert "byte limit" in output_types_problem(too_big)[1]
    assert extract_type("$status") == {"type": "integer"}
    assert extract_type("$headers.etag") == {"type": ["string", "null"]}
    assert extract_type("data.items") is None
