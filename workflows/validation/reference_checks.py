"""Every mapping leaf resolves: declared inputs, allowed ``$env`` and ``$item``, real fields.

Whether a referenced step is an *ancestor* needs no check here: every step
reference infers an edge, so the read step is a parent unless the edge closes a
cycle, which ``structure`` reports as ``not_ancestor`` or ``cycle``.
"""

from __future__ import annotations

from workflows.graph import BadReference
from workflows.references import EnvRef, InputRef, ItemRef, Literal, StepRef, looks_like_reference
from workflows.validation.context import FlowContext, Leaf
from workflows.validation.report import ValidationIssue, error, suggest, warning


def check_references(ctx: FlowContext) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for leaf in ctx.leaves():
        step = None if leaf.step_index is None else ctx.spec.steps[leaf.step_index]
        who = "the workflow outputs" if step is None else f"step `{step.id}`"
        check = _LEAF_CHECKS.get(type(leaf.value))
        if check is not None:
            issues.extend(check(ctx, leaf, step, who))
    return issues


def check_unused_inputs(ctx: FlowContext) -> list[ValidationIssue]:
    used = {leaf.value.name for leaf in ctx.leaves() if isinstance(leaf.value, InputRef)}
    return [
        warning("unused_input", f"inputs.{name}", f"input `{name}` is declared but never read")
        for name in ctx.spec.inputs
        if name not in used
    ]


def _bad_reference(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    message = f"{who} maps `{leaf.value.text}`: {leaf.value.message}"
    return [error("invalid_reference", leaf.path, message, _id(step))]


def _input(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    name = leaf.value.name
    if name in ctx.spec.inputs:
        return []
    hint = suggest(name, ctx.spec.inputs)
    message = f"{who} reads `{leaf.value}`, but the workflow declares no input `{name}`{hint}"
    return [error("unknown_input", leaf.path, message, _id(step))]


def _env(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    if step is None:
        message = f"output reads `{leaf.value}`: secrets never go into run outputs"
        return [error("env_in_output", leaf.path, message)]
    if not step.needs_llm():  # its mapped values go into a prompt
        return []
    message = f"{who} maps `{leaf.value}` into an LLM prompt; `$env` is for tool configuration only"
    return [error("env_in_prompt", leaf.path, message, step.id)]


def _item(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    if leaf.where == "item_mapping":
        return []
    message = f"{who} reads `{leaf.value}` outside a foreach `item_mapping`"
    return [error("item_outside_foreach", leaf.path, message, _id(step))]


def _step_output(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    ref: StepRef = leaf.value
    target = ctx.step(ref.step_id)
    if step is not None and target is step:
        return []  # reading itself: a self_loop, reported with the graph
    field = ref.path[0]
    output_tool = target.output_tool()
    tool = ctx.tool(output_tool) if output_tool else None
    declared = list(tool.outputs) if tool is not None else []
    if field in declared:
        return []
    if field == "error":
        if target.on_error == "continue":
            return []
        message = (
            f"{who} reads `{ref}`, but step `{target.id}` has `on_error: fail`, "
            "so a failure stops the run and `error` is never set"
        )
        return [warning("error_ref_without_continue", leaf.path, message, _id(step))]
    if not declared:
        return []
    hint = suggest(field, declared)
    message = (
        f"{who} reads `{ref}`, but tool `{tool.name}` of step `{target.id}` outputs only "
        f"{', '.join(f'`{f}`' for f in declared)}{hint}"
    )
    return [error("unknown_output_field", leaf.path, message, _id(step))]


def _literal(ctx, leaf: Leaf, step, who: str) -> list[ValidationIssue]:
    value = leaf.value.value
    if step is None:
        return _output_literal(ctx, leaf, value)
    shape = looks_like_reference(value)
    if shape is None:
        return []
    hint = suggest(shape[0], ctx.step_ids)
    if not hint:  # `digest.html`, `api.example.com`: plain text, not a mistyped step id
        return []
    message = (
        f"{who} maps the literal `{value}`, which looks like a reference but `{shape[0]}` "
        f'is not a step{hint}; write {{"$literal": ...}} if it is meant as text'
    )
    return [warning("literal_looks_like_reference", leaf.path, message, step.id)]


def _output_literal(ctx: FlowContext, leaf: Leaf, value) -> list[ValidationIssue]:
    """Outputs read steps or inputs; a string there that is no reference is a mistake."""
    if not isinstance(value, str):
        return []
    name = leaf.path.removeprefix("outputs.")
    shape = looks_like_reference(value)
    if shape is not None:
        hint = suggest(shape[0], ctx.step_ids)
        message = f"output `{name}` reads `{value}`, but `{shape[0]}` is not a step{hint}"
    elif value in ctx.step_ids:
        message = f"output `{name}` names step `{value}` without a field: write `{value}.FIELD`"
    else:
        message = (
            f"output `{name}` is the text `{value}`, not a reference "
            '(write {"$literal": ...} for a constant)'
        )
    return [error("unknown_output_reference", leaf.path, message)]


def _id(step) -> str | None:
    return None if step is None else step.id


_LEAF_CHECKS = {
    BadReference: _bad_reference,
    InputRef: _input,
    EnvRef: _env,
    ItemRef: _item,
    StepRef: _step_output,
    Literal: _literal,
}  # QuotedLiteral ({"$literal": x}) is deliberate text: nothing to check.
