"""The planner's messages: what the model is told, for a first plan, a repair and a revision.

Messages hold the goal, the sample inputs, the compact tool catalog, the
previous plan and the reviewer's feedback — never a resolved ``$env`` value
(the planner scrubs them anyway before sending). The structured-output format
is the workflow JSON Schema (``workflows.schema.workflow_json_schema``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from workflows.planner.questions import MAX_OPTIONS, MAX_QUESTIONS, questions_schema
from workflows.schema import step_models, workflow_json_schema
from workflows.validation.report import ValidationIssue

_SYSTEM_HEAD = """\
You design workflows for flowpilot. A workflow is a directed acyclic graph of steps \
that call registered tools. After a person approves it, an engine (not an LLM) runs \
exactly that graph, so it must be complete and precise.

Answer with ONE JSON object in the workflow format and nothing else. Fields:
- "name": a short slug you choose for what the workflow does (lowercase letters, \
digits, "_" or "-", starting with a letter), e.g. "city_weather_report".
- "description": one sentence.
- "inputs": the values a user gives each run, e.g. {"city": {"type": "string", \
"description": "City name", "default": "Oslo"}}. Types: string, integer, number, \
boolean, object, array. Declare every value that changes between runs; read each one.
- "tools": the names of every tool the workflow calls (its allowlist).
- "steps": the steps, each with a unique "id" (lowercase slug), a "kind" and an \
"input_mapping" (parameter name -> value).
- "edges": only for decision branches: {"from": "DECISION_ID", "to": "STEP_ID", \
"when": "BRANCH"}. Data edges are inferred from the references.
- "outputs": what a run returns, e.g. {"temperature": "weather.temperature"}.

