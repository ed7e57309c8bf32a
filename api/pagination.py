"""Lists a page at a time: ``limit`` and ``offset``, with ``limit`` bounded.

DRF's ``LimitOffsetPagination`` takes any positive ``limit``; one beyond 64 bits
reaches the database as an SQL ``LIMIT`` that SQLite ("datatype mismatch") and
PostgreSQL ("bigint out of range") refuse — a 500. Here a ``limit`` over
``MAX_LIMIT`` is read as ``MAX_LIMIT``, as DRF reads a bad one as the default. (An
``offset`` past the row count answers an empty page before any row is read.)
"""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
