"""Tools exist and are allowed; mapped parameters fit each tool's input schema.

``unknown_param`` policy: a mapped parameter missing from ``properties`` is
flagged when ``additionalProperties`` is ``false``, or when ``properties`` is
declared and ``additionalProperties`` is not given at all. JSON Schema would
accept the extra key in the second case, but a misspelled parameter is the far
likelier mistake in a planned flow; a tool that takes free-form parameters says
so with ``additionalProperties: true`` (or a schema), or declares no properties.

``param_type_mismatch``: the literal parts of a mapped value, and the declared
types of whole run inputs, against the property's schema
(``workflows.validation.types``); a step output mapped there is compared by its
declared type, when it has one (``workflows.validation.edge_types``).
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from workflows.schema import ForeachStep, LLMStep
from workflows.validation.confusables import describe, skeleton
from workflows.validation.context import FlowContext, ToolSpecLike
from workflows.validation.report import (
    ValidationIssue,
    error,
    format_path,
    names,
    suggest,
    warning,
)
from workflows.validation.types import value_issues


def check_tools(ctx: FlowContext) -> list[ValidationIssue]:
    if ctx.registry is None:
        return []
    allowed = ctx.allowed_tools()
    validators: dict[tuple[str, str], Any] = {}
    issues = _allowlist_lookalikes(ctx) + _allowlist_unregistered(ctx)
    for index, step in enumerate(ctx.spec.steps):
        for path, name in _named_tools(index, step):
            issues += _check_tool_name(ctx, step, path, name, allowed)
        if isinstance(step, LLMStep):
            issues += _prompt_tools(ctx, index, step)
        for name in step.direct_tools():
            tool = ctx.tool(name)
            if tool is not None:
                issues += _check_params(ctx, index, step, tool, validators)
    return issues


def _allowlist_lookalikes(ctx: FlowContext) -> list[ValidationIssue]:
    issues = []
    for index, name in enumerate(ctx.spec.tools or ()):
        if describe(name):
            message = (
                f"the allowlist names `{name}`: {describe(name)}; write `{skeleton(name)}` in ASCII"
            )
            issues.append(error("confusable_character", f"tools[{index}]", message))
    return issues


def _allowlist_unregistered(ctx: FlowContext) -> list[ValidationIssue]:
    """An allowlist entry no tool answers to: a typo, or a tool never loaded. Steps that
    use it draw their own ``unknown_tool``; the entry is reported where it is written."""
    used = {name for step in ctx.spec.steps for name in _step_tools(step)}
    used |= {t.poll.tool for t in ctx.spec.triggers if t.poll is not None}  # triggers.py says
    issues = []
    for index, name in enumerate(ctx.spec.tools or ()):
        if ctx.tool(name) is not None or describe(name) or name in used:
            continue
        message = (
            f"the allowlist names `{name}`, which is not registered"
            f"{suggest(name, ctx.tool_names())}; fix the name, load its definition "
            "(`loadtools DIR`, or `--tools DIR`), or drop it from `tools`"
        )
        issues.append(error("unknown_tool", f"tools[{index}]", message))
    return issues


def _prompt_tools(ctx: FlowContext, index: int, step: LLMStep) -> list[ValidationIssue]:
    """A prompt that tells the model to call a tool the step does not offer: the model
    cannot call it (it is offered only ``tools``), so it would answer without it."""
    issues = []
    offered = set(step.model_tools())
    known = sorted({*ctx.tool_names(), *(ctx.spec.tools or ())} - offered)
    for field in ("prompt", "system"):
        text = getattr(step, field)
        named = [name for name in known if _tells_to_call(text, name)]
        for name in named:
            message = (
                f"llm step `{step.id}`'s {field} tells the model to use tool `{name}`, but the "
                f"step offers {names(offered, empty='no tools')}; add it to the step's `tools` "
                "(and the workflow's allowlist), or take it out of the prompt"
            )
            issues.append(
                error("prompt_tool_not_offered", f"steps[{index}].{field}", message, step.id)
            )
    return issues


def _tells_to_call(text: str, name: str) -> bool:
    """``call the weather_current tool``, ``use `weather_current```, ``the X tool``: a
    name as an instruction, not a word of the text (``Aggregate what you know``)."""
    tool = re.escape(name)
    pattern = (
        rf"`{tool}`|\b(?:call|use|using|invoke|run|with)\s+(?:the\s+)?(?:tool\s+)?{tool}\b"
        rf"|\b{tool}\s+tool\b"
    )
    return re.search(pattern, text, re.IGNORECASE) is not None


def _step_tools(step: Any) -> list[str]:
    return [*step.direct_tools(), *step.model_tools()]


def _named_tools(index: int, step: Any) -> list[tuple[str, str]]:
    direct = [(f"steps[{index}].tool", name) for name in step.direct_tools()]
    offered = [(f"steps[{index}].tools[{k}]", name) for k, name in enumerate(step.model_tools())]
    return direct + offered


def _deprecated(ctx: FlowContext, step: Any, path: str, name: str) -> list[ValidationIssue]:
    """A warning per use of a deprecated tool, naming its replacement when it has one."""
    tool = ctx.tool(name)
    if tool is None or not getattr(tool, "deprecated", False):
        return []
    replacement = getattr(tool, "replacement", None)
    fix = f"; use `{replacement}` instead" if replacement else "; it has no replacement"
    message = f"step `{step.id}` uses tool `{name}`, which is deprecated{fix}"
    return [warning("tool_deprecated", path, message, step.id)]


def _check_tool_name(
    ctx: FlowContext, step: Any, path: str, name: str, allowed: frozenset[str]
) -> list[ValidationIssue]:
    issues = _deprecated(ctx, step, path, name)
    if ctx.tool(name) is None:
        message = f"step `{step.id}` uses tool `{name}`, which is not registered"
        registered = ctx.tool_names()
        hint = suggest(skeleton(name), registered)
        if describe(name):
            hint += f"; {describe(name)}: write `{skeleton(name)}` in ASCII"
        if registered:
            hint += f"; the registered tools are {names(registered)}"
        else:
            hint += " (load its definition with `loadtools DIR`, or `--tools DIR`)"
        issues.append(error("unknown_tool", path, message + hint, step.id))
    if name not in allowed:
        message = (
            f"step `{step.id}` uses tool `{name}`, which the workflow's `tools` do not allow; "
            f"add `{name}` to the workflow's `tools`"
        )
        issues.append(error("tool_not_allowed", path, message, step.id))
    return issues


def _mapped_params(index: int, step: Any, parsed: dict[str, dict]) -> dict[str, tuple]:
    """Tool parameter → (path, parsed value). A foreach's ``items`` is not a parameter."""
    mapped = {}
    for field_name, mapping in parsed.items():
        for param, value in mapping.items():
            if "item_mapping" in parsed and (field_name, param) == ("input_mapping", "items"):
                continue
            mapped[param] = (format_path((param,), f"steps[{index}].{field_name}"), value)
    return mapped


