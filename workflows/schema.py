"""The workflow format: one contract for files, the database, the validator and the executor.

Pydantic models; step kinds form a discriminated union on ``kind``. A pydantic
error's ``loc`` is the JSON path of the offending element, which the validator
reports as-is. ``workflow_json_schema()`` publishes the format (docs/).

Only structural rules live here (types, required fields, slugs, ranges);
cross-element rules (references, edges, cycles, tools) are the validator's.

What a step kind *is* lives on its class: whether it needs an LLM, how it retries,
its per-try time limit, how its branch is read from its output, which tools it
calls, which mappings it has. The engine and the validator ask the step, never
its ``kind``. Every list of kinds (the engine's ``KINDS``, the planner's prompt, the
validator's schema messages, the admin's legend) is derived from the ``Step`` union by
``step_kind_names()``. Adding a kind: its class here (in the union, with its
``planner_hint``), its checks in ``workflows.validation.kinds``, and its module in
``runs.engine.kinds`` (docs/architecture.md, "How to add a step kind").
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal, get_args

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.policy import RetryPolicy
from tools.queues import check_queue_name
from workflows.schema_concurrency import Concurrency
from workflows.schema_llm import DecisionBudget, LLMBudget, LLMSettings, MoneyBudget
from workflows.schema_triggers import Channels, Notifications, ScheduleSpec, TriggerSpec
from workflows.transform import multiselect_keys, output_field_schemas

STEP_ID_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
INPUT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
WORKFLOW_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,99}$"

InputType = Literal["string", "integer", "number", "boolean", "object", "array"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class InputSpec(_Model):
    """A declared run input."""

    type: InputType = "string"
    description: str = ""
    default: Any = None
    required: bool | None = Field(
        None, description="Defaults to true when there is no default, false otherwise."
    )
    enum: list[Any] | None = None

    @property
    def is_required(self) -> bool:
        if self.required is not None:
            return self.required
        return "default" not in self.model_fields_set


class _StepBase(_Model):
    id: str = Field(pattern=STEP_ID_PATTERN, description="Unique slug of the step.")
    name: str = Field("", description="Human label for pictures and logs.")
    description: str = ""
    input_mapping: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameter name -> reference ($input.X, STEP.path, $env.NAME) or literal.",
    )
    retry: RetryPolicy | None = Field(
        None, description="Omitted: the tool's own policy, else a single try."
    )
    timeout: float | None = Field(None, gt=0, le=86400, description="Seconds for one attempt.")
    on_error: Literal["fail", "continue"] = "fail"
    max_output_bytes: int | None = Field(
        None,
        gt=0,
        description="Cap in bytes (as JSON) of what the step builds: its output, arguments, "
        "response, rendered templates; omitted: FLOWPILOT_MAX_STEP_OUTPUT_BYTES. At most "
        "FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT.",
    )

    # Retried item by item inside the step (the step itself is tried once).
    retries_per_item: ClassVar[bool] = False
    # Chooses one of its outgoing ``when`` edges; its output holds the label as ``branch``.
    picks_branch: ClassVar[bool] = False
    # What the planner's prompt says of the kind: one example step as JSON, then its rules
    # and its outputs. Every kind sets it (a test checks the prompt shows every kind).
    planner_hint: ClassVar[str] = ""
    # Offered to the planner only beside approved templates (a step that runs one of them).
    planner_needs_templates: ClassVar[bool] = False

    def needs_llm(self) -> bool:
        """Whether running it needs the run's LLM client."""
        return False

    def llm_endpoint(self) -> str | None:
        """The named LLM endpoint it calls (``None``: the default one, or none)."""
        return None

    def step_time_limit(self) -> float | None:
        """The limit of one try of the whole step (seconds), None for none."""
        return self.timeout

    def branch_of(self, output: Any) -> str | None:
        """The branch label a finished step chose, read from its output."""
        if self.picks_branch and isinstance(output, dict):
            return output.get("branch")
        return None

    def direct_tools(self) -> tuple[str, ...]:
        """The tools its definition calls by name."""
        return ()

    def model_tools(self) -> tuple[str, ...]:
        """The tools it lets a model call (its own allowlist)."""
        return ()

    def output_tool(self) -> str | None:
        """The tool whose declared outputs are its output's fields; None when its output
        has its kind's own shape."""
        return None

    def output_fields(self) -> tuple[str, ...] | None:
        """The top-level fields of its output when its kind fixes them (``None``: the
        tool's declared outputs decide, or the shape is known only at run time)."""
        return None

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        """A JSON Schema of one output field when the step declares it (else ``None``)."""
        return None

    def mappings(self) -> dict[str, dict[str, Any]]:
        """Its raw mappings by field name (references are read from these)."""
        return {"input_mapping": self.input_mapping}

    def called_workflow(self) -> str | None:
        """The name of the workflow it runs as a child run (``None``: it runs none)."""
        return None

    @model_validator(mode="after")
    def _kind_is_written(self) -> _StepBase:
        # ``kind`` picks the model when the step is read back: written even when a step
        # built in Python left it at its default, so ``to_data()`` reads back the same.
        self.__pydantic_fields_set__.add("kind")
        return self

    @field_validator("input_mapping")
    @classmethod
    def _param_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if not key or len(key) > 128:
                raise ValueError(f"parameter name {key!r} must be 1 to 128 characters")
            if key.startswith("$"):
                raise ValueError(f"parameter name {key!r} may not start with `$`")
        return value


