"""Types across edges: a step's output mapped where a type is declared.

Every step reference of a mapping (``a.list``, ``a.body.items.0.id``) is an edge; its
type is the JSON Schema of that path of the source step's output
(``FlowContext.output_field_schema``: the tool's ``output_types``, an llm step's
``output_schema``, a transform's inferred keys, a foreach's ``count``/``items``), its
path followed through ``properties``, ``items``, ``prefixItems``, ``anyOf``/``oneOf``,
``allOf`` and local ``$ref``. It is compared with the JSON type of the place it is
mapped to: a tool parameter (the property's schema, followed down a list or object
literal), a child workflow's declared input, a foreach's ``items`` (an array) and, in
a foreach's ``item_mapping``, ``$item.path`` against the items' type.

A definite mismatch — no JSON type of the source can be one the target takes
(``integer`` and ``number`` count as one) — is an ``edge_type_mismatch`` error naming
the edge, both types and a fix. Where the target declares a type but the source's is
unknown (most http tools declare no output types), the step gets one
``edge_type_unknown`` warning listing those edges and who could declare the type: one
per step, not one per mapping, so that a workflow of untyped tools is not buried in
them. Where the target has no type (llm and decision steps take any value) nothing is
reported; a tool's arguments are checked against its input schema before every call
all the same (docs/steps.md, "Output types").

``edge_type_lines`` gives the same edges as text (``a.list: array<object> → b.name:
string``) for the review page's picture, keyed by (source, target) step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tools.paths import list_index
from workflows.graph import iter_leaves
from workflows.references import ItemRef, StepRef
from workflows.schema import ForeachStep, WorkflowStep
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, format_path, warning

_MAX_REFS = 32  # $ref followed in a row before a schema counts as unknown
_ORDER = ("array", "object", "string", "integer", "number", "boolean", "null")
_SCALARS = frozenset({"string", "integer", "number", "boolean"})
Types = frozenset[str]
_ITEMS = ("input_mapping", "items")


@dataclass(frozen=True)
class Typed:
    """A schema with the root its local ``$ref`` resolve against."""

    schema: dict[str, Any]
    root: dict[str, Any]

    def at(self, path: tuple[str | int, ...]) -> Typed | None:
        found = _walk(self.schema, tuple(str(p) for p in path), self.root)
        return None if found is None else Typed(found, self.root)

    def types(self) -> Types | None:
        return json_types(self.schema, self.root)

    def text(self) -> str:
        return describe(self.schema, self.root)


@dataclass(frozen=True)
class Flow:
    """One mapped reference to another step's output (or a foreach item), and where it
    goes: ``wanted`` is the target's type (None: untyped, such as an llm input)."""

    step_index: int
    step_id: str
    source_id: str
    source: str  # a.list, $item.id
    field: str  # the source step's output field it reads: list; a foreach's items' field
    source_type: Typed | None
    target: str  # b.name, b.items
    path: str  # steps[1].input_mapping.name
    wanted: Typed | None
    owner: str  # tool `x`, workflow `child`, foreach `each`
    code: str  # the issue code of a mismatch


_ARRAY = Typed({"type": "array"}, {})


def check_edge_types(ctx: FlowContext) -> list[ValidationIssue]:
    """``edge_type_mismatch`` (and ``foreach_items_not_list`` for a foreach over a typed
    output that is no list) for every definite mismatch across an edge; one
    ``edge_type_unknown`` warning per step whose typed parameters take untyped values."""
    if ctx.registry is None:
        return []
    issues = []
    unknown: dict[int, list[tuple[Flow, str, Any]]] = {}
    for flow in _flows(ctx):
        want = None if flow.wanted is None else flow.wanted.types()
        if want is None:
            continue
        have = None if flow.source_type is None else flow.source_type.types()
        if have is None:
            declarer = _declarer(ctx, flow)
            if declarer is not None:
                unknown.setdefault(flow.step_index, []).append((flow, *declarer))
        elif not compatible(have, want):
            issues.append(error(flow.code, flow.path, _message(flow, have, want), flow.step_id))
    for index, found in unknown.items():
        step_id = found[0][0].step_id
        issues.append(warning("edge_type_unknown", f"steps[{index}]", _unknown(found), step_id))
    return issues


def edge_type_lines(ctx: FlowContext) -> dict[tuple[str, str], list[str]]:
    """``{(source step, target step): ["a.list: array<object> → b.name: string", …]}``:
    every mapped reference across an edge with what is known of both ends' types."""
    lines: dict[tuple[str, str], list[str]] = {}
    for flow in _flows(ctx):
        have = flow.source_type.text() if flow.source_type is not None else "unknown"
        line = f"{flow.source}: {have} → {flow.target}"
        if flow.wanted is not None:
            line += f": {flow.wanted.text()}"
        found = lines.setdefault((flow.source_id, flow.step_id), [])
        if line not in found:
            found.append(line)
    return lines


