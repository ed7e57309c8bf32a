"""Checks of a workflow's triggers (``triggers:``): each starts a run of the workflow's
active version from an event, so what can be wrong with one is found here, before any
event comes (``docs/triggers.md``).

- ``trigger_on_itself``: an ``on_workflow`` trigger names the workflow itself (each run
  would start the next, without end);
- ``trigger_input_unknown``: a trigger sets an input the workflow does not declare;
- ``trigger_input_missing``: a trigger leaves out an input the workflow requires (no
  default), so every run it started would be refused;
- ``trigger_reference_invalid``: a ``$`` string that is no reference of its place:
  ``$event`` in an ``on_workflow`` trigger's inputs, ``$item`` in a poll trigger's,
  ``$cursor`` in a poll's tool arguments (``workflows.event_refs``);
- ``trigger_workflow_unknown`` (*warning*): the workflow it waits for has no active
  version (checked when the validator is given the stored workflows; it may be made
  later);
- ``trigger_tool_unknown``, ``trigger_tool_not_http``: a poll's tool is not registered,
  or is no http tool (checked when the validator is given the tools);
- ``trigger_tool_not_allowed``: a poll's tool is missing from the workflow's ``tools``;
- ``trigger_args_invalid``: a poll's arguments leave out one its tool requires, or name
  one it does not take;
- ``trigger_cursor_undeclared``: a poll's arguments read ``$cursor`` but it declares no
  ``cursor`` (every poll would send null).
"""

from __future__ import annotations

from typing import Any

from workflows.event_refs import CURSOR, EVENT, ITEM, EventRef, EventRefError, parse_event_value
from workflows.schema_triggers import OnWorkflow, PollSpec, TriggerSpec
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, names, suggest, warning


def check_triggers(ctx: FlowContext) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for index, trigger in enumerate(ctx.spec.triggers):
        at = f"triggers[{index}]"
        if trigger.poll is not None:
            issues += _poll(ctx, trigger.poll, f"{at}.poll")
        elif trigger.on_workflow is not None:
            issues += _on_workflow(ctx, trigger.on_workflow, f"{at}.on_workflow")
        issues += _inputs(ctx, trigger, at)
    return issues


def _on_workflow(ctx: FlowContext, waits: OnWorkflow, at: str) -> list[ValidationIssue]:
    if waits.name == ctx.spec.name:
        message = (
            f"the trigger starts `{waits.name}` when a run of `{waits.name}` finishes: each "
            "run would start the next, without end; name another workflow"
        )
        return [error("trigger_on_itself", f"{at}.name", message)]
    if ctx.workflows is not None and ctx.workflows.get(waits.name) is None:
        message = (
            f"no active version of workflow `{waits.name}` is stored: the trigger waits for "
            "runs that nothing starts yet"
        )
        return [warning("trigger_workflow_unknown", f"{at}.name", message)]
    return []


def _poll(ctx: FlowContext, poll: PollSpec, at: str) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    reads_cursor = False
    for name, value in poll.args.items():
        try:
            reads_cursor |= _refers(parse_event_value(value, CURSOR))
        except EventRefError as exc:
            issues.append(error("trigger_reference_invalid", f"{at}.args.{name}", str(exc)))
    if reads_cursor and poll.cursor is None:
        message = (
            "the poll's arguments read `$cursor`, but it declares no `cursor`: every poll "
            "would send null; add `cursor: {initial: ..., next: $last.FIELD}`"
        )
        issues.append(error("trigger_cursor_undeclared", f"{at}.args", message))
    if poll.tool not in ctx.allowed_tools():
        message = (
            f"the poll calls tool `{poll.tool}`, which the workflow's `tools` do not allow; "
            f"add `{poll.tool}` to the workflow's `tools`"
        )
        issues.append(error("trigger_tool_not_allowed", f"{at}.tool", message))
    if ctx.registry is None:
        return issues
    tool = ctx.tool(poll.tool)
    if tool is None:
        message = (
            f"the poll calls tool `{poll.tool}`, which is not registered"
            f"{suggest(poll.tool, ctx.tool_names())}"
        )
        return [*issues, error("trigger_tool_unknown", f"{at}.tool", message)]
    kind = getattr(tool, "kind", "http")
    if kind != "http":
        message = (
            f"the poll calls tool `{poll.tool}`, a {kind} tool: a poll calls an http tool "
            "(an API it reads new items from)"
        )
        issues.append(error("trigger_tool_not_http", f"{at}.tool", message))
    return issues + _args(poll, tool.input_schema or {}, at)


def _refers(parsed: Any) -> bool:
    """Whether a parsed value reads the cursor anywhere."""
    if isinstance(parsed, EventRef):
        return True
    if isinstance(parsed, dict):
        return any(_refers(item) for item in parsed.values())
    if isinstance(parsed, list):
        return any(_refers(item) for item in parsed)
    return False


def _args(poll: PollSpec, schema: dict[str, Any], at: str) -> list[ValidationIssue]:
    """A poll's arguments against its tool's parameters, by the rule of a step's
    (``workflows.validation.tool_checks``: a closed schema refuses a name it lacks)."""
    properties = schema.get("properties") or {}
    issues = []
    for name in schema.get("required") or []:
        if name not in poll.args:
            message = f"the poll does not pass `{name}`, required by tool `{poll.tool}`"
            issues.append(error("trigger_args_invalid", f"{at}.args", message))
    closed = schema.get("additionalProperties") is False or (
        "properties" in schema and "additionalProperties" not in schema
    )
    for name in poll.args:
        if closed and name not in properties:
            message = (
                f"the poll passes `{name}`, which tool `{poll.tool}` does not take"
                f"{suggest(name, properties)}; it takes {names(properties)}"
            )
            issues.append(error("trigger_args_invalid", f"{at}.args.{name}", message))
    return issues


def _inputs(ctx: FlowContext, trigger: TriggerSpec, at: str) -> list[ValidationIssue]:
    declared = ctx.spec.inputs
    root = ITEM if trigger.poll is not None else EVENT
    issues: list[ValidationIssue] = []
    for name, value in trigger.inputs.items():
        where = f"{at}.inputs.{name}"
        if name not in declared:
            message = (
                f"the trigger sets input `{name}`, which the workflow does not declare"
                f"{suggest(name, declared)}; declared inputs: {names(declared)}"
            )
            issues.append(error("trigger_input_unknown", where, message))
        try:
            parse_event_value(value, root)
        except EventRefError as exc:
            issues.append(error("trigger_reference_invalid", where, str(exc)))
    example = "$item.{name}" if root == ITEM else "$event.outputs.{name}"
    for name, spec in declared.items():
        if spec.is_required and name not in trigger.inputs:
            message = (
                f"the trigger does not set input `{name}`, which the workflow requires: "
                f"every run it started would be refused; map it, e.g. "
                f"`{name}: {example.format(name=name)}`"
            )
            issues.append(error("trigger_input_missing", f"{at}.inputs", message))
    return issues
