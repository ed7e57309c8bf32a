"""The ids a log line is about: which run, which step, which try.

The engine sets them for the span of a run's turn or a step's try (``log_fields``);
the log formatter reads them (``current_log_fields``), so a line logged anywhere below
— a tool's HTTP client, the rate limiter, the LLM client — carries the ids of the run
and step it was logged for, without each call passing them along. A context variable:
each thread (and each asyncio task) has its own, and a value set for a try is gone when
the try ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_EMPTY: Mapping[str, Any] = {}
_FIELDS: ContextVar[Mapping[str, Any]] = ContextVar("flowpilot_log_fields", default=_EMPTY)


@contextmanager
def log_fields(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (None values left out) to every line logged in this block."""
    token = _FIELDS.set({**_FIELDS.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _FIELDS.reset(token)


def current_log_fields() -> Mapping[str, Any]:
    return _FIELDS.get()