def compatible(have: Types, want: Types) -> bool:
    """Whether some JSON type of the source is one the target takes."""
    numbers = {"integer", "number"}
    return any(h == w or (h in numbers and w in numbers) for h in have for w in want)


def _flows(ctx: FlowContext) -> Iterator[Flow]:
    for index, step in enumerate(ctx.spec.steps):
        parsed = ctx.parsed[index]
        items_type: Typed | None = None
        items = parsed.get("input_mapping", {}).get("items")
        over_step = isinstance(step, ForeachStep) and isinstance(items, StepRef)
        if over_step and isinstance(items, StepRef) and items.path:
            items_type = _source(ctx, items)
            path = f"steps[{index}].input_mapping.items"
            yield _flow(ctx, index, items, items_type, "items", path, _ARRAY, step)
        for field_name, mapping in parsed.items():
            for param, value in mapping.items():
                if isinstance(step, ForeachStep) and (field_name, param) == _ITEMS:
                    continue  # the list it runs over, checked above
                wanted = _wanted(ctx, step, param)
                for rel, leaf in iter_leaves(value):
                    if isinstance(leaf, StepRef) and leaf.path and leaf.step_id != step.id:
                        have = _source(ctx, leaf)
                    elif isinstance(leaf, ItemRef) and field_name == "item_mapping" and over_step:
                        have = _item(items_type, leaf)
                    else:
                        continue
                    where = format_path((param, *rel), f"steps[{index}].{field_name}")
                    want = None if wanted is None else wanted.at(rel)
                    target = format_path(rel, param)
                    yield _flow(ctx, index, leaf, have, target, where, want, step)


def _flow(
    ctx: FlowContext,
    index: int,
    leaf: StepRef | ItemRef,
    have: Typed | None,
    target: str,
    path: str,
    want: Typed | None,
    step: Any,
) -> Flow:
    if isinstance(leaf, ItemRef):  # an item of the foreach's items, read from a step
        items = ctx.parsed[index]["input_mapping"]["items"]
        source_id, field = items.step_id, str(items.path[0]) if items.path else ""
    else:
        source_id, field = leaf.step_id, _field(ctx, leaf)
    owner = _owner(step)
    code = (
        "foreach_items_not_list"
        if target == "items" and step.retries_per_item
        else ("edge_type_mismatch")
    )
    return Flow(
        index, step.id, source_id, str(leaf), field, have, f"{step.id}.{target}", path, want,
        owner, code,
    )  # fmt: skip


def _owner(step: Any) -> str:
    if isinstance(step, WorkflowStep):
        return f"workflow `{step.workflow}`"
    tools = step.direct_tools()
    return f"tool `{tools[0]}`" if tools else f"{step.kind} step `{step.id}`"


def _wanted(ctx: FlowContext, step: Any, param: str) -> Typed | None:
    """The declared type of one mapped parameter of ``step`` (None: untyped)."""
    if isinstance(step, WorkflowStep):
        child = None if ctx.workflows is None else ctx.workflows.get(step.workflow)
        spec = None if child is None else child.inputs.get(param)
        return None if spec is None else Typed({"type": spec.type}, {})
    for name in step.direct_tools():
        tool = ctx.tool(name)
        schema = getattr(tool, "input_schema", None) or {}
        prop = (schema.get("properties") or {}).get(param)
        if isinstance(prop, dict):
            return Typed(prop, schema)
    return None


def _source(ctx: FlowContext, ref: StepRef) -> Typed | None:
    """The type of ``ref``'s path in its step's output (None: unknown)."""
    target = ctx.step(ref.step_id)
    if target is None or not ref.path:
        return None
    schema = ctx.output_field_schema(target, ref.path[0])
    if not isinstance(schema, dict):
        return None
    return Typed(schema, schema).at(ref.path[1:])


def _item(items: Typed | None, ref: ItemRef) -> Typed | None:
    if ref.index:
        return Typed({"type": "integer"}, {})
    one = None if items is None else items.at(("0",))
    return None if one is None else one.at(ref.path)


def _unknown(found: list[tuple[Flow, str, Any]]) -> str:
    """``step `b` takes 2 values of unknown type …``: the edges, then who could type them
    (one sentence per source, naming its fields)."""
    flows = [flow for flow, _, _ in found]
    edges = ", ".join(f"`{f.source}` → `{f.target}` ({f.wanted.text()})" for f in flows if f.wanted)
    count = "a value" if len(flows) == 1 else f"{len(flows)} values"
    why: dict[str, list[str]] = {}
    for flow, tool_name, tool in found:
        template, name = _why_unknown(flow, tool_name, tool)
        names = why.setdefault(template, [])
        if name not in names:
            names.append(name)
    reasons = [t.format(names=", ".join(f"`{n}`" for n in names)) for t, names in why.items()]
    return (
        f"step `{flows[0].step_id}` takes {count} of unknown type, checked only when it "
        f"runs: {edges}; {'; '.join(reasons)}"
    )


