"""SQLite's shared cache (the in-memory database of the tests) refuses a statement at
once while another connection writes the table, where other databases wait: a statement
made from a step thread beside the run's own writes is tried again for a moment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

T = TypeVar("T")


def shared_cache_retry(statement: Callable[[], T]) -> T:
    """``statement``, tried again for up to a second while SQLite answers "table is
    locked": a shared-cache database (the in-memory one of the tests) refuses a
    statement at once, rather than waiting, while another connection writes the table.
    Other databases wait on their own; their errors pass through."""
    for _ in range(100):
        try:
            return statement()
        except OperationalError as exc:
            if "table is locked" not in str(exc):
                raise
            time.sleep(0.01)
    return statement()