Values in "input_mapping" and "outputs":
- "$input.NAME" reads a run input.
- "STEP_ID.FIELD" reads a field of an earlier step's output; deeper paths and list \
indexes are allowed ("geo.results.0.lat"). Read only the fields a step outputs, as its \
kind below says.
- "$step.STEP_ID" reads a step's whole output.
- Anything else is a literal ("metric", 3, true); values are never templates ({{…}}).
- Never write "$env.…": credentials are configured inside the tools."""

_SYSTEM_TAIL = """\
Use only tools from the catalog, with the parameter names of their input schemas. \
Prefer the fewest steps that reach the goal."""


def _kind_lines(*, with_templates: bool) -> str:
    """One line per step kind of the union, from its ``planner_hint`` (a kind that runs an
    approved workflow is offered only beside templates)."""
    return "\n".join(
        f"- {model.model_fields['kind'].default}: {model.planner_hint}"
        for model in step_models()
        if model.planner_needs_templates == with_templates
    )


# The kind list is derived from the ``Step`` union: a new kind needs no edit here.
SYSTEM_PROMPT = (
    f"{_SYSTEM_HEAD}\n\nStep kinds:\n{_kind_lines(with_templates=False)}\n\n{_SYSTEM_TAIL}"
)

REPLY_INVALID = "reply_invalid"
PLAN_UNCHANGED = "plan_unchanged"
# The validator's warnings a repair round passes on with the errors: each names data
# that comes out null or a step that never runs. (Every warning code but
# ``edge_type_unknown``, whose fix is a tool file's ``output_types``, not the plan.)
REPAIR_WARNINGS = frozenset(
    {"error_ref_without_continue", "unused_input", "branch_without_edge", "unreachable_step"}
)


QUESTIONS_OFFER = f"""\
If the goal leaves open something the workflow needs and no sensible default exists \
(which repository, how often, what counts as "busy"), you may instead answer with at \
most {MAX_QUESTIONS} clarifying questions, each with 1 to {MAX_OPTIONS} suggested \
answers: {{"answer": "questions", "questions": [{{"id": "repo", "question": "Which \
repository?", "options": ["octocat/hello-world"]}}]}}. Ask only what you cannot decide \
yourself; otherwise return the workflow."""

QUESTIONS_CLOSED = (
    "Do not ask more questions: return the workflow, choosing sensible defaults (as "
    "declared inputs with defaults) for anything still open."
)

TEMPLATE_REUSE = f"""\
If one of them already does what the goal needs (or a self-contained part of it), \
reuse it as one step instead of rebuilding it:
{_kind_lines(with_templates=True)}
Otherwise follow their structure where it fits the goal."""

TEMPLATE_COPY = "Follow their structure where it fits the goal; they are examples, not tools."


def response_format(*, questions: bool = False) -> dict[str, Any]:
    """Structured output: the workflow JSON Schema (not strict: it has optional fields),
    or — when the planner may ask — a choice of a workflow or questions."""
    schema = workflow_json_schema()
    if not questions:
        return {
            "type": "json_schema",
            "json_schema": {"name": "workflow", "schema": schema, "strict": False},
        }
    defs = schema.pop("$defs", {})
    schema.pop("$schema", None)
    schema["properties"] = {"answer": {"const": "plan"}, **schema["properties"]}
    combined = {"$defs": defs, "oneOf": [schema, questions_schema()]}
    return {
        "type": "json_schema",
        "json_schema": {"name": "plan_or_questions", "schema": combined, "strict": False},
    }


def _sample_inputs(sample_inputs: Mapping[str, Any] | None) -> str:
    if not sample_inputs:
        return ""
    shown = json.dumps(dict(sample_inputs), ensure_ascii=False, default=str)
    return f"\n\nSample inputs (what a first run will use): {shown}"


def _templates(templates: str) -> str:
    if not templates:
        return ""
    how = TEMPLATE_REUSE if _kind_lines(with_templates=True) else TEMPLATE_COPY
    return (
        "Approved workflows similar to this goal (what reviewers accepted before; one JSON "
        f"object each, best match first):\n{templates}\n{how}\n\n"
    )


LESSONS_HEAD = (
    "Warnings: earlier plans for similar goals that went wrong (a reviewer's rejection, "
    "or a failed validation run), most similar first. Do not repeat these mistakes:"
)


def _lessons(lessons: str) -> str:
    return f"{LESSONS_HEAD}\n{lessons}\n\n" if lessons else ""


def _clarifications(clarifications: str, *, ask: bool) -> str:
    parts = []
    if clarifications:
        parts.append(f"Your earlier questions and the user's answers:\n{clarifications}\n\n")
    if ask:
        parts.append(f"{QUESTIONS_OFFER}\n\n")
    elif clarifications:
        parts.append(f"{QUESTIONS_CLOSED}\n\n")
    return "".join(parts)


def create_messages(
    *,
    goal: str,
    catalog: str,
    sample_inputs: Mapping[str, Any] | None,
    templates: str = "",
    clarifications: str = "",
    ask: bool = False,
    lessons: str = "",
) -> list[dict[str, Any]]:
    """A first plan: the goal, its sample inputs, the catalog, the templates, the lessons
    of similar plans that went wrong, earlier questions and answers, and (``ask``) the
    offer to ask questions instead."""
    user = (
        f"Goal: {goal}{_sample_inputs(sample_inputs)}\n\n"
        f"Tool catalog (one JSON object per tool):\n{catalog}\n\n"
        f"{_templates(templates)}"
        f"{_lessons(lessons)}"
        f"{_clarifications(clarifications, ask=ask)}"
        "Return the workflow as one JSON object."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def revise_messages(
    *,
    goal: str,
    catalog: str,
    previous: Mapping[str, Any],
    version: int,
    feedback: str,
    lessons: str = "",
) -> list[dict[str, Any]]:
    name = previous.get("name", "")
    plan = json.dumps(previous, ensure_ascii=False, indent=1)
    user = (
        f"Goal: {goal}\n\n"
        f"Tool catalog (one JSON object per tool):\n{catalog}\n\n"
        f"The current plan (`{name}` version {version}), which a reviewer sent back:\n{plan}\n\n"
        f"Reviewer feedback:\n{feedback}\n\n"
        f"{_lessons(lessons)}"
        f'Revise the plan to answer the feedback. Keep "name": "{name}". '
        "Return the whole revised workflow as one JSON object."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def repair_message(issues: Iterable[ValidationIssue]) -> dict[str, Any]:
    """The validator's errors fed back, one per line, with where and what — and its
    warnings, which usually point at data that would silently come out null."""
    issues = list(issues)
    errors = [i for i in issues if i.severity == "error"]
    warnings = [i for i in issues if i.severity == "warning" and i.code in REPAIR_WARNINGS]
    if any(i.code == REPLY_INVALID for i in errors):
        head = "Your reply could not be used:"
    else:
        head = f"The workflow you returned has {len(errors)} problem(s):"
    lines = [_line(i) for i in errors]
    if warnings:
        lines += ["", f"Also fix these {len(warnings)} warning(s):", *map(_line, warnings)]
    text = (
        f"{head}\n"
        + "\n".join(lines)
        + (
            "\n\nFix every problem and return the whole corrected workflow as one JSON object, "
            "with no other text."
        )
    )
    return {"role": "user", "content": text}


def _line(issue: ValidationIssue) -> str:
    return f"- {issue.path or '(workflow)'} [{issue.code}]: {issue.message}"
