"""Per-kind rules: the unsupported-kind gate, and the hook for each kind's own checks.

The gate is one table (empty today: every kind has a runtime). An entry there
reports ``kind_not_supported``; add that code back to ``ISSUE_CODES`` with a
golden file if a kind is ever gated again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tools.errors import TemplateError
from tools.llm.endpoints import LLMEndpointError, endpoint_names, llm_endpoint
from tools.templating import placeholders
from workflows.expressions import ExpressionError, compile_condition
from workflows.loops import UNTIL_NAMES, LoopReferenceError, parse_loop_reference
from workflows.schema import (
    DecisionStep,
    ForeachStep,
    LLMStep,
    LoopStep,
    ToolStep,
    TransformStep,
    WorkflowStep,
)
from workflows.schema_llm import DecisionBudget
from workflows.transform import TransformError, compile_transform
from workflows.validation.context import FlowContext
from workflows.validation.hints import (
    JMESPATH_SYNTAX,
    condition_fix,
    schema_type_fix,
    transform_fix,
)
from workflows.validation.report import ValidationIssue, error, suggest
from workflows.validation.subworkflows import check_workflow_step

# Step kinds the executor cannot run yet -> why. Remove an entry to enable the kind.
UNSUPPORTED_KINDS: dict[str, str] = {}


def check_kinds(ctx: FlowContext) -> list[ValidationIssue]:
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        reason = UNSUPPORTED_KINDS.get(step.kind)
        if reason is not None:
            message = f"step `{step.id}` is a `{step.kind}` step, which cannot run: {reason}"
            issues.append(
                error("kind_not_supported", f"{ctx.step_path(index)}.kind", message, step.id)
            )
        issues += _check_step_kind_specifics(step, index=index, ctx=ctx)
        issues += _output_cap(step, ctx.step_path(index))
    return issues


def _output_cap(step: Any, path: str) -> list[ValidationIssue]:
    """A step's own ``max_output_bytes`` may not pass the operator's maximum
    (``FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT``): a definition cannot raise it."""
    limit = int(settings.FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT)
    own = step.max_output_bytes
    if own is None or own <= limit:
        return []
    message = (
        f"step `{step.id}` sets max_output_bytes to {own}, over the operator maximum of "
        f"{limit} bytes (FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT); set at most {limit}, or "
        "ask the operator to raise the maximum"
    )
    return [error("max_output_bytes_over_limit", f"{path}.max_output_bytes", message, step.id)]


# --- kind-specific rules -------------------------------------------------------
# Conditions and JMESPath expressions are compiled here, so a typo is a validation
# error, never a run-time surprise.


def _check_step_kind_specifics(step: Any, *, index: int, ctx: FlowContext) -> list[ValidationIssue]:
    """Issues specific to one step's kind (``index`` is its position in ``steps``)."""
    return KIND_CHECKS[step.kind](step, ctx.step_path(index), ctx)


