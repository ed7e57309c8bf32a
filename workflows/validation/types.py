"""Declared types compared with their use: literals and inputs against tool parameters,
input defaults against their type, and a foreach's ``items`` against a list.

A reference's value is known only at run time, so a mapped value is validated with
every reference replaced by a stand-in whose own errors are ignored: the literal
parts (keys of an object, a missing required key) are still checked. A whole run
input (``$input.NAME``) has a declared type, which is compared with the JSON Schema
type of the place it is mapped to. A step's output has the type its tool (or kind)
declares: ``workflows.validation.edge_types`` compares those across the edges.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing.exceptions import Unresolvable

from workflows.references import InputRef, Literal
from workflows.schema import AnyStep
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, format_path, names

_STANDIN = object()  # where a reference stands in a mapped value
_ARTICLE = {"integer": "an", "array": "an", "object": "an"}
_STRUCTURAL = ("required", "additionalProperties", "unevaluatedProperties", "propertyNames")


def a(kind: str) -> str:
    return f"{_ARTICLE.get(kind, 'a')} {kind}"


def value_issues(
    ctx: FlowContext, step: Any, tool: str, path: str, parsed: Any, validator: Any
) -> list[ValidationIssue]:
    """``param_type_mismatch`` issues of one mapped parameter (its parsed value)."""
    if validator is None:
        return []
    issues = _input_types(ctx, step, tool, path, parsed, validator.schema)
    value = _with_standins(parsed)
    try:
        found = [e for e in validator.iter_errors(value) if not _about_standin(e)]
    except Unresolvable:
        return issues
    problem = best_match(found)
    if problem is None:
        return issues
    where = format_path(problem.absolute_path, path)
    inner = format_path(problem.absolute_path)
    param = path.rsplit(".", 1)[-1] + (
        "" if not inner else inner if inner[0] == "[" else f".{inner}"
    )
    message = (
        f"step `{step.id}` maps `{param}` to {_short(problem.instance)}, which tool `{tool}` "
        f"does not accept: {problem.message}"
    )
    properties = problem.schema.get("properties") if isinstance(problem.schema, dict) else None
    if problem.validator in _STRUCTURAL and isinstance(properties, dict):
        message += f"; it takes {names(properties)}"
    return [*issues, error("param_type_mismatch", where, message, step.id)]


def _input_types(
    ctx: FlowContext, step: AnyStep, tool: str, path: str, parsed: Any, schema: Any
) -> list:
    """A whole run input mapped where the tool takes another JSON type."""
    issues = []
    for rel, leaf in _leaves(parsed):
        if not isinstance(leaf, InputRef) or leaf.path or leaf.name not in ctx.spec.inputs:
            continue
        wanted = _types_at(schema, rel)
        declared = ctx.spec.inputs[leaf.name].type
        if not wanted or declared in wanted or (declared == "integer" and "number" in wanted):
            continue
        where = format_path(rel, path)
        message = (
            f"step `{step.id}` maps `$input.{leaf.name}`, {a(declared)} input, where tool "
            f"`{tool}` takes {' or '.join(a(t) for t in wanted)}; declare the input "
            f"`type: {wanted[0]}` or map a value of that type"
        )
        issues.append(error("param_type_mismatch", where, message, step.id))
    return issues


def _types_at(schema: Any, rel: tuple) -> list[str]:
    for part in rel:
        if not isinstance(schema, dict):
            return []
        if isinstance(part, int):
            schema = schema.get("items")
        else:
            props = schema.get("properties") or {}
            schema = props.get(part, schema.get("additionalProperties"))
    kind = schema.get("type") if isinstance(schema, dict) else None
    return [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []


def _leaves(parsed: Any, rel: tuple = ()) -> list[tuple[tuple, Any]]:
    if isinstance(parsed, dict):
        return [pair for k, v in parsed.items() for pair in _leaves(v, (*rel, k))]
    if isinstance(parsed, list):
        return [pair for i, v in enumerate(parsed) for pair in _leaves(v, (*rel, i))]
    return [(rel, parsed)]


def _with_standins(parsed: Any) -> Any:
    if isinstance(parsed, Literal):
        return parsed.value
    if isinstance(parsed, dict):
        return {k: _with_standins(v) for k, v in parsed.items()}
    if isinstance(parsed, list):
        return [_with_standins(v) for v in parsed]
    return _STANDIN  # a reference or a BadReference


def _about_standin(err: Any) -> bool:
    return _holds_standin(err.instance) and err.validator not in _STRUCTURAL


def _holds_standin(value: Any) -> bool:
    if value is _STANDIN:
        return True
    if isinstance(value, dict):
        return any(_holds_standin(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_standin(v) for v in value)
    return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_input_defaults(ctx: FlowContext) -> list[ValidationIssue]:
    """Every declared default fits the input's ``type`` and ``enum``."""
    issues = []
    for name, spec in ctx.spec.inputs.items():
        if "default" not in spec.model_fields_set or spec.default is None:
            continue
        schema: dict[str, Any] = {"type": spec.type}
        if spec.enum is not None:
            schema["enum"] = spec.enum
        if Draft202012Validator(schema).is_valid(spec.default):
            continue
        if spec.enum is not None and Draft202012Validator({"type": spec.type}).is_valid(
            spec.default
        ):
            fix = f"one of its `enum`: {names(map(str, spec.enum))}"
        else:
            fix = f"{a(spec.type)} (`type: {spec.type}`)"
        message = f"input `{name}` has the default {_short(spec.default)}; write {fix}"
        issues.append(error("input_default_invalid", f"inputs.{name}.default", message))
    return issues


def check_foreach_items(ctx: FlowContext) -> list[ValidationIssue]:
    """A foreach runs over a list: its ``items`` is a list literal, or a list input."""
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        parsed = ctx.parsed[index].get("input_mapping", {}).get("items", _STANDIN)
        if "item_mapping" not in ctx.parsed[index] or parsed is _STANDIN:
            continue
        if isinstance(parsed, Literal) and not isinstance(parsed.value, list):
            what = f"the literal {_short(parsed.value)}"
        elif isinstance(parsed, dict):
            what = "an object (a mapping), not a list"
        elif isinstance(parsed, InputRef) and not parsed.path and parsed.name in ctx.spec.inputs:
            kind = ctx.spec.inputs[parsed.name].type
            if kind == "array":
                continue
            what = f"`{parsed}`, {a(kind)} input (declare it `type: array`)"
        else:
            continue
        message = (
            f"foreach `{step.id}` runs over {what}; `items` must be an array "
            "(a list literal, an array input, or a step's list output)"
        )
        path = f"steps[{index}].input_mapping.items"
        issues.append(error("foreach_items_not_list", path, message, step.id))
    return issues
