"""workflows.validation.edge_types: a step output's declared type against the place it
is mapped to — tool parameters, child workflow inputs, a foreach's items and item
fields — followed down nested paths; definite mismatches only, unknown types silent."""

from __future__ import annotations

from typing import Any

import pytest

from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.schema import WorkflowSpec
from workflows.validation.context import FlowContext
from workflows.validation.edge_types import compatible, describe, edge_type_lines, json_types
from workflows.validator import validate_workflow

HIT = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "owner": {"$ref": "#/$defs/user"},
    },
}


def _tool(name: str, properties: dict[str, Any], types: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": name,
            "http": {
                "base_url": "https://api.test",
                "request": {"url": f"/{name}"},
                "response_extract": {field: field for field in (types or {})},
            },
            "input_schema": {"type": "object", "properties": properties},
            "output_types": types,
        }
    )


REGISTRY = ToolRegistry(
    [
        _tool(
            "a",
            {"q": {"type": "string"}},
            {
                "list": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/hit"},
                    "$defs": {
                        "hit": HIT,
                        "user": {"type": "object", "properties": {"login": {"type": "string"}}},
                    },
                },
                "total": {"type": "number"},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "either": {"oneOf": [HIT, {"type": "null"}]},
                "mixed": {
                    "allOf": [{"type": "object"}, {"properties": {"n": {"type": "integer"}}}]
                },
                "legacy": {"type": "string", "nullable": True},
                "page": {"type": "object", "additionalProperties": {"type": "boolean"}},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
            },
        ),
        _tool(
            "b",
            {
                "name": {"type": "string"},
                "count": {"type": "integer"},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "filter": {
                    "type": "object",
                    "properties": {"login": {"type": "string"}, "ids": {"$ref": "#/$defs/ids"}},
                },
                "choice": {"enum": ["x", "y"]},
                "anything": {},
            },
        ),
        ToolSpec.model_validate(  # no output types at all: every read of it is unknown
            {
                "name": "raw",
                "http": {"base_url": "https://api.test", "request": {"url": "/raw"}},
                "input_schema": {"type": "object", "properties": {}},
            }
        ),
        ToolSpec(  # a built-in tool whose provider declares no output types
            name="stats",
            kind="builtin",
            description="Numbers of a thing.",
            input_schema={"type": "object", "properties": {}},
            outputs=["total"],
        ),
    ]
)


class Children:
    def __init__(self, **specs: WorkflowSpec) -> None:
        self.specs = specs

    def get(self, name: str) -> WorkflowSpec | None:
        return self.specs.get(name)


CHILD = WorkflowSpec.model_validate(
    {
        "name": "child",
        "inputs": {"title": {"type": "string"}, "n": {"type": "integer"}},
        "steps": [{"id": "s", "kind": "tool", "tool": "raw"}],
    }
)


def validate(*steps: dict, **extra: Any):
    # The `b` tool's schema refers to root $defs: add them to its input schema.
    data = {"name": "t", "steps": [{"id": "a", "kind": "tool", "tool": "a"}, *steps], **extra}
    return validate_workflow(data, registry=REGISTRY, workflows=Children(child=CHILD))


def mismatches(*steps: dict) -> dict[str, str]:
    report = validate(*steps)
    return {i.path: i.message for i in report.errors if i.code in TYPE_CODES}


TYPE_CODES = ("edge_type_mismatch", "foreach_items_not_list")


def b(**mapping: Any) -> dict:
    return {"id": "b", "kind": "tool", "tool": "b", "input_mapping": mapping}


def test_a_list_mapped_into_a_string_parameter_is_an_error_naming_edge_and_types():
    report = validate(b(name="a.list"))
    (issue,) = report.errors
    assert issue.code == "edge_type_mismatch"
    assert issue.path == "steps[1].input_mapping.name"
    assert issue.step_id == "b"
    assert issue.message.startswith(
        "edge `a.list` → `b.name`: `a.list` is array<object>, but tool `b` takes string "
        "for `name`; map one item (`a.list.0.FIELD`)"
    )


@pytest.mark.parametrize(
    ("mapping", "where", "said"),
    [
        (
            {"count": "a.list.0.name"},
            "count",
            "`a.list.0.name` is string, but tool `b` takes integer",
        ),
        ({"name": "a.list.-1.tags"}, "name", "is array<string>, but tool `b` takes string"),
        ({"count": "a.list.0.owner.login"}, "count", "`a.list.0.owner.login` is string"),
        ({"ids": "a.total"}, "ids", "wrap it in a list (`[a.total]`)"),
        ({"name": "a.list.0"}, "name", "map one of its fields (`a.list.0.FIELD`)"),
        ({"filter": {"login": "a.list"}}, "filter.login", "takes string for `filter.login`"),
        ({"ids": ["a.list.0.name"]}, "ids[0]", "takes integer for `ids[0]`"),
        ({"count": "a.mixed.n", "name": "a.page.flag"}, "name", "is boolean"),
        ({"count": "a.pair.0"}, "count", "`a.pair.0` is string"),
        ({"choice": "a.total"}, "choice", "takes string for `choice`"),
        ({"name": "a.either.tags"}, "name", "is array<string>|null"),
        ({"name": "a.either"}, "name", "is object|null"),
    ],
)
def test_nested_paths_are_followed_through_the_output_schema(mapping, where, said):
    found = mismatches(b(**mapping))
    assert list(found) == [f"steps[1].input_mapping.{where}"], found
    assert said in found[f"steps[1].input_mapping.{where}"]