class ToolStep(_StepBase):
    """Calls one tool with its mapped inputs."""

    kind: Literal["tool"] = "tool"
    tool: str = Field(pattern=TOOL_NAME_PATTERN)

    planner_hint: ClassVar[str] = (
        '{"id": "geo", "kind": "tool", "tool": "TOOL", "input_mapping": {...}}. Map every '
        "required parameter of the tool's input schema, and no parameter it does not take; "
        'it outputs the fields the tool lists in "outputs".'
    )

    def direct_tools(self) -> tuple[str, ...]:
        return (self.tool,)

    def output_tool(self) -> str | None:
        return self.tool


class LLMStep(LLMSettings, _StepBase):
    """A prompt over mapped values; may call only the tools in its own allowlist."""

    kind: Literal["llm"] = "llm"
    prompt: str = Field(min_length=1)
    system: str = ""
    tools: list[str] = Field(default_factory=list)
    max_turns: int = Field(5, ge=1, le=50)
    output_schema: dict[str, Any] | None = None
    budget: LLMBudget = Field(default_factory=LLMBudget)
    context_budget_chars: int | None = Field(
        None,
        ge=2_000,
        le=10_000_000,
        description="Characters of conversation sent per model call; older tool results are "
        "truncated, then dropped, to fit. Omitted: FLOWPILOT_LLM_CONTEXT_BUDGET_CHARS.",
    )

    planner_hint: ClassVar[str] = (
        '{"id": "summary", "kind": "llm", "prompt": "Summarize: {{text}}", "input_mapping": '
        '{"text": "fetch.body"}}: only for work that needs language understanding; the '
        "prompt sees only the names it maps, as {{name}} placeholders. Optional: "
        '"tools" (the tools it may call), "output_schema", "budget". It outputs "result".'
    )

    def needs_llm(self) -> bool:
        return True

    def model_tools(self) -> tuple[str, ...]:
        return tuple(self.tools)

    def output_fields(self) -> tuple[str, ...] | None:
        # ``result``: the answer (text, or the object ``output_schema`` describes).
        return ("result", "conversation", "usage")

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        if field != "result":
            return None
        return self.output_schema if self.output_schema is not None else {"type": "string"}


class DecisionStep(LLMSettings, _StepBase):
    """Picks one outgoing branch: a safe expression per branch, or an LLM choice."""

    kind: Literal["decision"] = "decision"
    branches: list[str] = Field(min_length=1, description="Branch labels, matched by edge `when`.")
    conditions: dict[str, str] = Field(
        default_factory=dict,
        description="Branch label -> expression over mapped values; first true wins, in "
        "`branches` order.",
    )
    default: str | None = Field(None, description="Branch taken when no condition holds.")
    decision_prompt: str | None = Field(None, description="LLM form: the question to answer.")
    budget: DecisionBudget = Field(
        default_factory=DecisionBudget,
        description="LLM form: tokens of its one model call, and money (docs/observability.md).",
    )

    picks_branch: ClassVar[bool] = True
    planner_hint: ClassVar[str] = (
        '{"id": "hot", "kind": "decision", "branches": ["yes", "no"], "conditions": {"yes": '
        '"temp > 25"}, "default": "no", "input_mapping": {"temp": "weather.temperature"}}, '
        'plus one edge with "when" per branch. Conditions compare mapped names (== != < <= > '
        '>= in, and/or/not, len(), exists()); no arithmetic. It outputs "branch".'
    )

    def needs_llm(self) -> bool:
        return bool(self.decision_prompt)

    def output_fields(self) -> tuple[str, ...] | None:
        # The chosen label, and why: the condition that held, or the model's reason.
        if self.decision_prompt:
            return ("branch", "reason", "usage")
        return ("branch", "condition")

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        return {"type": "string", "enum": list(self.branches)} if field == "branch" else None


