"""Plain strings that were meant as references: the mistakes that would pass silently.

A mapping value that is not a reference is posted as written. These checks catch the
strings a planner writes when it means a reference: a dotted string whose head is a
mistyped step id (``wether.temperature``) or no step at all but clearly meant as one
(a tool name, or a field another step outputs), ``{{...}}`` templates (mappings are
never templated), a reference inside longer text (``Issue #$input.n``),
``input.city`` without its ``$``, a bare step id (``payload: weather``), and a bracket
index (``releases[0]``). Text meant as such is written ``{"$literal": "..."}`` and
never checked.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from workflows.references import StepRef, looks_like_reference
from workflows.schema import AnyStep, LLMStep, TransformStep
from workflows.validation.confusables import describe, skeleton
from workflows.validation.context import FlowContext, Leaf
from workflows.validation.jmespath_checks import element_keys
from workflows.validation.report import ValidationIssue, error, names, suggest

_TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_BRACKETS = re.compile(r"^([a-z][a-z0-9_]*)((?:\.[A-Za-z0-9_-]+|\[-?[0-9]+\])+)$")
_QUOTE_IT = 'write {"$literal": "..."} if it is meant as text'
# A reference written inside longer text (``Issue #$input.n``): only a whole value is one.
_EMBEDDED = re.compile(
    r"(?<![\w$])\$(?:(?:input|env|step)\.[A-Za-z_][A-Za-z0-9_.-]*|item(?:\.[A-Za-z0-9_.-]+)?|index)"
)


def check_literal(
    ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str
) -> list[ValidationIssue]:
    """Issues of one literal leaf of a step mapping (``step`` is ``None`` for outputs)."""
    value = leaf.value.value
    if step is None:
        return _output_literal(ctx, leaf, value)
    if not isinstance(value, str):
        return []
    for check in (_lookalike, _template, _embedded, _bare_step, _bracket_index, _dotted):
        issue = check(ctx, leaf, value, step, who)
        if issue is not None:
            return [issue]
    return []


def _lookalike(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    """A value that is a reference once its look-alike characters are read as ASCII."""
    plain = skeleton(value)
    if plain == value or not _reference_shaped(ctx, plain):
        return None
    message = (
        f"{who} maps `{value}`, which is plain text, not a reference: {describe(value)}; "
        f"write `{plain}` in ASCII"
    )
    return error("confusable_character", leaf.path, message, step.id)


def _reference_shaped(ctx: FlowContext, text: str) -> bool:
    if text.startswith("$") or text in ctx.step_ids:
        return True
    shape = looks_like_reference(text)
    return shape is not None and (shape[0] in ctx.step_ids or shape[0] in ("input", "env"))


def _template(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    found = _TEMPLATE.findall(value)
    if not found:
        return None
    whole = _TEMPLATE.fullmatch(value.strip())
    fix = _template_fix(ctx, found[0]) if whole else None
    if fix:
        advice = f"write `{fix}`"
    else:
        advice = (
            "build the text in a `transform` step (e.g. `join('', [...])` over mapped "
            "values) or an llm step's prompt, and map its output here"
        )
    message = (
        f"{who} maps `{value}`: mapping values are not templates, so `{{{{...}}}}` would "
        f"be sent verbatim; {advice}"
    )
    return error("template_in_mapping", leaf.path, message, step.id)


def _embedded(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    """``"Issue #$input.n"``: a reference is a whole mapping value, never part of one,
    so the text would reach the tool with ``$input.n`` in it."""
    found = _EMBEDDED.search(value)
    if found is None:
        return None
    ref = found.group(0).rstrip(".-")
    message = (
        f"{who} maps `{value}`, which holds `{ref}` inside longer text: only a whole "
        f"value is a reference, so this would be sent as written; map `{ref}` alone, or "
        "build the text in a `transform` step (e.g. `join('', ['Issue #', to_string(n)])` "
        "over mapped values) or an llm step's prompt template (`{{n}}`) and map its "
        "output here"
    )
    return error("reference_in_text", leaf.path, message, step.id)


def _template_fix(ctx: FlowContext, inner: str) -> str | None:
    head, _, rest = inner.partition(".")
    if head in ("input", "inputs") and rest:
        return f"$input.{rest}"
    if head == "env" and rest:
        return f"$env.{rest}"
    if head in ("item", "index"):
        return f"${inner}"
    if head in ctx.step_ids:
        return inner if rest else f"$step.{inner}"
    if inner in ctx.spec.inputs:
        return f"$input.{inner}"
    return None


def _bare_step(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    if value not in ctx.step_ids or value == step.id:
        return None  # its own id is text: no step reads its own output
    fields = ctx.output_fields(ctx.step(value)) or ()
    reads = names(f"{value}.{f}" for f in fields if f not in ("usage", "conversation"))
    message = (
        f"{who} maps the text `{value}`, which is the id of a step, not a reference to it; "
        f"read a field ({reads if fields else f'`{value}.FIELD`'}), or `$step.{value}` "
        f'for its whole output ({{"$literal": "{value}"}} for the text)'
    )
    return error("step_reference_without_field", leaf.path, message, step.id)


def _bracket_index(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    match = _BRACKETS.fullmatch(value)
    if match is None or "[" not in value or match.group(1) not in ctx.step_ids:
        return None
    dotted = re.sub(r"\[(-?[0-9]+)\]", r".\1", value)
    message = (
        f"{who} maps `{value}`: references index lists with a dot, not brackets; write `{dotted}`"
    )
    return error("invalid_reference", leaf.path, message, step.id)


def _dotted(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue | None:
    shape = looks_like_reference(value)
    if shape is None:
        return None
    head, path = shape
    if head in ("input", "inputs") and path[0] in ctx.spec.inputs:  # not `inputs.json`
        fix = ".".join(("$input", *path))
        message = f"{who} maps the text `{value}`; a run input is read as `{fix}` (with `$`)"
        return error("input_without_dollar", leaf.path, message, step.id)
    hint = suggest(head, ctx.step_ids)
    if hint:
        message = (
            f"{who} maps the text `{value}`, which looks like a reference but `{head}` "
            f"is not a step{hint}; {_QUOTE_IT}"
        )
        return error("unknown_step_reference", leaf.path, message, step.id)
    if leaf.where == "item_mapping":
        return _item_field(ctx, leaf, value, step, who)
    owners = _steps_with_field(ctx, path[0])
    named = head in ctx.tool_names() or suggest(head, ctx.tool_names())
    if not owners and not named and not _llm_reference(step, value):
        return None  # `digest.html`, `api.example.com`: text, not a mistaken reference
    message = (
        f"{who} maps the text `{value}`, which reads like a step reference, but `{head}` "
        f"is not a step (the steps: {names(ctx.step_ids)})"
    )
    if owners:
        message += "; " + " or ".join(f"`{o}.{'.'.join(path)}`" for o in owners) + " outputs it"
    return error("unknown_step_reference", leaf.path, message + f"; {_QUOTE_IT}", step.id)


_IDENTIFIERS = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)+")


def _llm_reference(step: AnyStep, value: str) -> bool:
    """In an llm step a dotted name (``forecast.temperature``) is meant as a reference:
    its values feed the prompt, where a step's field is what a planner maps."""
    return isinstance(step, LLMStep) and _IDENTIFIERS.fullmatch(value) is not None


