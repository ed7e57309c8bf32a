"""Short texts about stored run data: an output's shape and size, where an error came from.

Pure functions over what a StepResult stores (already scrubbed of secrets and capped
at the checkpoint), shared by the run page, its JSON and ``showrun``.
"""

from __future__ import annotations

import json
from typing import Any

SUMMARY_CHARS = 80  # a string output is quoted up to this many characters
SUMMARY_KEYS = 6  # an object's keys named in its summary


def as_number(value: Any, default: float = 0.0) -> float:
    """A number read from a stored record (anything else reads as ``default``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return float(value)


def is_stored_preview(value: Any) -> bool:
    """Whether a stored record is the flagged preview of an over-limit value."""
    return isinstance(value, dict) and value.get("_truncated") is True and "preview" in value


def json_size(value: Any) -> int:
    """The size in bytes of ``value`` as compact JSON (UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _quoted(text: str) -> str:
    cut = text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"
    return json.dumps(cut, ensure_ascii=False)


def _items(value: list[Any]) -> str:
    noun = "item" if len(value) == 1 else "items"
    if value and all(isinstance(item, dict) for item in value):
        keys = sorted({str(key) for item in value for key in item})
        shown = ", ".join(keys[:SUMMARY_KEYS]) + (", …" if len(keys) > SUMMARY_KEYS else "")
        objects = "object" if len(value) == 1 else "objects"
        return (
            f"list of {len(value)} {objects} ({shown})" if keys else f"list of {len(value)} {noun}"
        )
    return f"list of {len(value)} {noun}"


def _keys(value: dict[str, Any]) -> str:
    keys = sorted(str(key) for key in value)  # sorted: PostgreSQL's jsonb reorders keys
    if not keys:
        return "empty object"
    shown = ", ".join(keys[:SUMMARY_KEYS])
    more = f" (+{len(keys) - SUMMARY_KEYS} more)" if len(keys) > SUMMARY_KEYS else ""
    return f"object with {len(keys)} key{'s' if len(keys) != 1 else ''}: {shown}{more}"


def value_summary(value: Any) -> str:
    """One line about a stored value: its shape, never the whole of it."""
    if value is None:
        return "no output"
    if is_stored_preview(value):
        limit = value.get("_stored_limit_bytes")
        return (
            f"over the {human_size(limit)} storage limit: a preview is stored"
            if isinstance(limit, int)
            else "over the storage limit: a preview is stored"
        )
    if isinstance(value, dict):
        return _keys(value)
    if isinstance(value, list):
        return _items(value)
    if isinstance(value, str):
        return _quoted(value)
    return json.dumps(value, default=str)


def truncation_note(*, output: Any, output_truncated: bool) -> str:
    """Why a step's output is flagged, or "" when it is whole."""
    if is_stored_preview(output):
        return "stored truncated: the output was over FLOWPILOT_MAX_STORED_OUTPUT_BYTES"
    if output_truncated:
        return "the response body was cut at the size limit (FLOWPILOT_MAX_RESPONSE_BYTES)"
    return ""


def replaced_text_note(attempt_log: Any) -> str:
    """Why a step's output is flagged as decoded with replacements, or "" when it is not:
    the body its last try read was not valid in its charset (``replaced_text`` on the
    try's request record), so some characters of it are U+FFFD."""
    entries = attempt_log if isinstance(attempt_log, list) else []
    last = entries[-1] if entries and isinstance(entries[-1], dict) else {}
    request = last.get("request")
    if isinstance(request, dict) and request.get("replaced_text") is True:
        return "the response body was not valid in its charset: bytes were replaced with U+FFFD"
    return ""


def error_origin(
    *, step_id: str, kind: str, tool: str, error: dict[str, Any] | None, attempts: int
) -> str:
    """Where a step's error came from: the step, its tool, the try, the HTTP status or host."""
    if not error:
        return ""
    where = f"step `{step_id}` ({kind}" + (f" `{tool}`" if tool else "") + ")"
    if attempts:
        where += f", try {attempts}"
    else:
        where += ", before any call (its inputs could not be resolved)"
    details = []
    if error.get("status") is not None:
        details.append(f"HTTP {error['status']}")
    if error.get("host"):
        details.append(f"host {error['host']}")
    details.append("retryable" if error.get("retryable") else "not retryable")
    return f"{where}: {error.get('type', 'error')} ({', '.join(details)})"