@pytest.mark.parametrize(
    "mapping",
    [
        {"name": "a.list.0.name", "count": "a.list.0.id", "ids": "a.pair"},
        {"count": "a.total"},  # a number may be an integer: not a definite mismatch
        {"name": "a.maybe", "anything": "a.list"},  # string or null; an untyped parameter
        {"name": "a.legacy", "count": "a.either.id"},  # OpenAPI nullable; a nullable object
        {"anything": "raw.body"},  # an untyped parameter takes anything
        {"filter": {"login": "a.list.0.owner.login", "ids": "a.list"}},  # an unresolvable $ref
        {"name": "$step.a"},  # the whole output: unknown
    ],
)
def test_compatible_types_and_untyped_targets_are_silent(mapping):
    raw = {"id": "raw", "kind": "tool", "tool": "raw"}
    report = validate(raw, b(**mapping))
    assert report.errors == (), [i.message for i in report.errors]
    assert report.warnings == ()


@pytest.mark.parametrize(
    ("mapping", "edges", "why"),
    [
        (
            {"name": "raw.body", "count": "raw.x.y"},
            "`raw.body` → `b.name` (string), `raw.x.y` → `b.count` (integer)",
            "tool `raw` declares no output type for `body`, `x`; declare them under "
            "`output_types` in its file",
        ),
        (
            {"name": "a.list.0.nope", "anything": "a.page"},
            "`a.list.0.nope` → `b.name` (string)",
            "tool `a`'s output type for `list` does not declare `a.list.0.nope`; add them "
            "to its `output_types`",
        ),
    ],
)
def test_an_unknown_type_into_a_typed_parameter_is_one_warning_per_step(mapping, edges, why):
    raw = {"id": "raw", "kind": "tool", "tool": "raw"}
    report = validate(raw, b(**mapping))
    assert report.errors == (), [i.message for i in report.errors]
    (warning,) = report.warnings
    assert (warning.code, warning.path, warning.step_id) == ("edge_type_unknown", "steps[2]", "b")
    assert f"checked only when it runs: {edges}; " in warning.message
    assert why in warning.message


def test_a_foreach_over_an_untyped_list_names_the_list_field_once():
    raw = {"id": "raw", "kind": "tool", "tool": "raw"}
    each = {
        "id": "each",
        "kind": "foreach",
        "tool": "b",
        "input_mapping": {"items": "raw.list"},
        "item_mapping": {"name": "$item.name"},
    }
    (warning,) = validate(raw, each).warnings
    assert warning.step_id == "each"
    assert warning.message.endswith(
        "`raw.list` → `each.items` (array), `$item.name` → `each.name` (string); tool `raw` "
        "declares no output type for `list`; declare them under `output_types` in its file "
        '(docs/tools.md, "Output types")'
    )


def test_an_untyped_built_in_tool_is_named_with_where_its_types_come_from():
    report = validate({"id": "st", "kind": "tool", "tool": "stats"}, b(count="st.total"))
    (warning,) = report.warnings
    assert warning.message.endswith(
        "`st.total` → `b.count` (integer); built-in tool `stats` declares no output type "
        "for `total` (its provider's)"
    )


def test_no_unknown_type_warning_where_nothing_could_declare_it():
    """A transform's computed key, a child's output, a foreach's errors: no declaration
    to add, so no warning; an ``on_error: continue`` step's ``error`` is typed."""
    shaped = {
        "id": "shaped",
        "kind": "transform",
        "expression": "{first: rows[0]}",
        "input_mapping": {"rows": "a.list"},
    }
    raw = {"id": "raw", "kind": "tool", "tool": "raw", "on_error": "continue"}
    target = b(name="shaped.first", count="raw.error.status")
    target["input_mapping"]["ids"] = "raw.error.nope"
    report = validate(shaped, raw, target)
    assert report.errors == (), [i.message for i in report.errors]
    assert report.warnings == (), [i.message for i in report.warnings]


def test_a_foreach_runs_over_a_list_and_maps_its_items_by_their_type():
    each = {
        "id": "each",
        "kind": "foreach",
        "tool": "b",
        "input_mapping": {"items": "a.list"},
        "item_mapping": {"name": "$item.name", "count": "$index", "ids": "$item.id"},
    }
    found = mismatches(each)
    assert list(found) == ["steps[1].item_mapping.ids"]
    assert found["steps[1].item_mapping.ids"] == (
        "edge `$item.id` → `each.ids`: `$item.id` is integer, but tool `b` takes "
        "array<integer> for `ids`; wrap it in a list (`[$item.id]`)"
    )
    over_number = {**each, "input_mapping": {"items": "a.total"}, "item_mapping": {"name": "$item"}}
    report = validate(over_number)
    (issue,) = report.errors
    assert (issue.code, issue.path) == ("foreach_items_not_list", "steps[1].input_mapping.items")
    assert "`a.total` is number, but foreach `each` runs over an array" in issue.message