def _source_tool(ctx: FlowContext, flow: Flow) -> tuple[str, Any] | None:
    """The tool whose results ``flow`` reads (a tool or foreach step's), with its name."""
    source = ctx.step(flow.source_id)
    if source is None or isinstance(source, WorkflowStep):
        return None
    name = source.output_tool() or (source.direct_tools() or (None,))[0]
    if name is None or source.kind not in ("tool", "foreach"):
        return None
    tool = ctx.tool(name)
    return None if tool is None else (str(name), tool)


def _field(ctx: FlowContext, ref: StepRef) -> str:
    """The output field ``ref`` reads (``a.body.x`` → ``body``); of a foreach's results,
    the field of its tool's result (``each.items.0.name`` → ``name``)."""
    path = [str(p) for p in ref.path]
    source = ctx.step(ref.step_id)
    foreach = source is not None and source.kind == "foreach"
    if foreach and len(path) > 2 and path[0] == "items" and list_index(path[1]) is not None:
        return path[2]
    return path[0] if path else ""


def _declarer(ctx: FlowContext, flow: Flow) -> tuple[str, Any] | None:
    """The tool (name, spec) whose output types could declare ``flow``'s unknown type,
    or None: ``flow`` must read a tool's result field (one the tool has, when it lists
    its outputs; a field it lacks is ``unknown_output_field`` already). A transform's
    computed key, a child workflow's output, a foreach's ``errors`` or a step's
    ``error`` record has no declaration to add."""
    found = _source_tool(ctx, flow)
    if found is None:
        return None
    source = ctx.step(flow.source_id)
    parts = flow.source.split(".")
    foreach = source is not None and source.kind == "foreach" and parts[0] != "$item"
    if foreach and (len(parts) < 4 or parts[1] != "items"):
        return None  # count, errors, the items list as a whole
    if flow.field == "error" and getattr(source, "on_error", None) == "continue":
        return None  # its error record, typed as far as it goes
    outputs = getattr(found[1], "outputs", None) or ()
    return found if not outputs or flow.field in outputs else None


def _why_unknown(flow: Flow, name: str, tool: Any) -> tuple[str, str]:
    """Who could declare the type of ``flow``'s source: a sentence with ``{names}`` for
    the fields it is about, and this flow's one. An http tool's file declares
    ``output_types``; an MCP tool's come from its server's ``outputSchema``, a built-in
    tool's from its provider."""
    field = flow.field
    typed = getattr(tool, "output_type", None)
    partly = callable(typed) and isinstance(typed(field), dict)
    kind = getattr(tool, "kind", "http")
    if kind in ("mcp", "builtin"):
        owner = "MCP tool" if kind == "mcp" else "built-in tool"
        source = "its server's `outputSchema`" if kind == "mcp" else "its provider's"
        if partly:
            text = f"{owner} `{name}`'s output type for `{field}` ({source}) does not "
            return text + "declare {names}", flow.source
        return f"{owner} `{name}` declares no output type for {{names}} ({source})", field
    doc = '(docs/tools.md, "Output types")'
    if partly:
        text = f"tool `{name}`'s output type for `{field}` does not declare {{names}}"
        return text + f"; add them to its `output_types` {doc}", flow.source
    text = f"tool `{name}` declares no output type for {{names}}; declare them under "
    return text + f"`output_types` in its file {doc}", field


def _message(flow: Flow, have: Types, want: Types) -> str:
    shown = flow.source_type.text() if flow.source_type is not None else "unknown"
    wanted = flow.wanted.text() if flow.wanted is not None else "unknown"
    head = f"edge `{flow.source}` → `{flow.target}`: `{flow.source}` is {shown}"
    param = flow.target.split(".", 1)[1]
    if flow.code == "foreach_items_not_list":
        return f"{head}, but foreach `{flow.step_id}` runs over an array; map a list output"
    return f"{head}, but {flow.owner} takes {wanted} for `{param}`{_fix(flow, have, want)}"


def _fix(flow: Flow, have: Types, want: Types) -> str:
    if "array" in have and want <= _SCALARS | {"null"}:
        item = flow.source_type.at(("0",)) if flow.source_type is not None else None
        kinds = None if item is None else item.types()
        one = ".0" if kinds is not None and not kinds & {"object", "array"} else ".0.FIELD"
        return (
            f"; map one item (`{flow.source}{one}`), or reshape the list with a transform "
            "step (`join(', ', NAME)`, `length(NAME)`)"
        )
    if "object" in have and want <= _SCALARS | {"null"}:
        return f"; map one of its fields (`{flow.source}.FIELD`)"
    if "array" in want and have <= _SCALARS | {"null"}:
        return f"; wrap it in a list (`[{flow.source}]`)"
    convert = "to_number" if want & {"integer", "number"} else "to_string"
    if not want & {"integer", "number", "string"}:
        return "; map a value of that type"
    return f"; map a value of that type, or convert it with a transform step (`{convert}(NAME)`)"


