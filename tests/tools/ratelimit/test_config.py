"""The ``rate_limit:`` key: accepted forms, hostile values refused naming field and line,
and its place in the tool's hash."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tools.errors import ToolConfigError
from tools.loader import load_tool_text
from tools.pins import _what_changed, tool_definition_hash
from tools.ratelimit.config import RateLimitConfig
from tools.spec import ToolSpec

TOOL = """
name: get_order
request:
  method: GET
  url: https://api.example.com/orders/{{{{id}}}}
inputs:
  type: object
  properties:
    id: {{type: string}}
    account: {{type: string}}
rate_limit: {limit}
"""


def test_defaults_and_derived_values():
    limit = RateLimitConfig(requests=10)
    assert (limit.per, limit.burst, limit.key, limit.key_kind) == (1.0, None, "host", "host")
    assert limit.interval == 0.1
    assert limit.rate == 10
    account = RateLimitConfig(requests=100, per=60, burst=5, key="$input.account")
    assert (account.key_kind, account.input_name) == ("input", "account")
    assert account.describe() == "100 per 60 s by $input.account, burst 5"


def test_loaded_from_a_tool_file():
    spec = load_tool_text(TOOL.format(limit="{requests: 5, per: 2, key: $input.account}"))[0]
    assert spec.rate_limit == RateLimitConfig(requests=5, per=2, key="$input.account")


@pytest.mark.parametrize(
    ("limit", "field", "message"),
    [
        ("{requests: -1}", "rate_limit.requests", "greater than or equal to 1"),
        ("{requests: 0}", "rate_limit.requests", "greater than or equal to 1"),
        ("{requests: 5, per: 0}", "rate_limit.per", "greater than 0"),
        ("{requests: 5, per: -3}", "rate_limit.per", "greater than 0"),
        ("{requests: 5, per: 100000}", "rate_limit.per", "less than or equal to 86400"),
        ("{requests: 5, burst: 0}", "rate_limit.burst", "greater than or equal to 1"),
        ("{requests: 5, burst: 6}", "rate_limit", "burst (6) cannot exceed requests (5)"),
        ("{requests: 5, key: region}", "rate_limit.key", "unknown rate limit key 'region'"),
        ("{requests: 5, key: $input}", "rate_limit.key", "not an input reference"),
        ("{requests: 5, key: $input.a.b}", "rate_limit.key", "not an input reference"),
        ("{requests: 5, key: $input.acct}", "rate_limit.key", "$input.acct is not an input"),
        ("{requests: 5, rps: 3}", "rate_limit.rps", "unknown key"),
        ("{requests: ten}", "rate_limit.requests", "valid integer"),
        ("10", "rate_limit", "valid dictionary"),
    ],
)
def test_hostile_values_name_the_field_and_the_line(limit, field, message):
    with pytest.raises(ToolConfigError) as refused:
        load_tool_text(TOOL.format(limit=limit), source="orders.yaml")
    text = str(refused.value)
    assert f"field {field}:" in text
    assert message in text
    assert "orders.yaml:" in text  # the line of the file


def test_a_rate_limit_is_for_http_tools_only():
    with pytest.raises(ValidationError, match="a builtin tool has none"):
        ToolSpec(name="x", kind="builtin", rate_limit={"requests": 1, "key": "tool"})


def test_the_limit_is_part_of_the_hash_and_named_when_it_changed():
    base = load_tool_text(TOOL.format(limit="{requests: 5}"))[0]
    faster = load_tool_text(TOOL.format(limit="{requests: 50}"))[0]
    assert tool_definition_hash(base) != tool_definition_hash(faster)
    assert _what_changed(base.stored(), faster.stored()) == "its rate limit changed"