class TransformStep(_StepBase):
    """Pure data reshaping with a JMESPath expression over the mapped values."""

    kind: Literal["transform"] = "transform"
    expression: str = Field(min_length=1)

    planner_hint: ClassVar[str] = (
        '{"id": "shape", "kind": "transform", "expression": "JMESPath over the mapped names", '
        '"input_mapping": {"rows": "read.rows"}}: pure reshaping. It outputs the keys of its '
        "{key: …} expression."
    )

    def output_fields(self) -> tuple[str, ...] | None:
        """The keys of a top-level ``{key: expr, …}`` expression; otherwise unknown."""
        return multiselect_keys(self.expression)

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        """What the expression alone says of a key (``length(…)``: an integer); ``None``
        when the data decides (``rows[0].name``) or the expression is no ``{…}`` hash."""
        found = (output_field_schemas(self.expression) or {}).get(field)
        return found or None


class ForeachStep(_StepBase):
    """Runs one tool per item of the mapped list ``items``; results keep input order."""

    kind: Literal["foreach"] = "foreach"
    tool: str = Field(pattern=TOOL_NAME_PATTERN)
    item_mapping: dict[str, Any] = Field(
        default_factory=dict,
        description="Tool parameter -> `$item`, `$item.path`, `$index`, or a mapped parameter.",
    )
    concurrency: int = Field(
        4, ge=1, le=100, description="Items in flight at once (the older name of max_parallel)."
    )
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Items in flight at once; omitted: `concurrency` (4). Give one of the two.",
    )

    # Every item call retries under the step's (else the tool's) policy.
    retries_per_item: ClassVar[bool] = True
    planner_hint: ClassVar[str] = (
        '{"id": "each", "kind": "foreach", "tool": "TOOL", "input_mapping": {"items": '
        '"search.items"}, "item_mapping": {"PARAM": "$item.FIELD"}}: one call per item. It '
        'outputs "items" (the list of its tool\'s results) and "count".'
    )

    @model_validator(mode="after")
    def _one_bound(self) -> ForeachStep:
        if self.max_parallel is not None and "concurrency" in self.model_fields_set:
            raise ValueError(
                f"give `max_parallel` or its older name `concurrency`, not both (step `{self.id}`)"
            )
        return self

    @property
    def items_in_flight(self) -> int:
        """How many item calls are in flight at once: ``max_parallel``, else ``concurrency``."""
        return self.max_parallel if self.max_parallel is not None else self.concurrency

    def step_time_limit(self) -> float | None:
        return None  # its ``timeout`` applies to every item call instead

    def output_fields(self) -> tuple[str, ...] | None:
        # ``items``: the tool's results in input order (null where an item failed).
        return ("items", "count", "errors")

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        kinds = {"items": "array", "count": "integer", "errors": "array"}
        return {"type": kinds[field]} if field in kinds else None

    def direct_tools(self) -> tuple[str, ...]:
        return (self.tool,)

    def mappings(self) -> dict[str, dict[str, Any]]:
        return {"input_mapping": self.input_mapping, "item_mapping": self.item_mapping}


class WorkflowStep(_StepBase):
    """Runs another active workflow as a child run: its mapped inputs are the child's
    inputs, its output the child's outputs (docs/steps.md)."""

    kind: Literal["workflow"] = "workflow"
    workflow: str = Field(
        pattern=WORKFLOW_NAME_PATTERN,
        description="Name of the active workflow to run; approval pins its definition hash.",
    )

    planner_hint: ClassVar[str] = (
        '{"id": "forecast", "kind": "workflow", "workflow": "TEMPLATE_NAME", "input_mapping": '
        '{"TEMPLATE_INPUT": "$input.city"}}; later steps and "outputs" read its outputs as '
        '"forecast.OUTPUT_NAME"'
    )
    planner_needs_templates: ClassVar[bool] = True

    def step_time_limit(self) -> float | None:
        return None  # the child's steps keep their own time limits

    def called_workflow(self) -> str | None:
        return self.workflow


