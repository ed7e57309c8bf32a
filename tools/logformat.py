"""How log lines are written: as text (the default) or as one JSON object per line.

``FLOWPILOT_LOG_FORMAT`` (config/settings.py) picks the format of the stderr handler of
every process (``LOGGING``), and of the handler ``runflow --log-level`` adds
(``formatter_for``). A JSON line holds, in this order: ``time`` (UTC, milliseconds),
``level``, ``logger``, ``message``; then the ids the line is about, when known —
``run_id``, ``step_id``, ``attempt``, ``item``, ``trace_id`` — from the ids the engine
set for the block it was logged in (``tools.logcontext``), where the same names passed
with ``extra=`` on the call win; then ``exception`` (the traceback) when there is one,
and the ``process`` and ``thread`` names.

The stdlib only: the line's keys are fixed here, so a JSON logging library would bring
a dependency and nothing it could configure.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from typing import Any

from tools.logcontext import current_log_fields

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The ids a line may carry, in the order they are written.
FIELDS = ("run_id", "step_id", "attempt", "item", "trace_id")

# Characters JSON leaves as they are but a reader may take for the end of a line
# (``str.splitlines``: NEL, LINE and PARAGRAPH SEPARATOR), or cannot encode (a lone
# surrogate): written as \u escapes, so a line stays one line of valid UTF-8.
_ESCAPED = re.compile("[\x85\u2028\u2029\ud800-\udfff]")


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module's docstring); never raises on a value."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": utc_time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        known = current_log_fields()
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = known.get(name)
            if value is not None:
                line[name] = _scalar(value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        line["process"] = record.processName
        line["thread"] = record.threadName
        text = json.dumps(line, ensure_ascii=False)
        return _ESCAPED.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def utc_time(record: logging.LogRecord) -> str:
    """When ``record`` was made, in ISO 8601 UTC with milliseconds
    (``2026-11-24T09:00:00.123Z``)."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


def formatter_for(log_format: str) -> logging.Formatter:
    """A formatter of ``log_format`` (one of ``LOG_FORMATS``), for a handler made
    outside ``LOGGING``."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def _scalar(value: Any) -> Any:
    """``value`` as a JSON scalar: a string, a whole number, a finite number, a boolean;
    anything else as its text."""
    if isinstance(value, str | int):  # bool is an int
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a log line must not fail on a value's __str__
        return f"<{type(value).__name__} that cannot be shown>"
