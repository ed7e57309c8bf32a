"""Every mapping leaf resolves: declared inputs, allowed ``$env`` and ``$item``, real fields.

Whether a referenced step is an *ancestor* needs no check here: every step
reference infers an edge, so the read step is a parent unless the edge closes a
cycle, which ``structure`` reports as ``not_ancestor`` or ``cycle``.
"""

from __future__ import annotations

from workflows.graph import BadReference
from workflows.references import EnvRef, InputRef, ItemRef, Literal, StepRef
from workflows.schema import AnyStep
from workflows.validation.confusables import describe, skeleton
from workflows.validation.context import FlowContext, Leaf
from workflows.validation.literals import check_literal
from workflows.validation.report import ValidationIssue, error, names, suggest, warning


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
    if ctx.spec.concurrency is not None and ctx.spec.concurrency.key_input:
        used.add(ctx.spec.concurrency.key_input)  # it names the run's pool of slots
    return [
        warning("unused_input", f"inputs.{name}", f"input `{name}` is declared but never read")
        for name in ctx.spec.inputs
        if name not in used
    ]


def check_concurrency_key(ctx: FlowContext) -> list[ValidationIssue]:
    """A ``concurrency.key`` names a declared input: its value picks the pool of slots."""
    limit = ctx.spec.concurrency
    name = limit.key_input if limit is not None else None
    if name is None or name in ctx.spec.inputs:
        return []
    message = (
        f"concurrency key `{limit.key if limit else ''}` reads input `{name}`, which is not "
        f"declared{suggest(name, ctx.spec.inputs)}; declared inputs: {names(ctx.spec.inputs)}"
    )
    return [error("unknown_input", "concurrency.key", message)]


def _bad_reference(
    ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str
) -> list[ValidationIssue]:
    message = f"{who} maps `{leaf.value.text}`: {leaf.value.message}"
    lookalikes = describe(leaf.value.text)
    if lookalikes:
        message += f"; {lookalikes}: write `{skeleton(leaf.value.text)}` in ASCII"
    fixes = [f for f in reference_fix(ctx, skeleton(leaf.value.text)) if f"`{f}`" not in message]
    if fixes:
        message += "; write " + " or ".join(f"`{fix}`" for fix in fixes)
    return [error("invalid_reference", leaf.path, message, _id(step))]


def reference_fix(ctx: FlowContext, text: str) -> list[str]:
    """The references a malformed ``$…`` string most likely means (none when unclear)."""
    inner = text.strip()
    if inner.startswith("${") and inner.endswith("}"):
        inner = "$" + inner[2:-1].strip()
    head, _, rest = inner.partition(".")
    if head in ("$inputs", "$input", "$in") and rest:
        return [f"$input.{rest}"]
    if head == "$input":
        return [f"$input.{name}" for name in sorted(ctx.spec.inputs)[:5]]
    if head in ("$steps", "$step", "$outputs") and rest:
        step_id, _, path = rest.partition(".")
        if step_id in ctx.step_ids:
            return [f"{step_id}.{path}" if path else f"$step.{step_id}"]
    if head.removeprefix("$") in ctx.step_ids:
        return [inner.removeprefix("$")]
    if head in ("$env", "$environment", "$secrets") and rest:
        return [f"$env.{rest}"]
    return []


def _input(ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str) -> list[ValidationIssue]:
    name = leaf.value.name
    if name in ctx.spec.inputs:
        return []
    hint = suggest(name, ctx.spec.inputs)
    declared = names(ctx.spec.inputs, empty="")
    message = f"{who} reads `{leaf.value}`, but the workflow declares no input `{name}`{hint}"
    if declared:
        message += f"; its inputs are {declared}"
    message += f"; declare it under `inputs` (`{name}: {{type: string}}`)"
    if hint:
        message += " or read the declared one"
    return [error("unknown_input", leaf.path, message, _id(step))]


def _env(ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str) -> list[ValidationIssue]:
    if step is None:
        message = f"output reads `{leaf.value}`: secrets never go into run outputs"
        return [error("env_in_output", leaf.path, message)]
    if not step.needs_llm():  # its mapped values go into a prompt
        return []
    message = f"{who} maps `{leaf.value}` into an LLM prompt; `$env` is for tool configuration only"
    return [error("env_in_prompt", leaf.path, message, step.id)]


def _item(ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str) -> list[ValidationIssue]:
    if leaf.where == "item_mapping":
        return []
    message = f"{who} reads `{leaf.value}` outside a foreach `item_mapping`"
    return [error("item_outside_foreach", leaf.path, message, _id(step))]


