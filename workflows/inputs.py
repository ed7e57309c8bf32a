"""Run inputs: coercion of command-line strings and checks against the declared inputs.

The declared inputs become one JSON Schema (:func:`inputs_schema`) checked by the same
validator as tool arguments (:func:`tools.spec.json_schema_validator`), so an input
and a tool parameter of the same type accept the same values. An input given as
``null`` counts as unset: it passes the type and enum checks and stays null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from jsonschema.exceptions import ValidationError

from tools.errors import FlowpilotError
from tools.jsondata import storage_problem
from tools.spec import json_schema_validator
from workflows.schema import InputSpec


class InputsInvalid(FlowpilotError):
    """One or more run inputs are missing, unknown or of the wrong type."""

    code = "inputs_invalid"

    def __init__(self, problems: list[str], fields: list[str] | None = None) -> None:
        super().__init__("invalid run inputs: " + "; ".join(problems))
        self.problems = problems
        # The input each problem is about, in the same order (for JSON paths).
        self.fields = list(fields) if fields is not None else [""] * len(problems)


def coerce_text(value: str, spec: InputSpec | None) -> Any:
    """Turn a ``--input k=v`` string into the declared type (JSON for objects/arrays)."""
    kind = spec.type if spec else "string"
    if kind == "string":
        return value
    if kind == "boolean":
        lowered = value.strip().lower()
        if lowered in {"true", "1", "yes", "on"}:
            return True
        if lowered in {"false", "0", "no", "off"}:
            return False
        return value  # left as text; the type check reports it
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        return value


def inputs_schema(declared: Mapping[str, InputSpec]) -> dict[str, Any]:
    """The JSON Schema of a run's inputs: each declared input with its type and enum
    (null allowed: an unset optional input is null), the required ones, nothing else."""
    properties: dict[str, Any] = {}
    for name, spec in declared.items():
        prop: dict[str, Any] = {"type": [spec.type, "null"]}
        if spec.description:
            prop["description"] = spec.description
        if spec.enum is not None:
            prop["enum"] = spec.enum if None in spec.enum else [*spec.enum, None]
        if "default" in spec.model_fields_set:
            prop["default"] = spec.default
        properties[name] = prop
    required = [name for name, spec in declared.items() if spec.is_required]
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def resolve_inputs(declared: Mapping[str, InputSpec], given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults applied, then checked against :func:`inputs_schema`; unset optional inputs
    are null. Raises InputsInvalid naming every problem, one per input."""
    values = {
        name: spec.default
        for name, spec in declared.items()
        if "default" in spec.model_fields_set
    }
    values.update(given)
    refused = _storage_problem(values)
    if refused:
        raise InputsInvalid([refused], [""])
    errors = json_schema_validator(inputs_schema(declared)).iter_errors(values)
    named = _problems(declared, values, list(errors))
    if named:
        raise InputsInvalid([message for _, message in named], [name for name, _ in named])
    return {name: values.get(name) for name in declared}


def _storage_problem(values: Mapping[str, Any]) -> str | None:
    """Run inputs are stored as given: over ``FLOWPILOT_MAX_RUN_INPUT_BYTES``, or holding
    what no database stores (``tools.jsondata.storage_problem``: a NUL character, a
    lone surrogate, NaN), they are refused, with the place."""
    problem = storage_problem(dict(values), "inputs")
    if problem is not None:
        return f"run inputs: {problem}"
    size = len(json.dumps(dict(values), ensure_ascii=False, default=str).encode())
    limit = settings.FLOWPILOT_MAX_RUN_INPUT_BYTES
    if size > limit:
        return (
            f"the run inputs are {size} bytes as JSON, over the {limit} byte limit "
            "(FLOWPILOT_MAX_RUN_INPUT_BYTES)"
        )
    return None


_FIRST = {"required": 0, "type": 1, "enum": 2}  # per input, the most basic problem is told


def _problems(
    declared: Mapping[str, InputSpec], values: Mapping[str, Any], errors: list[ValidationError]
) -> list[tuple[str, str]]:
    """``(input, message)``: one per unknown input (sorted), then one per declared input,
    in order."""
    known = ", ".join(sorted(declared)) or "none"
    unknown = sorted(set(values) - set(declared))
    problems = [(name, f"unknown input `{name}` (declared: {known})") for name in unknown]
    by_name: dict[str, tuple[int, str]] = {}
    for error in errors:
        for name, message in _describe(error, declared, values):
            rank = _FIRST.get(str(error.validator), len(_FIRST))
            if name not in by_name or rank < by_name[name][0]:
                by_name[name] = (rank, message)
    return problems + [(name, by_name[name][1]) for name in declared if name in by_name]


def _describe(
    error: ValidationError, declared: Mapping[str, InputSpec], values: Mapping[str, Any]
) -> list[tuple[str, str]]:
    """``(input name, message)`` pairs for one schema error (unknown inputs told apart)."""
    if error.validator == "additionalProperties":
        return []
    if error.validator == "required":
        missing = [n for n in error.validator_value if n not in values]
        return [(n, f"input `{n}` ({declared[n].type}) is required") for n in missing]
    name = str(error.absolute_path[0])
    spec = declared[name]
    if error.validator == "type":
        return [(name, f"input `{name}` must be {spec.type}, got {_shown(values[name], 80)}")]
    if error.validator == "enum":
        return [(name, f"input `{name}` must be one of {_shown(spec.enum, 200)}")]
    return [(name, f"input `{name}`: {error.message}")]  # pragma: no cover - no other keyword


def _shown(value: Any, limit: int) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:limit]
