"""Pydantic errors as ``schema_invalid`` issues: one per error, named by JSON path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from workflows.schema import DecisionStep, ForeachStep, LLMStep, ToolStep, TransformStep
from workflows.validation.report import ValidationIssue, error, format_path

KIND_TAGS = frozenset(
    model.model_fields["kind"].default
    for model in (ToolStep, LLMStep, DecisionStep, TransformStep, ForeachStep)
)


def schema_issues(exc: ValidationError, data: Any) -> list[ValidationIssue]:
    issues = []
    for err in exc.errors(include_url=False):
        loc = clean_loc(err["loc"])
        path = format_path(loc)
        issues.append(error("schema_invalid", path, _message(err, path), _step_id(loc, data)))
    return issues


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
        return f"{where} needs a `kind`: one of {', '.join(sorted(KIND_TAGS))}"
    if kind == "union_tag_invalid":
        tag = err.get("ctx", {}).get("tag")
        return f"{where}: unknown step kind `{tag}`; use one of {', '.join(sorted(KIND_TAGS))}"
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