def _step_output(
    ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str
) -> list[ValidationIssue]:
    ref: StepRef = leaf.value
    target = ctx.step(ref.step_id)
    if (step is not None and target is step) or not ref.path:
        return []  # reading itself is a self_loop (reported with the graph); `$step.X`: all
    field = ref.path[0]
    declared = ctx.output_fields(target)
    if field == "error" and (declared is None or field not in declared):
        return _error_field(ctx, leaf, step, who, target)
    if declared is None:
        return []
    if field in declared:
        return _nested_field(leaf, step, who, target)
    message = f"{who} reads `{ref}`, but {_owner(ctx, target)} outputs only {names(declared)}"
    message += _field_fix(ref, target, declared)
    return [error("unknown_output_field", leaf.path, message, _id(step))]


def _error_field(
    ctx: FlowContext, leaf: Leaf, step: AnyStep | None, who: str, target: AnyStep
) -> list[ValidationIssue]:
    if target.on_error == "continue":
        return []
    message = (
        f"{who} reads `{leaf.value}`, but step `{target.id}` has `on_error: fail`, "
        f"so a failure stops the run and `error` is never set; give `{target.id}` "
        "`on_error: continue` to read its error"
    )
    return [warning("error_ref_without_continue", leaf.path, message, _id(step))]


def _nested_field(
    leaf: Leaf, step: AnyStep | None, who: str, target: AnyStep
) -> list[ValidationIssue]:
    """A path into a field whose schema the step declares (an llm step's ``result``)."""
    ref: StepRef = leaf.value
    schema = target.output_field_schema(ref.path[0])
    if schema is None or len(ref.path) < 2:
        return []
    head = ".".join((ref.step_id, ref.path[0]))
    kind = schema.get("type")
    is_index = ref.path[1].lstrip("-").isdigit()
    if kind in ("string", "integer", "number", "boolean") or (kind == "array" and not is_index):
        article = "an" if kind in ("integer", "array") else "a"
        message = (
            f"{who} reads `{ref}`, but `{head}` is {article} {kind}, with no field "
            f"`{ref.path[1]}`: read `{head}` itself"
        )
        if kind == "array":
            message += f" or one item (`{head}.0`), or reshape it with a transform"
        if target.kind == "llm":
            message += " (or give the llm step an `output_schema` with that property)"
        return [error("unknown_output_field", leaf.path, message, _id(step))]
    properties = schema.get("properties")
    if not isinstance(properties, dict) or ref.path[1] in properties:
        return []
    message = (
        f"{who} reads `{ref}`, but {_declarer(target)} declares only "
        f"{names(properties)}{suggest(ref.path[1], properties)}"
    )
    return [error("unknown_output_field", leaf.path, message, _id(step))]


def _declarer(target: AnyStep) -> str:
    """What declares a step's nested fields: an llm step's ``output_schema``, a
    transform's ``{key: …}`` expression."""
    if target.kind == "transform":
        return f"the expression of transform step `{target.id}` (`{head_of(target)}`)"
    return f"the output_schema of step `{target.id}`"


def head_of(target: AnyStep) -> str:
    text = getattr(target, "expression", "")
    return text if len(text) <= 60 else text[:57] + "..."


def _owner(ctx: FlowContext, target: AnyStep) -> str:
    tool = target.output_tool()
    if tool is not None:
        return f"tool `{tool}` of step `{target.id}`"
    return f"{target.kind} step `{target.id}`"


def _field_fix(ref: StepRef, target: AnyStep, declared: tuple[str, ...]) -> str:
    """Did-you-mean: a declared field further down the path, a close name, or a nesting."""
    for k, part in enumerate(ref.path[1:], start=1):
        if part in declared:
            return f"; write `{'.'.join((ref.step_id, *ref.path[k:]))}`"
    for name in declared:
        schema = target.output_field_schema(name) or {}
        properties = schema.get("properties")
        if isinstance(properties, dict) and ref.path[0] in properties:
            return f"; write `{'.'.join((ref.step_id, name, *ref.path))}`"
    hint = suggest(ref.path[0], declared)
    prefixed = [f for f in declared if ref.path[0].startswith(f) or f.startswith(ref.path[0])]
    if not hint and prefixed:
        hint = f" (did you mean `{prefixed[0]}`?)"
    if target.kind == "foreach" and not hint:
        hint = f"; `{ref.step_id}.items` is the list of its tool's results, in input order"
    return hint


def _id(step: AnyStep | None) -> str | None:
    return None if step is None else step.id


_LEAF_CHECKS = {
    BadReference: _bad_reference,
    InputRef: _input,
    EnvRef: _env,
    ItemRef: _item,
    StepRef: _step_output,
    Literal: check_literal,
}  # QuotedLiteral ({"$literal": x}) is deliberate text: nothing to check.