# The schema's own bound on ``max_iterations``; the operator's is lower
# (FLOWPILOT_MAX_LOOP_ITERATIONS, checked by the validator).
LOOP_ITERATIONS_CAP = 1000


class LoopStep(_StepBase):
    """Runs another active workflow as a child run once per iteration, until ``until``
    holds or ``max_iterations`` ran: a bounded review-and-fix cycle (docs/steps.md)."""

    kind: Literal["loop"] = "loop"
    workflow: str = Field(
        pattern=WORKFLOW_NAME_PATTERN,
        description="Name of the active workflow each iteration runs; approval pins its "
        "definition hash.",
    )
    max_iterations: int = Field(
        ge=1,
        le=LOOP_ITERATIONS_CAP,
        description="Most iterations it runs; required. At most FLOWPILOT_MAX_LOOP_ITERATIONS.",
    )
    until: str = Field(
        min_length=1,
        description="Condition over `output` (the iteration's outputs) and `iteration` (its "
        "number, from 1); the loop stops after the first iteration for which it holds.",
    )
    iteration_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="Child input -> `$loop.previous`, `$loop.previous.PATH` (the previous "
        "iteration's outputs, null on the first) or `$loop.iteration`; a null value leaves "
        "the input to `input_mapping` (else the child's default).",
    )
    on_exhausted: Literal["fail", "continue"] = Field(
        "fail",
        description="At max_iterations without the condition holding: fail the step "
        "(`loop_exhausted`), or succeed with `condition_held: false`.",
    )

    planner_hint: ClassVar[str] = (
        '{"id": "review", "kind": "loop", "workflow": "TEMPLATE_NAME", "max_iterations": 3, '
        '"until": "output.passed == true", "input_mapping": {"TEMPLATE_INPUT": "$input.text"}, '
        '"iteration_mapping": {"TEMPLATE_INPUT2": "$loop.previous.OUTPUT_NAME"}}: runs the '
        "template again until `until` holds (over `output`, that run's outputs, and "
        "`iteration`), at most max_iterations times; for review-and-fix cycles. It outputs "
        '"last" (the last run\'s outputs), "count", "condition_held" and "iterations".'
    )
    planner_needs_templates: ClassVar[bool] = True

    def step_time_limit(self) -> float | None:
        return None  # every iteration's child keeps its steps' own time limits

    def called_workflow(self) -> str | None:
        return self.workflow

    def output_fields(self) -> tuple[str, ...] | None:
        # ``last``: the last iteration's outputs; ``iterations``: every iteration's, in order.
        return ("last", "count", "condition_held", "iterations")

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        kinds = {"count": "integer", "condition_held": "boolean", "iterations": "array"}
        return {"type": kinds[field]} if field in kinds else None


# How long an approval step may wait for its decision, at most (its ``timeout``).
MAX_APPROVAL_SECONDS = 90 * 86400
APPROVER_PATTERN = r"^(group:)?[\w.@+-]{1,150}$"


