"""Helpers shared by the management commands: targets, inputs, issue printing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from tools.services import tools_load_dir
from workflows.files import read_workflow_file
from workflows.inputs import coerce_text
from workflows.schema import InputSpec
from workflows.validation.report import ValidationIssue

FILE_SUFFIXES = (".yaml", ".yml", ".json")


def is_file_target(target: str) -> bool:
    return target.lower().endswith(FILE_SUFFIXES) or Path(target).is_file()


def parse_input_pairs(pairs: list[str], declared: dict[str, InputSpec]) -> dict[str, Any]:
    """``["k=v", …]`` → values coerced to the declared input types."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--input expects KEY=VALUE, got {pair!r}")
        key = key.strip()
        values[key] = coerce_text(raw, declared.get(key))
    return values


def read_inputs_file(path: str) -> dict[str, Any]:
    try:
        data = read_workflow_file(path)  # same JSON/YAML reader and error messages
    except Exception as exc:
        message = getattr(exc, "message", str(exc)).replace("a workflow file", "an inputs file")
        raise CommandError(message) from exc
    return data


def format_issue(issue: ValidationIssue) -> str:
    where = issue.path or "(workflow)"
    return f"{issue.severity:<7} {where}  [{issue.code}]  {issue.message}"


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def load_tool_dirs(directories: list[str]) -> None:
    """``--tools DIR``: load tool YAML files into the registry, or fail listing every error."""
    problems = []
    for directory in directories:
        problems += [str(e) for e in tools_load_dir(directory=directory).errors]
    if problems:
        raise CommandError("tool definitions failed to load: " + "; ".join(problems))