def _decision_structure(step: DecisionStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    if ctx.edge_labels(step.id):
        return []
    message = (
        f"decision `{step.id}` has no outgoing edge with `when`, so its choice changes nothing; "
        f"add edges labelled with its branches"
    )
    return [error("decision_without_edges", path, message, step.id)]


def _decision_conditions(step: DecisionStep, path: str) -> list[ValidationIssue]:
    if step.decision_prompt:
        return _prompt_template(step, "decision_prompt", path)
    if not step.conditions and not step.default:
        message = (
            f"decision `{step.id}` has neither `conditions` nor a `default` branch, so it can "
            "never choose; give each branch a condition over its mapped values"
        )
        return [error("decision_without_conditions", path, message, step.id)]
    issues = []
    names = list(step.input_mapping)
    for label, text in step.conditions.items():
        try:
            compile_condition(text, names=names)
        except ExpressionError as exc:
            message = f"decision `{step.id}`, branch `{label}`: {exc.message}"
            fix = condition_fix(text, step.input_mapping)
            if fix and fix not in message:
                message += f"; {fix}"
            issues.append(
                error("condition_invalid", f"{path}.conditions.{label}", message, step.id)
            )
    return issues


def _transform_expression(step: TransformStep, path: str) -> list[ValidationIssue]:
    try:
        compile_transform(step.expression)
    except TransformError as exc:
        message = f"transform `{step.id}`: {exc.message}"
        message += f"; {transform_fix(step.expression) or JMESPATH_SYNTAX}"
        return [error("transform_invalid", f"{path}.expression", message, step.id)]
    return []


def _foreach_structure(step: ForeachStep, path: str) -> list[ValidationIssue]:
    if "items" in step.input_mapping:
        return []
    message = (
        f"foreach `{step.id}` does not map `items`, the list it runs its tool over; map it "
        "as `input_mapping.items`"
    )
    if "items" in step.item_mapping:
        message += " (it is in `item_mapping`, which maps each item to the tool's parameters)"
    return [error("foreach_without_items", f"{path}.input_mapping", message, step.id)]


_DOLLAR_ENV = re.compile(r"(?<![\w$])\$(env\.[A-Za-z_][A-Za-z0-9_]*)")


def _env_message(step_id: str, field: str, written: str) -> str:
    return (
        f"step `{step_id}`'s {field} reads `{written}`; prompts see only the step's mapped "
        "values, never the environment (a `$env` there is sent as written): map the value "
        "from a step's output and read it as `{{name}}`; a tool reads its own credentials "
        "from its environment, and a secret never belongs in a prompt"
    )


def _prompt_template(step: Any, field: str, path: str) -> list[ValidationIssue]:
    """A prompt is a template over the step's mapped names only: never ``{{env.X}}``."""
    where = f"{path}.{field}"
    try:
        found = placeholders(getattr(step, field))
    except TemplateError as exc:
        return [error("prompt_invalid", where, f"step `{step.id}`: {exc.message}", step.id)]
    issues = [
        error("env_in_prompt", where, _env_message(step.id, field, f"${name}"), step.id)
        for name in _DOLLAR_ENV.findall(getattr(step, field))
    ]
    mapped = list(step.input_mapping)
    for ph in found:
        if ph.is_env:
            message = _env_message(step.id, field, f"{{{{{ph.raw}}}}}")
            issues.append(error("env_in_prompt", where, message, step.id))
        elif ph.path[0] not in mapped:
            names = ", ".join(f"`{n}`" for n in mapped) or "nothing"
            message = (
                f"step `{step.id}`'s {field} reads `{{{{{ph.raw}}}}}`, but the step maps "
                f"{names}{suggest(ph.path[0], mapped)}; map `{ph.path[0]}` in its input_mapping"
            )
            issues.append(error("prompt_invalid", where, message, step.id))
    return issues


def _output_schema(step: LLMStep, path: str) -> list[ValidationIssue]:
    if step.output_schema is None:
        return []
    try:
        Draft202012Validator.check_schema(step.output_schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        message = f"llm step `{step.id}`: output_schema is not a valid JSON Schema at {where}: "
        message += exc.message + schema_type_fix(exc.message)
        return [error("output_schema_invalid", f"{path}.output_schema", message, step.id)]
    return []


def _endpoint(step: LLMStep | DecisionStep, path: str) -> list[ValidationIssue]:
    """A named LLM endpoint must be configured here (``FLOWPILOT_LLM_ENDPOINTS``)."""
    if step.endpoint is None:
        return []
    known = endpoint_names()
    if step.endpoint in known:
        return []
    message = (
        f"step `{step.id}` calls LLM endpoint `{step.endpoint}`, which this installation does "
        f"not configure (known: {', '.join(known)}){suggest(step.endpoint, known)}"
    )
    return [error("endpoint_unknown", f"{path}.endpoint", message, step.id)]


def _priced(step: LLMStep | DecisionStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    """Under a budget in money (the step's or the workflow's), the model a step calls must
    have a price (``tools.llm.prices``): a budget of unknown cost cannot be kept."""
    own = step.budget.in_money()
    if not step.needs_llm() or not (own or ctx.spec.budget.in_money()):
        return []
    try:
        endpoint = llm_endpoint(step.endpoint)
    except LLMEndpointError:
        return []  # endpoint_unknown says so
    model = step.model or endpoint.model
    if endpoint.prices.price_for(model) is not None:
        return []
    whose = "its budget" if own else "the workflow's budget"
    message = (
        f"step `{step.id}` calls model `{model}` under {whose} in money, but no price is "
        f"known for `{model}`; give it one in FLOWPILOT_LLM_PRICES (US dollars per million "
        f"tokens: '{{\"{model}\": [input, output]}}')"
        + (f" or {_prices_variable(step.endpoint)}" if step.endpoint else "")
        + ", or name a priced model"
    )
    where = f"{path}.model" if step.model else (f"{path}.endpoint" if step.endpoint else path)
    return [error("llm_price_unknown", where, message, step.id)]


def _prices_variable(endpoint: str) -> str:
    return f"FLOWPILOT_LLM_{endpoint.upper().replace('-', '_')}_PRICES"


def _decision_budget(step: DecisionStep, path: str) -> list[ValidationIssue]:
    if step.decision_prompt or step.budget == DecisionBudget():
        return []
    message = (
        f"decision `{step.id}` has a `budget`, but it decides by its conditions and calls no "
        "model; a budget applies to the LLM form only (`decision_prompt`): remove it"
    )
    return [error("budget_without_llm", f"{path}.budget", message, step.id)]


def _decision(step: DecisionStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return (
        _decision_structure(step, path, ctx)
        + _decision_conditions(step, path)
        + _decision_budget(step, path)
        + _endpoint(step, path)
        + _priced(step, path, ctx)
    )


def _llm(step: LLMStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return (
        _prompt_template(step, "prompt", path)
        + _output_schema(step, path)
        + _endpoint(step, path)
        + _priced(step, path, ctx)
    )


def _foreach(step: ForeachStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return _foreach_structure(step, path)


def _transform(step: TransformStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return _transform_expression(step, path)


def _tool(step: ToolStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return []  # its tool and parameters are checked with every tool (tool_checks)


def _workflow(step: WorkflowStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    return check_workflow_step(step, path, ctx.spec.name, ctx.workflows)


def _loop(step: LoopStep, path: str, ctx: FlowContext) -> list[ValidationIssue]:
    """The workflow it runs (as a `workflow` step's), its bound, its condition and its
    iteration references."""
    issues = check_workflow_step(step, path, ctx.spec.name, ctx.workflows)
    limit = int(settings.FLOWPILOT_MAX_LOOP_ITERATIONS)
    if step.max_iterations > limit:
        message = (
            f"loop `{step.id}` sets max_iterations to {step.max_iterations}, over the operator "
            f"maximum of {limit} (FLOWPILOT_MAX_LOOP_ITERATIONS); set at most {limit}"
        )
        issues.append(
            error("loop_iterations_over_limit", f"{path}.max_iterations", message, step.id)
        )
    try:
        compile_condition(step.until, names=UNTIL_NAMES)
    except ExpressionError as exc:
        message = (
            f"loop `{step.id}`, its `until` condition: {exc.message}; it reads `output` (the "
            "iteration's outputs, e.g. `output.passed == true`) and `iteration`"
        )
        issues.append(error("condition_invalid", f"{path}.until", message, step.id))
    for name, value in step.iteration_mapping.items():
        try:
            parse_loop_reference(value)
        except LoopReferenceError as exc:
            message = f"loop `{step.id}` maps `{name}` in its iteration_mapping: {exc.message}"
            where = f"{path}.iteration_mapping.{name}"
            issues.append(error("loop_reference_invalid", where, message, step.id))
    return issues


# Every kind of the ``Step`` union -> its own checks: (step, its path, the flow) -> issues.
KIND_CHECKS: dict[str, Callable[[Any, str, FlowContext], list[ValidationIssue]]] = {
    "tool": _tool,
    "llm": _llm,
    "decision": _decision,
    "transform": _transform,
    "foreach": _foreach,
    "workflow": _workflow,
    "loop": _loop,
    # Its own rules (approvers, required, form) are the schema's: nothing more here.
    "approval": lambda step, path, ctx: [],
}