def test_a_foreach_results_are_typed_by_its_tool_for_later_steps():
    each = {
        "id": "each",
        "kind": "foreach",
        "tool": "a",
        "input_mapping": {"items": ["x", "y"]},
        "item_mapping": {"q": "$item"},
    }
    found = mismatches(each, b(name="each.items.0.total", count="each.count"))
    assert list(found) == ["steps[2].input_mapping.name"]
    assert "`each.items.0.total` is number" in found["steps[2].input_mapping.name"]


def test_llm_transform_and_decision_outputs_are_typed_by_their_step():
    llm = {
        "id": "ask",
        "kind": "llm",
        "prompt": "Rate {{x}}",
        "input_mapping": {"x": "a.list"},  # an llm input takes any value: silent
        "output_schema": {"type": "object", "properties": {"score": {"type": "integer"}}},
    }
    shape = {
        "id": "shape",
        "kind": "transform",
        "expression": "{n: length(rows), names: rows[*].name, first: rows[0]}",
        "input_mapping": {"rows": "a.list"},
    }
    pick = {
        "id": "pick",
        "kind": "decision",
        "branches": ["hi", "lo"],
        "conditions": {"hi": "n > 1"},
        "default": "lo",
        "input_mapping": {"n": "shape.n"},
    }
    found = mismatches(
        llm, shape, pick,
        b(name="ask.result.score", count="shape.names", ids="pick.branch", anything="shape.first"),
        {"id": "c", "kind": "tool", "tool": "b", "input_mapping": {"name": "ask.result"}},
    )  # fmt: skip
    assert sorted(found) == [
        "steps[4].input_mapping.count",
        "steps[4].input_mapping.ids",
        "steps[4].input_mapping.name",
        "steps[5].input_mapping.name",
    ]
    assert "`ask.result.score` is integer" in found["steps[4].input_mapping.name"]
    assert "`shape.names` is array|null" in found["steps[4].input_mapping.count"]
    assert "`pick.branch` is string" in found["steps[4].input_mapping.ids"]
    assert "`ask.result` is object" in found["steps[5].input_mapping.name"]


def test_a_child_workflows_declared_inputs_are_typed_places():
    call = {
        "id": "sub",
        "kind": "workflow",
        "workflow": "child",
        "input_mapping": {"title": "a.list.0.name", "n": "a.list"},
    }
    (issue,) = validate(call).errors
    assert issue.path == "steps[1].input_mapping.n"
    assert "`a.list` is array<object>, but workflow `child` takes integer for `n`" in issue.message


def test_without_a_registry_nothing_is_checked():
    data = {"name": "t", "steps": [{"id": "a", "kind": "tool", "tool": "a"}, b(name="a.list")]}
    assert validate_workflow(data, registry=None).errors == ()


def test_edge_type_lines_describe_every_edge_for_the_picture():
    each = {
        "id": "each",
        "kind": "foreach",
        "tool": "b",
        "input_mapping": {"items": "a.list"},
        "item_mapping": {"name": "$item.name"},
    }
    spec = validate(b(name="a.list", anything="a.total"), each).spec
    lines = edge_type_lines(FlowContext.build(spec, REGISTRY))
    assert lines == {
        ("a", "b"): [
            "a.list: array<object> → b.name: string",
            "a.total: number → b.anything: unknown",
        ],
        ("a", "each"): [
            "a.list: array<object> → each.items: array",
            "$item.name: string → each.name: string",
        ],
    }


def test_type_helpers():
    root = {"$defs": {"s": {"type": "string"}}}
    assert json_types({"$ref": "#/$defs/s"}, root) == {"string"}
    assert json_types({"$ref": "#/$defs/none"}, root) is None
    assert json_types({"$ref": "https://elsewhere.test/s"}, root) is None
    assert json_types({"const": 3}, {}) == {"integer"}
    assert json_types({"enum": ["a", None]}, {}) == {"string", "null"}
    assert json_types({"anyOf": [{"type": "string"}, {}]}, {}) is None
    assert json_types({"allOf": [{"type": ["string", "null"]}, {"type": "string"}]}, {}) == {
        "string"
    }
    assert json_types({}, {}) is None
    loop = {"$defs": {"x": {"$ref": "#/$defs/x"}}}
    assert json_types({"$ref": "#/$defs/x"}, loop) is None
    assert describe({"type": "array", "items": {"type": "array", "items": {}}}, {}) == (
        "array<array>"
    )
    assert describe({"type": ["null", "integer"]}, {}) == "integer|null"
    nested = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}
    assert describe({"anyOf": [nested, {"type": "null"}, nested]}, {}) == "array<integer|null>|null"
    assert compatible(frozenset({"integer"}), frozenset({"number"}))
    assert not compatible(frozenset({"array"}), frozenset({"string", "null"}))
