"""Reading and writing workflow files (JSON or YAML), with errors that say where.

Refused, with the place: a key written twice in one object (JSON as YAML), text no
database can store (a NUL character, a lone surrogate) or a NaN, a document too
big, too deep or expanding too far (``tools.data_limits``), a file over 5 MB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tools.data_limits import data_limit_problem
from tools.errors import FlowpilotError
from tools.jsondata import DuplicateKey, duplicate_key_location, loads_strict, storage_problem
from tools.yaml_strict import describe_yaml_error, strict_safe_load

MAX_FILE_BYTES = 5 * 1024 * 1024


class WorkflowFileError(FlowpilotError):
    code = "workflow_file_invalid"


def parse_workflow_text(text: str, *, source: str, fmt: str | None = None) -> dict[str, Any]:
    """Parse JSON or YAML text into a dict. ``fmt`` is "json", "yaml" or None (guess)."""
    if fmt is None:
        fmt = "json" if text.lstrip().startswith(("{", "[")) else "yaml"
    try:
        data = loads_strict(text) if fmt == "json" else strict_safe_load(text)
    except DuplicateKey as exc:
        where = duplicate_key_location(text) or str(exc)
        raise WorkflowFileError(f"{source}: invalid JSON at {where}") from exc
    except json.JSONDecodeError as exc:
        raise WorkflowFileError(
            f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except yaml.YAMLError as exc:
        line, column, problem = describe_yaml_error(exc)
        where = f" at line {line}, column {column}" if line else ""
        raise WorkflowFileError(f"{source}: invalid YAML{where}: {problem}") from exc
    except RecursionError as exc:
        raise WorkflowFileError(f"{source}: the document nests too deeply") from exc
    refused = data_limit_problem(data) or storage_problem(data)
    if refused:
        raise WorkflowFileError(f"{source}: {refused}")
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "nothing"
        raise WorkflowFileError(f"{source}: a workflow file must hold a mapping, found {kind}")
    return data


def read_workflow_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise WorkflowFileError(f"{path}: cannot read: {exc.strerror}") from exc
    if size > MAX_FILE_BYTES:
        raise WorkflowFileError(f"{path}: {size} bytes is over the {MAX_FILE_BYTES} byte limit")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkflowFileError(f"{path}: not UTF-8 text (byte {exc.start})") from exc
    fmt = "json" if path.suffix.lower() == ".json" else "yaml"
    return parse_workflow_text(text, source=str(path), fmt=fmt)


def dump_workflow(data: dict[str, Any], *, fmt: str = "yaml") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
