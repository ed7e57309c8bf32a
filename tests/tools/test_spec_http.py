"""tools.spec_http: how an http tool reads its response — extract paths (`$status`,
`$headers.<name>`, body dot-paths), the success condition of APIs that answer errors
with 200, and pagination settings checked per style."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from tools.paths import PathError
from tools.spec_http import Pagination, SuccessCondition, parse_extract_path


def test_extract_paths_read_the_status_headers_case_insensitively_and_the_body():
    assert parse_extract_path("$status") == ("$status",)
    assert parse_extract_path("$headers.X-RateLimit-Remaining") == (
        "$headers",
        "x-ratelimit-remaining",
    )
    assert parse_extract_path("data.items.0.id") == ("data", "items", "0", "id")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("$status.code", "$status has no fields"),
        ("$headers", "name a header"),
        ("$body.x", "only $status and $headers.<name> start with '$'"),
    ],
)
def test_bad_extract_paths_say_why(text, message):
    with pytest.raises(PathError, match=re.escape(message)):
        parse_extract_path(text)


def test_a_success_condition_tests_one_value_or_a_set():
    assert SuccessCondition(path="status", equals="ok").accepts("ok")
    assert not SuccessCondition(path="status", equals="ok").accepts("error")
    assert SuccessCondition.model_validate({"path": "status", "in": ["ok", "warn"]}).accepts("warn")
    assert SuccessCondition(path="status", equals=None).accepts(None)  # `equals: null` counts


@pytest.mark.parametrize(
    "data",
    [{"path": "status"}, {"path": "status", "equals": "ok", "in": ["ok"]}],
)
def test_a_success_condition_needs_exactly_one_test(data):
    with pytest.raises(ValidationError, match="exactly one of 'equals' or 'in'"):
        SuccessCondition.model_validate(data)


def test_pagination_starts_at_page_one_or_offset_zero_unless_told():
    assert Pagination(style="page").first == 1
    assert Pagination(style="offset").first == 0
    assert Pagination(style="page", start=0).first == 0


def test_cursor_settings_belong_to_the_cursor_style_only():
    Pagination(style="cursor", cursor_path="next", cursor_param="after")
    with pytest.raises(ValidationError, match="needs cursor_path and cursor_param"):
        Pagination(style="cursor", cursor_path="next")
    with pytest.raises(ValidationError, match="do not apply to style 'page'"):
        Pagination(style="page", cursor_param="after")
