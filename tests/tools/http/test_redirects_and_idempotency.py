"""Redirects (opt-in, credentials stay home) and non-idempotent calls (never blindly
repeated), against loopback servers and httpbin."""

import pytest

from tests.tools.conftest import LoopbackServer, Reply, make_spec
from tools.errors import ToolHTTPError, ToolOutcomeUnknown, ToolRateLimited, ToolUnreachable
from tools.http_client import call_http_tool

KEY = "key-0123456789"
TOKEN = "bearer-0123456789"


@pytest.fixture
def other():
    srv = LoopbackServer()
    yield srv
    srv.close()


def test_redirects_are_not_followed_by_default(server, other, ctx_for):
    server.reply(Reply(status=302, headers={"Location": other.url + "/landing"}))
    with pytest.raises(ToolHTTPError, match="returned HTTP 302") as info:
        call_http_tool(make_spec(), {}, ctx_for())
    assert info.value.retryable is False
    assert other.requests == []


def test_a_followed_redirect_to_another_origin_carries_no_credentials(server, other, ctx_for):
    server.reply(Reply(status=302, headers={"Location": other.url + "/landing?x=1"}))
    spec = make_spec(
        "/start",
        auth={"type": "api_key", "in": "query", "name": "api_key", "value": "{{env.QKEY}}"},
        headers={"Authorization": "Bearer {{env.TOKEN}}"},
        http_follow_redirects=True,
    )
    result = call_http_tool(spec, {}, ctx_for(QKEY=KEY, TOKEN=TOKEN))
    assert result.output == {"ok": True}
    assert dict(server.requests[0].query) == {"api_key": KEY}
    landed = other.requests[0]
    assert landed.raw_path == "/landing?x=1"
    assert landed.header("authorization") is None
    assert result.request["url"] == other.url + "/landing?x=1"


def test_header_credentials_stay_on_a_same_origin_redirect(server, ctx_for):
    server.handler = lambda req: (
        Reply(status=307, headers={"Location": "/final"})
        if req.path == "/start"
        else Reply.json({"at": req.path})
    )
    spec = make_spec(
        "/start",
        method="POST",
        body={"n": 1},
        auth={"type": "bearer", "token": "{{env.TOKEN}}"},
        http_follow_redirects=True,
    )
    assert call_http_tool(spec, {}, ctx_for(TOKEN=TOKEN)).output == {"at": "/final"}
    final = server.requests[1]
    assert (final.method, final.json()) == ("POST", {"n": 1})
    assert final.header("authorization") == f"Bearer {TOKEN}"


def test_httpbin_redirect_to_is_followed_only_when_opted_in(httpbin, make_ctx):
    ctx = make_ctx(env={"BASE": httpbin})
    query = {"url": "/get?landed=yes", "status_code": 303}
    follows = make_spec("/redirect-to", query=query, http_follow_redirects=True)
    assert call_http_tool(follows, {}, ctx).output["args"] == {"landed": "yes"}
    with pytest.raises(ToolHTTPError, match="303"):
        call_http_tool(make_spec("/redirect-to", query=query), {}, ctx)


def test_httpbin_basic_auth(httpbin, make_ctx):
    spec = make_spec(
        "/basic-auth/alice/{{env.PASSWORD}}",
        auth={"type": "basic", "username": "alice", "password": "{{env.PASSWORD}}"},
        extract={"user": "user", "authenticated": "authenticated"},
    )
    ctx = make_ctx(env={"BASE": httpbin, "PASSWORD": "pa55word"})
    assert call_http_tool(spec, {}, ctx).output == {"user": "alice", "authenticated": True}


def post_spec(**overrides):
    return make_spec(method="POST", body={"n": 1}, idempotent=False, **overrides)


def test_a_timed_out_non_idempotent_post_is_outcome_unknown(server, ctx_for):
    server.reply(Reply(delay=1.0))
    with pytest.raises(ToolOutcomeUnknown, match="not idempotent") as info:
        call_http_tool(post_spec(), {}, ctx_for(timeout=0.3))
    assert info.value.retryable is False
    assert "no answer within 0.3s" in info.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "headers"), [(500, {}), (502, {}), (503, {})])
def test_a_5xx_to_a_non_idempotent_post_is_outcome_unknown(server, ctx_for, status, headers):
    server.reply(Reply.json({"m": "x"}, status=status, **headers))
    with pytest.raises(ToolOutcomeUnknown):
        call_http_tool(post_spec(), {}, ctx_for())


def test_not_processed_answers_stay_retryable_for_a_non_idempotent_post(server, ctx_for):
    server.reply(Reply.json({}, status=503, **{"Retry-After": "1"}))
    with pytest.raises(ToolHTTPError) as info:
        call_http_tool(post_spec(), {}, ctx_for())
    assert (info.value.code, info.value.retryable) == ("http_error", True)
    server.reply(Reply.json({}, status=429))
    with pytest.raises(ToolRateLimited):
        call_http_tool(post_spec(), {}, ctx_for())


def test_a_refused_connection_stays_retryable_for_a_non_idempotent_post(closed_port, make_ctx):
    ctx = make_ctx(env={"BASE": f"http://127.0.0.1:{closed_port}"})
    with pytest.raises(ToolUnreachable) as info:
        call_http_tool(post_spec(), {}, ctx)
    assert info.value.retryable is True


def test_an_idempotent_tool_keeps_its_retryable_timeout(server, ctx_for):
    server.reply(Reply(delay=1.0))
    with pytest.raises(Exception) as info:
        call_http_tool(make_spec(method="PUT", body={}), {}, ctx_for(timeout=0.3))
    assert (info.value.code, info.value.retryable) == ("tool_timeout", True)
