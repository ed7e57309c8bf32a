"""The engine's hot statements on PostgreSQL: bound parameters, prepared once.

Django's PostgreSQL backend (psycopg 3) quotes every value into the statement's text
in Python by default (client-side binding), so the server parses and plans every
statement anew. The few statements the engine sends at every step or run — a turn's
row writes, a new run's rows, the tool table's state, the breaker hosts — go through
``bound_cursor`` instead: a server-side binding cursor, so the values travel as
parameters, and a statement text sent ``prepare_threshold`` times on a connection
(``DATABASE_PREPARE_THRESHOLD``, 5 by default; 0 turns preparing off) is prepared
there and from then on only executed. On this machine that took a chain step's turn
from 0.72 ms to 0.32 ms of the server's CPU (``docs/benchmarks.md``).

The cursor is made by Django like any other (``CONN_HEALTH_CHECKS``' check before a
reused connection's first statement, the time zone of its timestamps, ``execute_wrapper``,
query logging and the database error translation all apply): only its class differs.
Every other query of the application keeps Django's default cursor. Elsewhere than on
PostgreSQL, ``bound_cursor`` is Django's own cursor.
"""

from __future__ import annotations

import functools
from typing import Any


def bound_cursor(db: Any) -> Any:
    """A cursor of connection ``db`` for a hot statement: server-side binding on
    PostgreSQL (see the module doc), else ``db.cursor()``."""
    if db.vendor != "postgresql":
        return db.cursor()
    # Django's ``cursor()`` makes the driver's cursor with the connection's cursor
    # factory: that factory is the binding class for this one cursor. The health check
    # and the connection come first, so the factory is set on the connection used.
    db.close_if_health_check_failed()
    db.ensure_connection()
    raw = db.connection
    plain = raw.cursor_factory
    raw.cursor_factory = _binding_cursor()
    try:
        return db.cursor()
    finally:
        raw.cursor_factory = plain


@functools.cache
def _binding_cursor() -> Any:
    """Django's server-side binding cursor class (imported only on PostgreSQL), made to
    keep the statement where Django's query log reads it: psycopg leaves it unset when
    it executes a prepared statement, so a logged or captured query (``DEBUG``,
    ``CaptureQueriesContext``) would read as None."""
    from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
        ServerBindingCursor,
    )

    class BoundCursor(ServerBindingCursor):
        def _send_query_prepared(self, name: bytes, pgq: Any, **kwargs: Any) -> None:
            self._query = pgq
            super()._send_query_prepared(name, pgq, **kwargs)

    return BoundCursor
