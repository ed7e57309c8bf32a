"""Which format the logs are written in: ``FLOWPILOT_LOG_FORMAT``.

``text`` (the default: a line of text per record) or ``json`` (one JSON object per line,
``tools.logformat.JsonFormatter``), in any case. Any other value stops the process at
start-up rather than logging in a format nobody asked for.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from tools.logformat import LOG_FORMATS


def read_log_format(env: Any) -> str:
    value = env.str("FLOWPILOT_LOG_FORMAT", default="").strip().lower() or "text"
    if value not in LOG_FORMATS:
        raise ImproperlyConfigured(
            f"FLOWPILOT_LOG_FORMAT: {value!r} is not a log format flowpilot writes "
            f"(known: {', '.join(LOG_FORMATS)})"
        )
    return value
