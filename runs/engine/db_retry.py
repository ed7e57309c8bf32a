"""Recording an outcome through a database blip: bounded retries, reconnecting between.

A step's call may have done something that must not be done twice (a POST). When
writing its outcome fails because the database connection broke (a restart, a
failover, ``pg_terminate_backend``), the process that made the call is the only one
that knows the result: it tries again, on a new connection, before anything else may
take the step back. The Celery task keeps its heartbeat running meanwhile, so the
sweeper sees a live worker; the write stays conditional on the task's claim, so a
retry after a write that did commit (the acknowledgement was lost) changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

logger = logging.getLogger("flowpilot.engine")

T = TypeVar("T")

TRANSIENT = (OperationalError, InterfaceError)


def with_db_retries(
    write: Callable[[], T],
    *,
    what: str,
    tries: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``write()``, tried again after a transient database error, on a fresh connection.

    At most ``tries`` times (``FLOWPILOT_OUTCOME_WRITE_TRIES``), waiting 0.1 s, 0.2 s, …
    (at most 5 s) between; the last error is raised. ``write`` must be safe to repeat:
    its own transaction, conditional on the caller's claim.
    """
    limit = tries if tries is not None else settings.FLOWPILOT_OUTCOME_WRITE_TRIES
    for number in range(1, limit + 1):
        try:
            return write()
        except TRANSIENT as exc:
            if number >= limit or connection.in_atomic_block:
                raise
            delay = min(0.1 * 2 ** (number - 1), 5.0)
            logger.warning(
                "%s: database error (%s), try %s of %s again in %.1f s",
                what, type(exc).__name__, number + 1, limit, delay,
            )  # fmt: skip
            reconnect()
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def reconnect() -> None:
    """Drop this thread's broken connection; the next query opens a new one."""
    close_old_connections()
    connection.close()