def json_types(schema: Any, root: dict[str, Any]) -> Types | None:
    """The JSON types a schema allows, when it says (``type``, ``const``, ``enum``, the
    branches of ``anyOf``/``oneOf``/``allOf``, OpenAPI's ``nullable``); None: any."""
    schema = _resolve(schema, root)
    if schema is None:
        return None
    kind = schema.get("type")
    found: set[str] | None
    if isinstance(kind, str):
        found = {kind}
    elif isinstance(kind, list) and kind:
        found = {str(k) for k in kind}
    elif "const" in schema:
        found = {_type_of(schema["const"])}
    elif isinstance(schema.get("enum"), list) and schema["enum"]:
        found = {_type_of(v) for v in schema["enum"]}
    else:
        found = _branch_types(schema, root)
    if found is None:
        return None
    if schema.get("nullable") is True:
        found.add("null")
    return frozenset(found)


def _branch_types(schema: dict[str, Any], root: dict[str, Any]) -> set[str] | None:
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            parts = [json_types(b, root) for b in branches]
            return None if any(p is None for p in parts) else set().union(*parts)  # type: ignore[arg-type]
    known = [json_types(b, root) for b in schema.get("allOf") or []]
    narrowed = [set(k) for k in known if k is not None]
    return set.intersection(*narrowed) if narrowed else None


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def describe(schema: Any, root: dict[str, Any], depth: int = 2) -> str:
    """``array<object>``, ``string|null``, ``integer``; ``unknown`` when untyped."""
    types = json_types(schema, root)
    if types is None:
        return "unknown"
    resolved = _resolve(schema, root) or {}
    branches = resolved.get("anyOf") or resolved.get("oneOf")
    if "type" not in resolved and isinstance(branches, list) and branches:
        shown = [describe(branch, root, depth) for branch in branches]
        return "|".join(dict.fromkeys(p for text in shown for p in _alternatives(text)))
    parts = []
    for kind in sorted(types, key=lambda k: (_ORDER.index(k) if k in _ORDER else 99, k)):
        items = resolved.get("items")
        if kind == "array" and depth > 0 and isinstance(items, dict | bool):
            inner = describe(items, root, depth - 1)
            parts.append(f"array<{inner}>" if inner != "unknown" else "array")
        else:
            parts.append(kind)
    return "|".join(parts)


def _alternatives(text: str) -> list[str]:
    """``array<a|b>|null`` → ``["array<a|b>", "null"]``: split at the top level only."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "|" and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    return [*parts, text[start:]]


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` with its local ``$ref`` followed; ``true`` is ``{}``; else None."""
    for _ in range(_MAX_REFS):
        if schema is True:
            return {}
        if not isinstance(schema, dict):
            return None
        ref = schema.get("$ref")
        if not isinstance(ref, str):
            return schema
        schema = _pointer(root, ref)
    return None


def _pointer(root: Any, ref: str) -> Any:
    if not ref.startswith("#"):
        return None  # an external reference: unknown
    node = root
    for raw in [p for p in ref[1:].split("/") if p]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _walk(schema: Any, path: tuple[str, ...], root: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of the value at ``path`` inside one of ``schema`` (None: unknown)."""
    node = _resolve(schema, root)
    for part in path:
        if node is None:
            return None
        node = _resolve(_child(node, part, root), root)
    return node


def _child(schema: dict[str, Any], part: str, root: dict[str, Any]) -> Any:
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            found = []
            for branch in branches:
                inner = _resolve(branch, root)
                kinds = None if inner is None else json_types(inner, root)
                if kinds is not None and not kinds & {"array", "object"}:
                    found.append({"type": "null"})  # reading into a scalar gives null
                    continue
                below = None if inner is None else _resolve(_child(inner, part, root), root)
                if below is None:
                    return None
                found.append(below)
            return {"anyOf": found}
    for branch in schema.get("allOf") or []:
        inner = _resolve(branch, root)
        below = None if inner is None else _child(inner, part, root)
        if below is not None:
            return below
    index = list_index(part)
    kinds = json_types(schema, root) or frozenset()
    if index is not None and ("array" in kinds or "items" in schema or "prefixItems" in schema):
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and 0 <= index < len(prefix):
            return prefix[index]
        items = schema.get("items")
        return items if isinstance(items, dict) else None
    properties = schema.get("properties")
    if isinstance(properties, dict) and part in properties:
        return properties[part]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None
