"""What a JMESPath transform reads: only its mapped names, and text only in quotes.

A transform sees exactly its ``input_mapping``: a root identifier that is not a
mapped name reads null (``transform_unknown_name``). In JMESPath a double-quoted
string is a *field name*, so ``region == "North"`` compares two fields and is never
true; text is written ``'North'`` (``transform_quoted_field``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath.lexer import Lexer

from workflows.schema import TransformStep
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, names, suggest

_LOOP_NAMES = frozenset({"item", "each", "element", "elem", "row", "x", "this"})
_COMPARATORS = frozenset({"eq", "ne", "lt", "lte", "gt", "gte"})
# Node types whose every child is evaluated against the same data as the node.
_SAME_DATA = frozenset(
    {"comparator", "or_expression", "and_expression", "not_expression", "multi_select_list",
     "function_expression", "key_val_pair", "multi_select_dict"}
)  # fmt: skip
# Node types whose first child is evaluated against the node's data, the rest against
# each element (or the result) of the first.
_FIRST_ONLY = frozenset(
    {"subexpression", "index_expression", "projection", "value_projection", "filter_projection",
     "pipe"}
)  # fmt: skip


def check_transforms(ctx: FlowContext) -> list[ValidationIssue]:
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        if not isinstance(step, TransformStep):
            continue
        path = f"steps[{index}].expression"
        try:
            tree = jmespath.compile(step.expression).parsed
        except (jmespath_errors.JMESPathError, RecursionError, TypeError, ValueError):
            continue  # transform_invalid says why
        quoted = _quoted_texts(step.expression)
        issues += _unknown_roots(ctx, step, path, tree, skip=set(quoted))
        issues += [_quoted_issue(step, path, text) for text in quoted]
    return issues


def root_names(node: Any, at_root: bool = True) -> Iterator[str]:
    """The identifiers an expression reads from its input object (the mapped names)."""
    kind = node.get("type")
    children = node.get("children", [])
    if kind == "field":
        if at_root:
            yield node["value"]
        return
    if kind in _FIRST_ONLY:
        if children:
            yield from root_names(children[0], at_root)
        for child in children[1:]:
            yield from root_names(child, False)
        return
    if kind in ("flatten",):
        for child in children:
            yield from root_names(child, at_root)
        return
    if kind in _SAME_DATA:
        for child in children:
            yield from root_names(child, at_root)
    # literal, current, identity, index, slice, expref: read no root name


def loop_variables(node: Any, over: str = "") -> Iterator[tuple[str, str]]:
    """``(list, name)`` for ``list[].{x: item.name}``: a loop variable that JMESPath lacks
    (inside a projection the element itself is the data; its fields are read directly)."""
    kind = node.get("type")
    children = node.get("children", [])
    if kind == "field" and over and node["value"] in _LOOP_NAMES:
        yield over, node["value"]
        return
    if kind in ("projection", "filter_projection", "value_projection") and children:
        name = _field_name(children[0])
        yield from loop_variables(children[0], over)
        for child in children[1:]:
            yield from loop_variables(child, name or over)
        return
    if kind in _FIRST_ONLY and children:
        yield from loop_variables(children[0], over)
        return  # deeper fields are nested reads, not the element root
    for child in children:
        yield from loop_variables(child, over)


def _field_name(node: Any) -> str:
    while node.get("type") in ("flatten", "subexpression") and node.get("children"):
        node = node["children"][-1 if node["type"] == "subexpression" else 0]
    return node.get("value", "") if node.get("type") == "field" else ""


def _unknown_roots(
    ctx: FlowContext, step: TransformStep, path: str, tree: Any, *, skip: set[str]
) -> list[ValidationIssue]:
    mapped = list(step.input_mapping)
    issues = []
    for over, name in dict.fromkeys(loop_variables(tree)):
        message = (
            f"transform `{step.id}` reads `{name}` inside the projection over `{over}`; "
            f"JMESPath has no loop variable: each element of `{over}` is the data there, "
            f"so read its fields directly (`{over}[].{{name: name}}`)"
        )
        issues.append(error("transform_unknown_name", path, message, step.id))
    for name in dict.fromkeys(root_names(tree)):
        if name in mapped or name in skip:
            continue
        hint = suggest(name, mapped)
        if not hint and name in ctx.step_ids:
            hint = f" (a transform reads no step directly: map `{name}.FIELD` to a name)"
        message = (
            f"transform `{step.id}` reads `{name}`, which it does not map, so it is null; "
            f"the expression sees only its mapped names: {names(mapped)}{hint}"
        )
        issues.append(error("transform_unknown_name", path, message, step.id))
    return issues


def _quoted_texts(expression: str) -> list[str]:
    """The double-quoted names an expression compares with, in order, once each."""
    try:
        tokens = list(Lexer().tokenize(expression))
    except jmespath_errors.JMESPathError:
        return []
    found: dict[str, None] = {}
    for k, token in enumerate(tokens):
        near = {t["type"] for t in tokens[max(0, k - 1) : k + 2]}
        if token["type"] == "quoted_identifier" and near & _COMPARATORS:
            found[token["value"]] = None
    return list(found)


def _quoted_issue(step: TransformStep, path: str, text: str) -> ValidationIssue:
    message = (
        f'transform `{step.id}` compares with "{text}", which JMESPath reads as a '
        f"field named {text}, not as text; write '{text}' (single quotes) for the text"
    )
    return error("transform_quoted_field", path, message, step.id)


def element_keys(expression: str, key: str) -> tuple[str, ...]:
    """The keys of each element of ``key`` in ``{key: list[].{a: …, b: …}, …}``, else ()."""
    try:
        tree = jmespath.compile(expression).parsed
    except (jmespath_errors.JMESPathError, RecursionError, TypeError, ValueError):
        return ()
    if tree.get("type") != "multi_select_dict":
        return ()
    for pair in tree["children"]:
        value = pair["children"][0] if pair["value"] == key else None
        if value is not None and value.get("type") == "projection":
            shape = value["children"][-1]
            if shape.get("type") == "multi_select_dict":
                return tuple(child["value"] for child in shape["children"])
    return ()