def _item_field(
    ctx: FlowContext, leaf: Leaf, value: str, step: AnyStep, who: str
) -> ValidationIssue:
    """A dotted text in an item mapping: meant as a field of each item (``$item.FIELD``)."""
    field = value.rsplit(".", 1)[-1]
    keys = _item_keys(ctx, leaf.step_index)
    close = [k for k in keys if field.startswith(k) or k.startswith(field)]
    close = close or difflib.get_close_matches(field, keys, n=1, cutoff=0.5)
    fix = f"`$item.{close[0]}`" if close else f"`$item.{field}`"
    known = f" (each item has {names(keys)})" if keys else ""
    message = (
        f"{who} maps the text `{value}` in its item_mapping, but `{value.split('.')[0]}` is "
        f"not a step; a field of each item is read as {fix}{known}"
    )
    return error("unknown_step_reference", leaf.path, message, step.id)


def _item_keys(ctx: FlowContext, index: int | None) -> tuple[str, ...]:
    """The fields of a foreach's items, when a transform upstream shapes them."""
    items = ctx.parsed[index].get("input_mapping", {}).get("items") if index is not None else None
    if not isinstance(items, StepRef) or len(items.path) != 1:
        return ()
    source = ctx.step(items.step_id)
    if not isinstance(source, TransformStep):
        return ()
    return element_keys(source.expression, items.path[0])


def _steps_with_field(ctx: FlowContext, field: str) -> list[str]:
    owners = []
    for step_id, index in ctx.first_index.items():
        fields = ctx.output_fields(ctx.spec.steps[index])
        if fields is not None and field in fields:
            owners.append(step_id)
    return sorted(owners)


def _output_literal(ctx: FlowContext, leaf: Leaf, value: Any) -> list[ValidationIssue]:
    """Outputs read steps or inputs; a string there that is no reference is a mistake."""
    if not isinstance(value, str):
        return []
    name = leaf.path.removeprefix("outputs.")
    shape = looks_like_reference(value)
    steps = names(ctx.step_ids)
    if shape is not None and shape[0] in ("input", "inputs") and shape[1][0] in ctx.spec.inputs:
        fix = ".".join(("$input", *shape[1]))
        message = f"output `{name}` is the text `{value}`; a run input is read as `{fix}`"
    elif shape is not None:
        hint = suggest(shape[0], ctx.step_ids)
        owners = _steps_with_field(ctx, shape[1][0])
        if owners and not hint:
            hint = " (" + " or ".join(f"`{o}.{'.'.join(shape[1])}`" for o in owners) + "?)"
        message = f"output `{name}` reads `{value}`, but `{shape[0]}` is not a step{hint}"
        message += f" (the steps: {steps})"
    elif value in ctx.step_ids:
        message = (
            f"output `{name}` names step `{value}` without a field: write `{value}.FIELD`, "
            f"or `$step.{value}` for its whole output"
        )
    else:
        message = (
            f"output `{name}` is the text `{value}`, not a reference "
            f'(read `STEP_ID.FIELD` of {steps}, or write {{"$literal": ...}} for a constant)'
        )
    return [error("unknown_output_reference", leaf.path, message)]
