"""Pydantic errors as ``schema_invalid`` issues: one per error, named by JSON path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tools.policy import RetryPolicy
from workflows.schema import (
    Edge,
    InputSpec,
    LLMBudget,
    Notifications,
    ToolStep,
    WorkflowSpec,
    step_models,
)
from workflows.schema_concurrency import Concurrency
from workflows.validation.confusables import describe, skeleton
from workflows.validation.report import ValidationIssue, error, format_path, names, suggest

# Every kind of the ``Step`` union -> its model (derived: a new kind needs no edit here).
STEP_MODELS = {model.model_fields["kind"].default: model for model in step_models()}
KIND_TAGS = frozenset(STEP_MODELS)
_FIELD_MODELS = {"retry": RetryPolicy, "budget": LLMBudget, "notifications": Notifications}
# Words planners write for a field, by where they write them (did-you-mean beyond spelling).
_ALIASES = {
    "workflow": {"input": "inputs", "output": "outputs", "allowed_tools": "tools"},
    "step": {
        "arguments": "input_mapping", "args": "input_mapping", "params": "input_mapping",
        "parameters": "input_mapping", "inputs": "input_mapping", "input": "input_mapping",
        "condition": "conditions", "jmespath": "expression", "query": "expression",
        "user_prompt": "prompt", "items_mapping": "item_mapping", "type": "kind",
        "depends_on": "edges", "after": "edges", "needs": "edges",
    },
    "edge": {"source": "from", "target": "to", "condition": "when", "branch": "when"},
}  # fmt: skip


def schema_issues(exc: ValidationError, data: Any) -> list[ValidationIssue]:
    issues = []
    for err in exc.errors(include_url=False):
        loc = clean_loc(err["loc"])
        path = format_path(loc)
        message = _message(err, path) + _fix(err, loc, data)
        issues.append(error("schema_invalid", path, message, _step_id(loc, data)))
    return issues


def _fix(err: Mapping[str, Any], loc: tuple, data: Any) -> str:
    """What to write instead: the field meant, the fields a mapping takes, a valid id."""
    kind = err["type"]
    if kind == "extra_forbidden":
        return _field_fix(loc, data)
    if kind in ("model_type", "dict_type"):
        model = _model_at(loc, data)
        if model is not None:
            return f"; write a mapping with {names(_fields(model))}"
    lookalikes = describe(err["input"]) if isinstance(err.get("input"), str) else ""
    if kind == "string_pattern_mismatch" and lookalikes:
        return f"; {lookalikes}: write `{skeleton(err['input'])}` in ASCII"
    if kind == "string_pattern_mismatch" and loc and loc[-1] in ("id", "from", "to"):
        slug = _slug(err.get("input"))
        return f"; ids are lowercase letters, digits and `_`: write `{slug}`" if slug else ""
    if kind == "union_tag_not_found":
        step = _raw(loc, data)
        if isinstance(step, Mapping):
            given = [tag for tag in ("tool", "expression", "prompt", "branches") if tag in step]
            if given:
                tag = {"expression": "transform", "prompt": "llm", "branches": "decision"}
                guess = tag.get(given[0], "foreach" if "item_mapping" in step else "tool")
                return f"; it has `{given[0]}`, so it is likely `kind: {guess}`"
    return ""


def _field_fix(loc: tuple, data: Any) -> str:
    name = str(loc[-1])
    parent = loc[:-1]
    model = _model_at(parent, data)
    where = (
        "workflow"
        if not parent
        else "edge"
        if parent[0] == "edges" and len(parent) == 2
        else ("step" if parent[0] == "steps" and len(parent) == 2 else "")
    )
    alias = _ALIASES.get(where, {}).get(name)
    fields = _fields(model) if model is not None else []
    if alias == "edges":
        return (
            " (did you mean `edges`?): steps do not list their parents; add "
            "`edges: [{from: PARENT, to: THIS}]` at the top level, or read the parent's output"
        )
    hint = f" (did you mean `{alias}`?)" if alias in fields else suggest(name, fields)
    return hint + (f"; the fields here are {names(fields)}" if fields else "")


def _model_at(loc: tuple, data: Any) -> Any:
    """The pydantic model a location holds, when it is a known one."""
    if not loc:
        return WorkflowSpec
    if loc[0] == "inputs" and len(loc) == 2:
        return InputSpec
    if loc[0] == "edges" and len(loc) == 2:
        return Edge
    if loc[0] == "notifications" and len(loc) == 1:
        return Notifications
    if loc[0] == "concurrency" and len(loc) == 1:
        return Concurrency
    if loc[0] == "steps" and len(loc) >= 2:
        if len(loc) == 3 and loc[2] in _FIELD_MODELS:
            step = _raw(loc[:2], data)
            kind = step.get("kind") if isinstance(step, Mapping) else None
            model = STEP_MODELS.get(kind) if isinstance(kind, str) else None
            own = model.model_fields.get(loc[2]) if model is not None else None
            if own is not None and isinstance(own.annotation, type):
                return own.annotation  # the kind's own (a decision's budget takes fewer)
            return _FIELD_MODELS[loc[2]]
        if len(loc) == 2:
            step = _raw(loc, data)
            kind = step.get("kind") if isinstance(step, Mapping) else None
            return STEP_MODELS.get(kind, ToolStep) if isinstance(kind, str) else ToolStep
    return None


def _fields(model: Any) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _raw(loc: tuple, data: Any) -> Any:
    for part in loc:
        in_list = isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)
        if in_list or (isinstance(data, Mapping) and part in data):
            data = data[part]
        else:
            return None
    return data


def _slug(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", value)
    text = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    text = re.sub(r"^[^a-z]+", "", text)[:64]
    return text


def clean_loc(loc: tuple) -> tuple:
    """Drop the discriminated union's tag: ``steps, 2, tool, retry`` → ``steps, 2, retry``."""
    parts = list(loc)
    if (
        len(parts) > 2
        and parts[0] == "steps"
        and isinstance(parts[1], int)
        and parts[2] in KIND_TAGS
    ):
        del parts[2]
    return tuple(parts)


def _message(err: Mapping[str, Any], path: str) -> str:
    where = f"`{path}`" if path else "the workflow"
    kind = err["type"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"{where} is not a known field"
    if kind == "union_tag_not_found":
        return f"{where} needs a `kind`: one of {names(KIND_TAGS)}"
    if kind == "union_tag_invalid":
        tag = err.get("ctx", {}).get("tag")
        return f"{where}: unknown step kind `{tag}`; use one of {names(KIND_TAGS)}"
    if kind == "model_type" and not path:
        return "the workflow must be a mapping (YAML/JSON object)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    message = f"{where}: {msg[:1].lower()}{msg[1:]}"
    value = err.get("input")
    if isinstance(value, str | int | float | bool) or value is None:
        message += f" (got {_short(value)})"
    return message


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _step_id(loc: tuple, data: Any) -> str | None:
    if len(loc) < 2 or loc[0] != "steps" or not isinstance(loc[1], int):
        return None
    steps = data.get("steps") if isinstance(data, Mapping) else None
    if isinstance(steps, list) and 0 <= loc[1] < len(steps) and isinstance(steps[loc[1]], Mapping):
        step_id = steps[loc[1]].get("id")
        return step_id if isinstance(step_id, str) else None
    return None