def _check_params(
    ctx: FlowContext, index: int, step: Any, tool: ToolSpecLike, validators: dict
) -> list[ValidationIssue]:
    schema = tool.input_schema or {}
    properties = schema.get("properties") or {}
    mapped = _mapped_params(index, step, ctx.parsed[index])
    issues = []
    for name in schema.get("required") or []:
        if name not in mapped:
            message = f"step `{step.id}` does not map `{name}`, required by tool `{tool.name}`"
            if isinstance(step, ForeachStep):
                message += (
                    f"; a foreach maps each item to the tool's parameters: write "
                    f"`item_mapping: {{{name}: $item}}` (or `$item.FIELD` for a field of it)"
                )
            else:
                message += f"; map it in `input_mapping` (`{name}: ...`)"
            issues.append(
                error("missing_required_param", f"steps[{index}].input_mapping", message, step.id)
            )
    closed = schema.get("additionalProperties") is False or (
        "properties" in schema and "additionalProperties" not in schema
    )
    for name, (path, value) in mapped.items():
        if name not in properties:
            if closed:
                hint = suggest(name, properties)
                hint += f"; it takes {names(properties)}"
                message = f"step `{step.id}` maps `{name}`, which tool `{tool.name}` does not take"
                issues.append(error("unknown_param", path, message + hint, step.id))
            continue
        validator = _validator(validators, tool, name, schema)
        issues += value_issues(ctx, step, tool.name, path, value, validator)
    return issues


def _validator(cache: dict, tool: ToolSpecLike, name: str, schema: dict) -> Any:
    """A jsonschema validator for one property (root ``$defs`` kept for ``$ref``), cached."""
    key = (tool.name, name)
    if key not in cache:
        prop = schema["properties"][name]
        if not isinstance(prop, dict):
            cache[key] = None  # `true` / `false` property schemas: nothing typed to check
            return None
        prop = dict(prop)
        for defs in ("$defs", "definitions"):
            if defs in schema and defs not in prop:
                prop[defs] = schema[defs]
        cls = validator_for(schema, default=Draft202012Validator)
        try:
            cls.check_schema(prop)
            cache[key] = cls(prop)
        except SchemaError:
            cache[key] = None  # a broken tool schema is the tool loader's problem
    return cache[key]
