"""An http tool's calls under its rate limit and its API's rate headers, on loopback:
the key of each kind, the wait recorded on the request, a 429's Retry-After and a
remaining of 0 pausing the next call, a long wait handed back as ``rate_limit_wait``."""

from __future__ import annotations

import pytest

from tests.tools.conftest import Reply, make_spec
from tests.tools.ratelimit.conftest import Clock
from tools.breaker.core import breaker_host
from tools.errors import RateLimitWait, ToolRateLimited
from tools.http.pacing import pace_key
from tools.http.request import PreparedRequest
from tools.http_client import call_http_tool
from tools.models import RateLimitSlot
from tools.ratelimit.core import Pacer
from tools.ratelimit.db_store import DatabasePaceStore
from tools.spec import ToolSpec

pytestmark = pytest.mark.django_db


def limited(key: str = "host", **limit) -> ToolSpec:
    spec = make_spec("/items/{{account}}", auth={"type": "bearer", "token": "{{env.TOKEN}}"})
    data = spec.stored()
    data["input_schema"] = {"type": "object", "properties": {"account": {"type": "string"}}}
    data["rate_limit"] = {"requests": 10, "per": 1, "key": key, **limit}
    return ToolSpec.model_validate(data)


def prepared(url: str = "https://api.example.com/x", **fields) -> PreparedRequest:
    return PreparedRequest(method="GET", url=url, **fields)


def test_the_key_of_each_kind():
    host = "host:api.example.com:443"
    assert pace_key(make_spec(), prepared(), {}) == host  # no limit: the host, for pauses
    assert pace_key(limited("host"), prepared(), {}) == host
    assert pace_key(limited("tool"), prepared(), {}) == "tool:t"
    by_input = pace_key(limited("$input.account"), prepared(), {"account": "acme"})
    assert by_input == 'input:account="acme"@api.example.com:443'
    carried = prepared(
        headers={"Authorization": "Bearer s3cret"}, credential_headers={"authorization"}
    )
    key = pace_key(limited("credential"), carried, {})
    assert key.startswith("credential:")
    assert "s3cret" not in key
    other = prepared(
        headers={"Authorization": "Bearer other"}, credential_headers={"authorization"}
    )
    assert pace_key(limited("credential"), other, {}) != key
    assert pace_key(limited("credential"), prepared(), {}) == host  # nothing carried
    named = limited("credential").stored()
    named["http"]["auth"] = {"credential": "crm"}
    assert pace_key(ToolSpec.model_validate(named), carried, {}) == "credential:crm"


@pytest.fixture
def pacer() -> Pacer:
    RateLimitSlot.objects.all().delete()
    clock = Clock()
    return Pacer(store=DatabasePaceStore(), max_sleep=1.0, clock=clock, sleep=clock.sleep)


def test_calls_wait_their_slot_and_the_wait_is_recorded(server, make_ctx, pacer):
    ctx = make_ctx(env={"BASE": server.url, "TOKEN": "t"}, pacer=pacer)
    results = [call_http_tool(limited(), {"account": "a"}, ctx) for _ in range(3)]
    assert len(server.requests) == 3
    assert [r.request.get("rate_limit_wait") for r in results] == [None, 0.1, 0.1]


def test_a_long_wait_sends_nothing(server, make_ctx, pacer):
    ctx = make_ctx(env={"BASE": server.url, "TOKEN": "t"}, pacer=pacer)
    slow = limited(per=60)  # 10 a minute: 6 s apart, past max_sleep
    call_http_tool(slow, {"account": "a"}, ctx)
    with pytest.raises(RateLimitWait) as held:
        call_http_tool(slow, {"account": "a"}, ctx)
    assert held.value.retry_after == pytest.approx(6.0)
    assert len(server.requests) == 1


def test_a_429s_retry_after_pauses_every_caller_of_the_host(server, make_ctx, pacer):
    ctx = make_ctx(env={"BASE": server.url, "TOKEN": "t"}, pacer=pacer)
    server.reply(Reply.json({"error": "slow down"}, 429, **{"Retry-After": "30"}))
    plain = make_spec("/items")  # no rate_limit: keyed by host
    with pytest.raises(ToolRateLimited):
        call_http_tool(plain, {}, ctx)
    server.reply(Reply.json({"ok": True}))
    with pytest.raises(RateLimitWait) as held:  # another tool, same host: held too
        call_http_tool(make_spec("/other", name="other"), {}, ctx)
    assert held.value.retry_after == pytest.approx(30.0)
    assert len(server.requests) == 1
    key = f"host:{breaker_host(server.url)}"
    assert DatabasePaceStore().paused_until(key) == pytest.approx(pacer.clock() + 30)


def test_remaining_zero_pauses_until_the_reset(server, make_ctx, pacer):
    ctx = make_ctx(env={"BASE": server.url, "TOKEN": "t"}, pacer=pacer)
    server.reply(
        Reply.json({"ok": True}, **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "0.5"})
    )
    plain = make_spec("/items")
    call_http_tool(plain, {}, ctx)
    server.reply(Reply.json({"ok": True}))
    second = call_http_tool(plain, {}, ctx)  # slept 0.5 s in place first
    assert second.request["rate_limit_wait"] == pytest.approx(0.5)


def test_without_a_pacer_nothing_changes(server, make_ctx):
    ctx = make_ctx(env={"BASE": server.url, "TOKEN": "t"})
    result = call_http_tool(limited(), {"account": "a"}, ctx)
    assert "rate_limit_wait" not in result.request
