"""Lists a page at a time: ``limit`` and ``offset``, with ``limit`` bounded.

DRF's ``LimitOffsetPagination`` takes any positive ``limit``; one beyond 64 bits
reaches the database as an SQL ``LIMIT`` that SQLite ("datatype mismatch") and
PostgreSQL ("bigint out of range") refuse — a 500. Here a ``limit`` over
``MAX_LIMIT`` is read as ``MAX_LIMIT``. DRF also reads a ``limit`` or ``offset`` that
is not a number (``offset=null``) as the default; here it is a 400 naming the
parameter, like a bad filter value: ``limit`` is a whole number from 1, ``offset`` one
from 0. (An ``offset`` past the row count answers an empty page before any row is
read.)
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_LIMIT = 1000
MAX_OFFSET = 2**63 - 1  # beyond it no database takes the number


def whole_number(request: Request, name: str, *, minimum: int, maximum: int) -> int | None:
    """The query parameter ``name`` as a whole number within bounds; None when absent."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise ValidationError({name: [f"must be a whole number from {minimum}"]})
    digits = text.lstrip("0") or "0"
    value = maximum if len(digits) > len(str(maximum)) else min(int(digits), maximum)
    if value < minimum:
        raise ValidationError({name: [f"must be a whole number from {minimum}"]})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        limit = whole_number(request, self.limit_query_param, minimum=1, maximum=MAX_LIMIT)
        return self.default_limit if limit is None else limit

    def get_offset(self, request: Request) -> int:
        offset = whole_number(request, self.offset_query_param, minimum=0, maximum=MAX_OFFSET)
        return offset or 0

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        minimum = {self.limit_query_param: 1, self.offset_query_param: 0}
        for parameter in parameters:
            parameter["schema"]["minimum"] = minimum[parameter["name"]]
        return parameters
