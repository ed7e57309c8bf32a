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

from workflows.schema import workflow_json_schema
from workflows.validation.report import ValidationIssue

SYSTEM_PROMPT = """\
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
indexes are allowed ("geo.results.0.lat"). Read only fields a tool lists in "outputs"; \
a decision outputs "branch", a transform the keys of its {key: …} expression, a foreach \
"items" (the list of its tool's results) and "count", an llm step "result".
- "$step.STEP_ID" reads a step's whole output.
- Anything else is a literal ("metric", 3, true); values are never templates ({{…}}).
- Never write "$env.…": credentials are configured inside the tools.

Step kinds:
- tool: {"id": "geo", "kind": "tool", "tool": "TOOL", "input_mapping": {...}}. Map \
every required parameter of the tool's input schema, and no parameter it does not take.
- transform: {"id": "shape", "kind": "transform", "expression": "JMESPath over the \
mapped names", "input_mapping": {"rows": "read.rows"}}: pure reshaping.
- decision: {"id": "hot", "kind": "decision", "branches": ["yes", "no"], \
"conditions": {"yes": "temp > 25"}, "default": "no", "input_mapping": \
{"temp": "weather.temperature"}}, plus one edge with "when" per branch. Conditions \
compare mapped names (== != < <= > >= in, and/or/not, len(), exists()); no arithmetic.
- foreach: {"id": "each", "kind": "foreach", "tool": "TOOL", "input_mapping": \
{"items": "search.items"}, "item_mapping": {"PARAM": "$item.FIELD"}}: one call per item.
- llm: {"id": "summary", "kind": "llm", "prompt": "Summarize: {{text}}", \
"input_mapping": {"text": "fetch.body"}}: only for work that needs language \
understanding; the prompt sees only the names it maps, as {{name}} placeholders. \
Optional: "tools" (the tools it may call), "output_schema", "budget".

Use only tools from the catalog, with the parameter names of their input schemas. \
Prefer the fewest steps that reach the goal."""

REPLY_INVALID = "reply_invalid"
PLAN_UNCHANGED = "plan_unchanged"
# The validator's warnings a repair round passes on with the errors: each names data
# that comes out null or a step that never runs. (Every warning code, today.)
REPAIR_WARNINGS = frozenset(
    {"error_ref_without_continue", "unused_input", "branch_without_edge", "unreachable_step"}
)


def response_format() -> dict[str, Any]:
    """Structured output: the workflow JSON Schema (not strict: it has optional fields)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "workflow", "schema": workflow_json_schema(), "strict": False},
    }


def _sample_inputs(sample_inputs: Mapping[str, Any] | None) -> str:
    if not sample_inputs:
        return ""
    shown = json.dumps(dict(sample_inputs), ensure_ascii=False, default=str)
    return f"\n\nSample inputs (what a first run will use): {shown}"


def create_messages(
    *, goal: str, catalog: str, sample_inputs: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    user = (
        f"Goal: {goal}{_sample_inputs(sample_inputs)}\n\n"
        f"Tool catalog (one JSON object per tool):\n{catalog}\n\n"
        "Return the workflow as one JSON object."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def revise_messages(
    *, goal: str, catalog: str, previous: Mapping[str, Any], version: int, feedback: str
) -> list[dict[str, Any]]:
    name = previous.get("name", "")
    plan = json.dumps(previous, ensure_ascii=False, indent=1)
    user = (
        f"Goal: {goal}\n\n"
        f"Tool catalog (one JSON object per tool):\n{catalog}\n\n"
        f"The current plan (`{name}` version {version}), which a reviewer sent back:\n{plan}\n\n"
        f"Reviewer feedback:\n{feedback}\n\n"
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
