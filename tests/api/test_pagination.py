"""api.pagination: ``limit`` and ``offset`` read as bounded whole numbers, or a 400."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from api.pagination import MAX_LIMIT, BoundedLimitOffsetPagination, whole_number


def request(query: str) -> Request:
    return Request(APIRequestFactory().get(f"/api/v1/runs/?{query}"))


@pytest.mark.parametrize(
    ("query", "limit", "offset"),
    [
        ("", 50, 0),
        ("limit=7&offset=3", 7, 3),
        ("limit=0007&offset=000", 7, 0),
        (f"limit={'9' * 5000}&offset={'9' * 5000}", MAX_LIMIT, 2**63 - 1),
    ],
)
def test_limit_and_offset_are_bounded_whole_numbers(query, limit, offset):
    paginator = BoundedLimitOffsetPagination()

    assert paginator.get_limit(request(query)) == limit
    assert paginator.get_offset(request(query)) == offset


@pytest.mark.parametrize("value", ["null", "", "-1", "1.5", "%2B3", "٣", "%20"])
def test_anything_else_is_refused_naming_the_parameter(value):
    with pytest.raises(ValidationError) as refused:
        whole_number(request(f"offset={value}"), "offset", minimum=0, maximum=10)

    assert list(refused.value.detail) == ["offset"]


def test_a_limit_of_zero_is_refused_and_the_schema_says_the_minimums():
    with pytest.raises(ValidationError):
        BoundedLimitOffsetPagination().get_limit(request("limit=0"))

    parameters = BoundedLimitOffsetPagination().get_schema_operation_parameters(view=None)

    assert {p["name"]: p["schema"]["minimum"] for p in parameters} == {"limit": 1, "offset": 0}
