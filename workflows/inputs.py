"""Run inputs: coercion of command-line strings and checks against the declared inputs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tools.errors import FlowpilotError
from workflows.schema import InputSpec

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


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


def _type_ok(value: Any, kind: str) -> bool:
    if kind in {"integer", "number"} and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return True
    return isinstance(value, _JSON_TYPES[kind])


def resolve_inputs(declared: Mapping[str, InputSpec], given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults applied, types checked. Raises InputsInvalid naming every problem."""
    problems: list[str] = []
    fields: list[str] = []
    resolved: dict[str, Any] = {}

    def fail(name: str, problem: str) -> None:
        problems.append(problem)
        fields.append(name)

    for name in sorted(set(given) - set(declared)):
        known = ", ".join(sorted(declared)) or "none"
        fail(name, f"unknown input `{name}` (declared: {known})")
    for name, spec in declared.items():
        if name in given:
            value = given[name]
        elif "default" in spec.model_fields_set:
            value = spec.default
        elif spec.is_required:
            fail(name, f"input `{name}` ({spec.type}) is required")
            continue
        else:
            value = None
        if value is not None and not _type_ok(value, spec.type):
            fail(name, f"input `{name}` must be {spec.type}, got {json.dumps(value)[:80]}")
            continue
        if spec.enum is not None and value is not None and value not in spec.enum:
            fail(name, f"input `{name}` must be one of {json.dumps(spec.enum)[:200]}")
            continue
        resolved[name] = value
    if problems:
        raise InputsInvalid(problems, fields)
    return resolved
