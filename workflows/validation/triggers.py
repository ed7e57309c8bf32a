"""Checks of a workflow's triggers (``triggers:``): each starts a run of the workflow's
active version from an event, so what can be wrong with one is found here, before any
event comes (``docs/triggers.md``).

- ``trigger_on_itself``: an ``on_workflow`` trigger names the workflow itself (each run
  would start the next, without end);
- ``trigger_input_unknown``: a trigger sets an input the workflow does not declare;
- ``trigger_input_missing``: a trigger leaves out an input the workflow requires (no
  default), so every run it started would be refused;
- ``trigger_reference_invalid``: a ``$`` string in a trigger's inputs that is no
  ``$event`` reference (``workflows.event_refs``);
- ``trigger_workflow_unknown`` (*warning*): the workflow it waits for has no active
  version (checked when the validator is given the stored workflows; it may be made
  later).
"""

from __future__ import annotations

from workflows.event_refs import EventRefError, parse_event_value
from workflows.schema_triggers import TriggerSpec
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, names, suggest, warning


def check_triggers(ctx: FlowContext) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    for index, trigger in enumerate(ctx.spec.triggers):
        at = f"triggers[{index}]"
        waited = trigger.on_workflow.name
        if waited == ctx.spec.name:
            message = (
                f"the trigger starts `{waited}` when a run of `{waited}` finishes: each run "
                "would start the next, without end; name another workflow"
            )
            issues.append(error("trigger_on_itself", f"{at}.on_workflow.name", message))
        elif ctx.workflows is not None and ctx.workflows.get(waited) is None:
            message = (
                f"no active version of workflow `{waited}` is stored: the trigger waits for "
                "runs that nothing starts yet"
            )
            issues.append(warning("trigger_workflow_unknown", f"{at}.on_workflow.name", message))
        issues += _inputs(ctx, trigger, at)
    return issues


def _inputs(ctx: FlowContext, trigger: TriggerSpec, at: str) -> list[ValidationIssue]:
    declared = ctx.spec.inputs
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
            parse_event_value(value)
        except EventRefError as exc:
            issues.append(error("trigger_reference_invalid", where, str(exc)))
    for name, spec in declared.items():
        if spec.is_required and name not in trigger.inputs:
            message = (
                f"the trigger does not set input `{name}`, which the workflow requires: "
                f"every run it started would be refused; map it, e.g. "
                f"`{name}: $event.outputs.{name}`"
            )
            issues.append(error("trigger_input_missing", f"{at}.inputs", message))
    return issues