class ApprovalStep(_StepBase):
    """The run waits for a person: ``required`` approvals of its ``approvers`` (after a
    look at the requests the next steps will send), or one rejection; the values the
    approver gives (``form``) are the step's output (docs/steps.md)."""

    kind: Literal["approval"] = "approval"
    approvers: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="User names, or `group:NAME` for a group's members; empty: any user "
        "holding the permission to approve runs.",
    )
    required: int = Field(1, ge=1, le=20, description="Distinct approvals needed.")
    author_may_approve: bool = Field(
        True, description="Whether the person who started the run may approve it."
    )
    form: dict[str, Any] | None = Field(
        None,
        description="JSON Schema (an object) of the values the approver gives; they are "
        "checked against it and become the step's output. Omitted: the output is `{}`.",
    )
    # A wait, not one attempt: longer than a step's try may be.
    timeout: float | None = Field(
        None,
        gt=0,
        le=MAX_APPROVAL_SECONDS,
        description="Seconds the step waits for its decision; omitted: no limit.",
    )
    on_timeout: Literal["fail", "skip", "continue"] = Field(
        "fail",
        description="When the time is up: fail the step, skip it (and what only it leads "
        "to), or continue with the form's defaults as its output.",
    )
    notify: Channels = Field(
        default_factory=Channels,
        description="Who is told that the step waits: `email` recipients (one who may decide "
        "it gets a signed, single-use link that decides as them) and a `webhook` (a signed "
        "JSON POST with such a link per approver).",
    )

    planner_hint: ClassVar[str] = (
        '{"id": "confirm", "kind": "approval", "approvers": ["group:finance"], "required": 1, '
        '"form": {"type": "object", "properties": {"note": {"type": "string"}}}}: the run '
        "waits until a person approves (the next steps' requests are shown to them first); "
        "put it before a step that sends money, emails or writes. It outputs the form's "
        "values."
    )

    def step_time_limit(self) -> float | None:
        return None  # it waits without a task: ``timeout`` is the wait's limit

    def output_fields(self) -> tuple[str, ...] | None:
        properties = (self.form or {}).get("properties")
        return tuple(properties) if isinstance(properties, dict) else ()

    def output_field_schema(self, field: str) -> dict[str, Any] | None:
        found = ((self.form or {}).get("properties") or {}).get(field)
        return found if isinstance(found, dict) else None

    def form_defaults(self) -> dict[str, Any]:
        """The form's defaults: the output of a step continued when its time is up."""
        properties = (self.form or {}).get("properties") or {}
        return {k: v["default"] for k, v in properties.items() if "default" in v}

    @field_validator("approvers")
    @classmethod
    def _approvers(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(APPROVER_PATTERN, name):
                raise ValueError(f"{name!r} is no user name or `group:NAME`")
        return value

    @field_validator("form")
    @classmethod
    def _form(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        if value.get("type", "object") != "object":
            raise ValueError("the form is a JSON Schema of an object (`type: object`)")
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            raise ValueError(f"the form is no JSON Schema: {exc.message}") from None
        return value

    @model_validator(mode="after")
    def _enough_approvers(self) -> ApprovalStep:
        users = [a for a in self.approvers if not a.startswith("group:")]
        if self.approvers and len(users) == len(self.approvers) and len(set(users)) < self.required:
            raise ValueError(
                f"`required` is {self.required}, but only {len(set(users))} approvers are "
                "named: the step could never be approved"
            )
        return self


AnyStep = (
    ToolStep
    | LLMStep
    | DecisionStep
    | TransformStep
    | ForeachStep
    | WorkflowStep
    | LoopStep
    | ApprovalStep
)
Step = Annotated[AnyStep, Field(discriminator="kind")]


def step_models() -> tuple[type[AnyStep], ...]:
    """The step models of the ``Step`` union, in its order: the one list of kinds."""
    return get_args(AnyStep)


def step_kind_names() -> tuple[str, ...]:
    """The ``kind`` of every model of the ``Step`` union, in its order. The engine's
    ``KINDS``, the planner's prompt and the admin's legend are derived from it."""
    return tuple(model.model_fields["kind"].default for model in step_models())


class Edge(_Model):
    from_: str = Field(alias="from", pattern=STEP_ID_PATTERN)
    to: str = Field(pattern=STEP_ID_PATTERN)
    when: str | None = Field(None, description="Branch label of a decision step `from`.")


SCENARIO_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"


class Expectation(_Model):
    """One expectation of a test scenario on the run's outputs: exactly one of ``equals``,
    ``schema`` (JSON Schema) and ``jmespath`` (true to pass), on the value ``output``
    names (an output, or a dot path into one), else on the whole outputs."""

    output: str | None = Field(
        None,
        max_length=500,
        description="An output name, or a dot path into one (`report.rows.0.total`). "
        "Omitted: the whole outputs object.",
    )
    equals: Any = Field(None, description="The value must equal this (JSON equality).")
    json_schema: dict[str, Any] | None = Field(
        None, alias="schema", description="The value must be valid against this JSON Schema."
    )
    jmespath: str | None = Field(
        None,
        max_length=2000,
        description="A JMESPath expression over {outputs, inputs, value} that must be true.",
    )
    message: str = Field("", max_length=500, description="Said when it fails.")

    def kind(self) -> str | None:
        """Which check it makes (``equals``, ``schema``, ``jmespath``); None when it names
        none or several (the validator says so)."""
        fields = (("equals", "equals"), ("schema", "json_schema"), ("jmespath", "jmespath"))
        named = [name for name, field in fields if field in self.model_fields_set]
        return named[0] if len(named) == 1 else None


class TestScenario(_Model):
    """Inputs and what the outputs must then be: run offline against the recorded calls of
    a validation run of the workflow (``runs.scenarios``), on every new version."""

    __test__ = False  # not a pytest test class, whatever its name

    name: str = Field(pattern=SCENARIO_NAME_PATTERN)
    description: str = ""
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description="Run inputs, over the validation run's (a call the validation run did "
        "not make has no recording: keep to inputs whose calls were recorded).",
    )
    expect: list[Expectation] = Field(min_length=1, max_length=100)


class WorkflowSpec(_Model):
    """A whole workflow: what a file holds and what a version freezes."""

    name: str = Field(pattern=WORKFLOW_NAME_PATTERN)
    description: str = ""
    goal: str = ""
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    tools: list[str] | None = Field(
        None,
        description="Flow-level tool allowlist. Omitted: the tools its steps and poll "
        "triggers name.",
    )
    steps: list[Step] = Field(min_length=1)
    edges: list[Edge] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(
        default_factory=dict,
        description="Run output name -> reference. Empty: the outputs of the sink steps.",
    )
    schedule: str | ScheduleSpec | None = Field(
        None,
        description="A five-field cron expression (UTC), or a schedule with policies; "
        "activating the version creates or updates it (docs/schedules.md).",
    )
    retention_days: int | None = Field(
        None,
        ge=0,
        le=36500,
        description="Days finished runs are kept (0 = forever). Omitted: the site default.",
    )
    triggers: list[TriggerSpec] = Field(
        default_factory=list,
        description="Events that start a run of the active version, once per event: "
        "another workflow's finished run, or a new item found by a poll (docs/triggers.md).",
    )
    notifications: Notifications = Field(default_factory=Notifications)
    queue: str | None = Field(
        None,
        description="The Celery queue of its run's tasks and of the steps whose tool names "
        "none (a tool's `queue` wins for its steps); omitted: the default queue "
        "(docs/limits.md).",
    )
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Steps of one run in flight at once (queued or running), on either "
        "driver; omitted: no bound on Celery, FLOWPILOT_MAX_PARALLEL_STEPS in process.",
    )
    concurrency: Concurrency | None = Field(
        None,
        description="How many runs may run at once (per key) and what a run past the limit "
        "does (docs/limits.md). Omitted: no limit.",
    )
    budget: MoneyBudget = Field(
        default_factory=MoneyBudget,
        description="US dollars all its model calls may spend per run and per month "
        "(docs/observability.md); a step's own `budget` may be tighter.",
    )
    tests: list[TestScenario] = Field(
        default_factory=list,
        max_length=50,
        description="Test scenarios: inputs and expectations on the outputs, run offline "
        "against a validation run's recorded calls on every new version (docs/steps.md).",
    )

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return check_queue_name(value)

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str | ScheduleSpec | None) -> ScheduleSpec | None:
        return ScheduleSpec(cron=value) if isinstance(value, str) else value

    def declared_schedule(self) -> ScheduleSpec | None:
        """The schedule as a ``ScheduleSpec``: the validator reads a cron string as one,
        and this says so to the type checker (the field also accepts the string form)."""
        value = self.schedule
        return ScheduleSpec(cron=value) if isinstance(value, str) else value

    @field_validator("inputs")
    @classmethod
    def _input_names(cls, value: dict[str, InputSpec]) -> dict[str, InputSpec]:
        for key in value:
            if not re.match(INPUT_NAME_PATTERN, key):
                raise ValueError(f"input name {key!r} must match {INPUT_NAME_PATTERN}")
        return value

    @cached_property
    def _steps_by_id(self) -> dict[str, AnyStep]:
        return {step.id: step for step in self.steps}  # first wins, as in the file

    def step(self, step_id: str) -> AnyStep:
        """The step with this id (KeyError if none); a dict lookup, cached per spec."""
        return self._steps_by_id[step_id]

    def allowed_tools(self) -> list[str]:
        if self.tools is not None:
            return list(self.tools)
        polled = {t.poll.tool for t in self.triggers if t.poll is not None}
        return sorted({t for s in self.steps for t in s.direct_tools()} | polled)

    def allowlist(self) -> frozenset[str]:
        """The tools a run may call: ``tools`` when given, else every tool its steps name,
        the ones its steps let a model call included."""
        if self.tools is not None:
            return frozenset(self.tools)
        named = {t for s in self.steps for t in s.model_tools()}
        return frozenset(self.allowed_tools()) | named

    def to_data(self) -> dict[str, Any]:
        """The file form: aliases (``from``), only what was written, in field order."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def canonical_json(self) -> str:
        return json.dumps(self.to_data(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    def definition_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def workflow_json_schema() -> dict[str, Any]:
    schema = WorkflowSpec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "flowpilot workflow"
    return schema
