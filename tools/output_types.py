"""Output types: a JSON Schema per output field of a tool (docs/tools.md#output-types).

A tool's ``output_types`` maps an output field to the JSON Schema of its value. They
come from the tool file (``output_types:``), an OpenAPI import (the 2xx response's
schema, resolved), an MCP server's ``outputSchema`` or a built-in provider's
declaration. The workflow validator compares them with the parameters the fields are
mapped to (``workflows.validation.edge_types``).

``bounded`` keeps an imported schema small: one that is too large as JSON is cut to
fewer levels (types, formats, items and properties), down to its bare ``type``, so a
huge API description cannot bloat every tool that uses it.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

MAX_FIELD_SCHEMA_BYTES = 4096  # one imported field's schema, as compact JSON
MAX_OUTPUT_TYPES_BYTES = 256 * 1024  # every field of one tool, as declared
_KEPT = ("type", "format", "enum", "const", "nullable", "title")
_NESTED = ("items", "additionalProperties")
_LISTS = ("prefixItems", "anyOf", "oneOf", "allOf")


def size_of(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def bounded(schema: Any, max_bytes: int = MAX_FIELD_SCHEMA_BYTES) -> dict[str, Any] | None:
    """``schema`` as it is when it fits ``max_bytes``, else cut to fewer levels until it
    does; ``None`` when not even its bare type fits (or it is not a schema object)."""
    if not isinstance(schema, dict):
        return None
    if size_of(schema) <= max_bytes:
        return schema
    for depth in (4, 3, 2, 1, 0):
        cut = _cut(schema, depth)
        if size_of(cut) <= max_bytes:
            return cut
    bare = {k: schema[k] for k in ("type",) if k in schema}
    return bare if bare and size_of(bare) <= max_bytes else None


def _cut(schema: Any, depth: int) -> Any:
    if not isinstance(schema, dict):
        return schema if isinstance(schema, bool) else {}
    kept: dict[str, Any] = {k: schema[k] for k in _KEPT if k in schema}
    if "enum" in kept and size_of(kept["enum"]) > MAX_FIELD_SCHEMA_BYTES // 4:
        del kept["enum"]
    if depth <= 0:
        return kept
    for key in _NESTED:
        if key in schema:
            kept[key] = _cut(schema[key], depth - 1)
    for key in _LISTS:
        if isinstance(schema.get(key), list):
            kept[key] = [_cut(s, depth - 1) for s in schema[key]]
    if isinstance(schema.get("properties"), dict):
        kept["properties"] = {k: _cut(v, depth - 1) for k, v in schema["properties"].items()}
    return kept


def with_defs(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A property schema taken out of ``root`` keeps the root's ``$defs`` (and
    ``definitions``) when it has none, so its ``#/$defs/…`` references still resolve."""
    found = dict(schema)
    for key in ("$defs", "definitions"):
        if isinstance(root.get(key), dict) and key not in found and _refers(schema):
            found[key] = root[key]
    return found


def _refers(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(_refers(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_refers(v) for v in schema)
    return False


def fields_of(output_schema: Any, max_bytes: int = MAX_FIELD_SCHEMA_BYTES) -> dict[str, Any]:
    """The output types of an object schema (an MCP ``outputSchema``): its properties,
    each bounded; a property whose schema is not an object (``true``) is left out."""
    if not isinstance(output_schema, dict):
        return {}
    properties = output_schema.get("properties")
    if not isinstance(properties, dict):
        return {}
    found = {}
    for name, schema in properties.items():
        if isinstance(schema, dict):
            kept = bounded(with_defs(schema, output_schema), max_bytes)
            if kept is not None:
                found[str(name)] = kept
    return found


def output_types_problem(value: dict[str, Any]) -> tuple[list[str], str] | None:
    """The first problem of declared output types, as (path under ``output_types``,
    message); ``None`` when every field's schema is a valid JSON Schema object."""
    size = size_of(value)
    if size > MAX_OUTPUT_TYPES_BYTES:
        return [], f"{size} bytes of schemas is over the {MAX_OUTPUT_TYPES_BYTES} byte limit"
    for name, schema in value.items():
        if not isinstance(schema, dict):
            return [name], "expected a JSON Schema object (e.g. {type: string})"
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = [name, *(str(p) for p in exc.absolute_path)]
            return where, f"not a valid JSON Schema: {exc.message}"
    return None


def extract_type(path: str) -> dict[str, Any] | None:
    """The type a ``response_extract`` path gives by itself: ``$status`` is an integer,
    ``$headers.NAME`` a string (null when the header is missing); a body path's type is
    the response's, unknown here."""
    if path == "$status":
        return {"type": "integer"}
    if path.startswith("$headers."):
        return {"type": ["string", "null"]}
    return None
