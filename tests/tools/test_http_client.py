"""call_http_tool against a real HTTP server on loopback; asserts what the server received."""

import base64
import gzip
import tracemalloc
import zlib

import httpx
import pytest

from tests.tools.conftest import Reply, make_spec
from tools.errors import (
    TemplateError,
    ToolAuthFailed,
    ToolConfigError,
    ToolHTTPError,
    ToolRateLimited,
    ToolResponseInvalid,
    ToolResponseTooLarge,
    ToolTimeout,
    ToolUnreachable,
)
from tools.http_client import call_http_tool, parse_body, retry_after_seconds
from tools.spec import ToolSpec

SECRET = "sk-live-0123456789abcdef"




@pytest.mark.parametrize(
    ("owner", "expected_path"),
    [
        ("../admin", "/repos/..%2Fadmin/info"),
        ("evil.com/x", "/repos/evil.com%2Fx/info"),
        ("a?b#c", "/repos/a%3Fb%23c/info"),
        ("@evil", "/repos/%40evil/info"),
        ("octo cat", "/repos/octo%20cat/info"),
    ],
)
def test_hostile_path_values_stay_in_one_segment(server, ctx_for, owner, expected_path):
    result = call_http_tool(make_spec("/repos/{{owner}}/info"), {"owner": owner}, ctx_for())
    assert server.requests[-1].raw_path == expected_path
    assert result.request["status"] == 200
    assert result.request["url"].startswith(server.url)


@pytest.mark.parametrize("walker", [".", ".."])
def test_dot_segments_are_refused_before_any_request(server, ctx_for, walker):
    with pytest.raises(TemplateError, match="would walk the path"):
        call_http_tool(make_spec("/repos/{{owner}}/info"), {"owner": walker}, ctx_for())
    assert server.requests == []


def test_query_rendering_drops_none_and_repeats_lists(server, ctx_for):
    spec = make_spec(
        "/search",
        query={"q": "{{q}}", "opt": "{{missing}}", "tag": "{{tags}}", "flag": True, "n": 5},
    )
    call_http_tool(spec, {"q": "a b&c", "tags": ["x", "y"]}, ctx_for())
    assert server.requests[-1].query == [
        ("q", "a b&c"), ("tag", "x"), ("tag", "y"), ("flag", "true"), ("n", "5"),
    ]  # fmt: skip


def test_headers_body_and_idempotency_key(server, ctx_for):
    spec = make_spec(
        "/hook",
        method="POST",
        headers={"X-Trace": "{{trace}}", "X-Empty": "{{nothing}}"},
        body="{{payload}}",
        idempotency_header="Idempotency-Key",
    )
    payload = {"items": [1, 2], "nested": {"ok": True}}
    ctx = ctx_for(idempotency_key="run-7:notify")
    call_http_tool(spec, {"payload": payload, "trace": "t-1"}, ctx)
    received = server.requests[-1]
    assert received.method == "POST"
    assert received.json() == payload
    assert received.header("content-type") == "application/json"
    assert received.header("x-trace") == "t-1"
    assert received.header("x-empty") is None
    assert received.header("idempotency-key") == "run-7:notify"


def test_no_idempotency_header_without_key_and_no_body_when_none(server, ctx_for):
    spec = make_spec(method="POST", body="{{payload}}", idempotency_header="Idempotency-Key")
    call_http_tool(spec, {}, ctx_for())
    received = server.requests[-1]
    assert received.header("idempotency-key") is None
    assert received.body == b""


def test_bearer_auth_sent_and_redacted(server, ctx_for):
    spec = make_spec(auth={"type": "bearer", "token": "{{env.TOKEN}}"})
    ctx = ctx_for(TOKEN=SECRET)
    result = call_http_tool(spec, {}, ctx)
    assert server.requests[-1].header("authorization") == f"Bearer {SECRET}"
    assert result.request["headers"]["Authorization"] == "***"
    assert SECRET not in repr(result)


def test_bearer_skipped_when_token_empty(server, ctx_for):
    spec = make_spec(auth={"type": "bearer", "token": "{{env.TOKEN}}"})
    call_http_tool(spec, {}, ctx_for())
    assert server.requests[-1].header("authorization") is None


def test_api_key_in_header_and_skipped_when_empty(server, ctx_for):
    spec = make_spec(auth={"type": "api_key", "name": "X-API-Key", "value": "{{env.KEY}}"})
    call_http_tool(spec, {}, ctx_for(KEY=SECRET))
    assert server.requests[-1].header("x-api-key") == SECRET
    call_http_tool(spec, {}, ctx_for(KEY=""))
    assert server.requests[-1].header("x-api-key") is None


def test_api_key_in_query_is_redacted_from_recorded_url(server, ctx_for):
    spec = make_spec(
        "/data", auth={"type": "api_key", "in": "query", "name": "apikey", "value": "{{env.KEY}}"}
    )
    secret = "p@ss/with+chars"
    result = call_http_tool(spec, {}, ctx_for(KEY=secret))
    assert ("apikey", secret) in server.requests[-1].query
    assert result.request["url"] == f"{server.url}/data?apikey=***"


def test_basic_auth(server, ctx_for):
    spec = make_spec(auth={"type": "basic", "username": "me", "password": "{{env.PW}}"})
    result = call_http_tool(spec, {}, ctx_for(PW=SECRET))
    expected = base64.b64encode(f"me:{SECRET}".encode()).decode()
    assert server.requests[-1].header("authorization") == f"Basic {expected}"
    assert result.request["headers"]["Authorization"] == "***"
    call_http_tool(spec, {}, ctx_for(PW=""))
    assert (
        server.requests[-1].header("authorization") == "Basic " + base64.b64encode(b"me:").decode()
    )


def test_list_response_wrapped_and_extracted(server, ctx_for):
    server.reply(Reply.json([{"name": {"common": "Peru"}, "capital": ["Lima"]}]))
    spec = make_spec(
        extract={
            "name": "items.0.name.common",
            "capital": "items.0.capital.0",
            "n": "count",
            "missing": "items.3.name",
        }
    )
    result = call_http_tool(spec, {}, ctx_for())
    assert result.output == {"name": "Peru", "capital": "Lima", "n": 1, "missing": None}
    server.reply(Reply.json([1, 2]))
    assert call_http_tool(make_spec(), {}, ctx_for()).output == {"items": [1, 2], "count": 2}


def test_non_json_empty_and_scalar_bodies(server, ctx_for):
    server.reply(Reply(body=b"plain words", headers={"Content-Type": "text/plain"}))
    assert call_http_tool(make_spec(), {}, ctx_for()).output == {"text": "plain words"}
    server.reply(Reply(status=204))
    assert call_http_tool(make_spec(), {}, ctx_for()).output == {}
    server.reply(Reply.json(42))
    assert call_http_tool(make_spec(), {}, ctx_for()).output == {"value": 42}


def test_invalid_json_with_extraction_is_an_error(server, ctx_for):
    server.reply(Reply(body=b"{broken", headers={"Content-Type": "application/json"}))
    assert call_http_tool(make_spec(), {}, ctx_for()).output == {"text": "{broken"}
    with pytest.raises(ToolResponseInvalid):
        call_http_tool(make_spec(extract={"a": "a"}), {}, ctx_for())


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [
        (400, ToolHTTPError, False),
        (401, ToolAuthFailed, False),
        (403, ToolAuthFailed, False),
        (404, ToolHTTPError, False),
        (429, ToolRateLimited, True),
        (500, ToolHTTPError, True),
        (503, ToolHTTPError, True),
    ],
)
def test_status_classification(server, ctx_for, status, error, retryable):
    server.reply(Reply.json({"message": f"status {status}"}, status=status, **{"Retry-After": "7"}))
    with pytest.raises(error) as info:
        call_http_tool(make_spec("/things/{{id}}"), {"id": 5}, ctx_for())
    exc = info.value
    assert type(exc) is error
    assert exc.retryable is retryable
    assert exc.status == status
    assert f"GET {server.url}/things/5 returned HTTP {status}" in exc.message
    assert f"status {status}" in exc.message
    assert exc.request["status"] == status
    if status == 429:
        assert exc.retry_after == 7.0


def test_connection_refused_is_unreachable(closed_port, make_ctx):
    ctx = make_ctx(env={"BASE": f"http://127.0.0.1:{closed_port}"})
    with pytest.raises(ToolUnreachable) as info:
        call_http_tool(make_spec(), {}, ctx)
    assert info.value.retryable is True
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert info.value.request["status"] is None


def test_slow_server_times_out(server, ctx_for):
    server.reply(Reply(delay=3.0))
    with pytest.raises(ToolTimeout) as info:
        call_http_tool(make_spec(), {}, ctx_for(timeout=0.2))
    assert info.value.retryable is True
    assert "0.2s" in info.value.message
    assert isinstance(info.value.__cause__, httpx.TransportError)


def test_spec_timeout_used_without_ctx_override(server, ctx_for):
    server.reply(Reply(delay=3.0))
    spec = ToolSpec(
        name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/"}, "timeout": 0.2}
    )
    with pytest.raises(ToolTimeout):
        call_http_tool(spec, {}, ctx_for())


FIFTY_MB = 50 * 1024 * 1024
CHUNK = b"x" * 65536


def _huge_reply() -> Reply:
    return Reply(
        body=(CHUNK for _ in range(FIFTY_MB // len(CHUNK))),
        length=FIFTY_MB,
        headers={"Content-Type": "text/plain"},
    )


def test_huge_response_is_cut_at_the_limit(server, ctx_for):
    server.reply(_huge_reply())
    result = call_http_tool(make_spec(), {}, ctx_for(max_response_bytes=100_000))
    assert result.truncated is True
    assert result.output["truncated"] is True
    assert result.output["limit_bytes"] == 100_000
    assert len(result.output["text"]) == 100_000
    assert server.done.wait(10)
    assert server.bytes_sent < FIFTY_MB  # the client stopped reading: memory stayed bounded


def test_huge_response_with_extraction_is_an_error(server, ctx_for):
    server.reply(_huge_reply())
    with pytest.raises(ToolResponseTooLarge, match="100000 byte limit"):
        call_http_tool(make_spec(extract={"a": "a"}), {}, ctx_for(max_response_bytes=100_000))


def test_response_exactly_at_limit_is_not_truncated(server, ctx_for):
    server.reply(Reply(body=b"y" * 1000, headers={"Content-Type": "text/plain"}))
    result = call_http_tool(make_spec(), {}, ctx_for(max_response_bytes=1000))
    assert result.truncated is False
    assert result.output == {"text": "y" * 1000}


def test_secret_never_in_error_message_or_request_info(server, ctx_for):
    server.handler = lambda req: Reply.json(
        {"error": f"bad token {req.header('authorization')} for key {dict(req.query)}"},
        status=401,
    )
    spec = make_spec(
        "/p/{{env.PATH_SECRET}}",
        auth={"type": "bearer", "token": "{{env.TOKEN}}"},
        query={"k": "{{env.QKEY}}"},
        secret_query=["k"],
        secret_env=["PATH_SECRET"],
    )
    ctx = ctx_for(TOKEN=SECRET, QKEY="query-secret-42", PATH_SECRET="path-secret-99")
    with pytest.raises(ToolAuthFailed) as info:
        call_http_tool(spec, {}, ctx)
    text = info.value.message + repr(info.value.request) + repr(info.value.as_dict())
    for secret in (SECRET, "query-secret-42", "path-secret-99"):
        assert secret not in text
    assert "bad token Bearer ***" in info.value.message
    assert info.value.request["url"] == f"{server.url}/p/***?k=***"


def test_error_body_is_capped(server, ctx_for):
    server.reply(Reply(status=500, body=b"e" * 5000))
    with pytest.raises(ToolHTTPError) as info:
        call_http_tool(make_spec(), {}, ctx_for())
    assert info.value.message.count("e" * 500) == 1
    assert "e" * 501 not in info.value.message


def test_echoed_secret_reaches_the_output_intact_and_is_masked_only_when_stored(
    server, ctx_for
):
    server.handler = lambda req: Reply.json({"seen": req.header("x-api-key"), "user": "u"})
    spec = make_spec(auth={"type": "api_key", "name": "X-API-Key", "value": "{{env.KEY}}"})
    ctx = ctx_for(KEY=SECRET)
    result = call_http_tool(spec, {}, ctx)
    assert result.output == {"seen": SECRET, "user": "u"}  # data in flight: never altered
    assert ctx.redactor.scrub(result.output) == {"seen": "***", "user": "u"}


def test_non_secret_env_configuration_is_never_registered_or_masked(server, ctx_for):
    server.handler = lambda req: Reply.json({"full_name": "pallets/flask", "user": "user"})
    spec = make_spec(
        "/orgs/{{env.GH_ORG}}",
        auth={"type": "basic", "username": "{{env.USER_NAME}}", "password": "{{env.PASSWORD}}"},
        headers={"X-Region": "{{env.REGION}}"},
    )
    ctx = ctx_for(GH_ORG="pallets", USER_NAME="user", REGION="eu-west-1", PASSWORD=SECRET)
    result = call_http_tool(spec, {}, ctx)
    assert result.output == {"full_name": "pallets/flask", "user": "user"}
    assert ctx.redactor.scrub(result.output) == result.output
    assert result.request["url"] == f"{server.url}/orgs/pallets"
    assert ctx.redactor.scrub_text(f"{server.url} pallets user {SECRET}") == (
        f"{server.url} pallets user ***"
    )


def test_declared_secret_headers_and_query_params_are_masked(server, ctx_for):
    server.handler = lambda req: Reply.json(
        {"echo": f"{req.header('x-session')} {dict(req.query)}"}, status=500
    )
    spec = make_spec(
        "/x",
        headers={"X-Session": "{{session}}", "Accept": "application/json"},
        query={"sig": "{{sig}}", "page": "2"},
        secret_headers=["x-session"],
        secret_query=["sig"],
    )
    ctx = ctx_for()
    with pytest.raises(ToolHTTPError) as info:
        call_http_tool(spec, {"session": "sess-7f3a9c", "sig": "sig-00aa11bb"}, ctx)
    text = info.value.message + repr(info.value.request)
    assert "sess-7f3a9c" not in text
    assert "sig-00aa11bb" not in text
    assert info.value.request["url"] == f"{server.url}/x?sig=***&page=2"
    assert info.value.request["headers"]["Accept"] == "application/json"


def test_base_url_is_configuration_unless_declared_secret(server, ctx_for):
    ctx = ctx_for()
    call_http_tool(make_spec(), {}, ctx)
    assert len(ctx.redactor) == 0
    hook = f"{server.url}/hooks/T0/secret-hook-path"
    plain = ToolSpec(name="hook", http={"base_url": "{{env.HOOK}}", "request": {"url": ""}})
    result = call_http_tool(plain, {}, ctx_for(HOOK=hook))
    assert result.request["url"] == hook  # a base URL with a path is still configuration
    server.handler = lambda req: Reply.json({"error": f"no hook at {req.raw_path}"}, status=404)
    secret = ToolSpec(
        name="hook",
        secret_env=["HOOK"],
        http={"base_url": "{{env.HOOK}}", "request": {"url": ""}},
    )
    ctx = ctx_for(HOOK=hook)
    with pytest.raises(ToolHTTPError) as info:
        call_http_tool(secret, {}, ctx)
    assert server.requests[-1].raw_path == "/hooks/T0/secret-hook-path"
    assert info.value.request["url"] == "***"
    assert "secret-hook-path" not in info.value.message  # the echoed path is masked too
    assert "no hook at ***" in info.value.message


def test_unset_base_url_is_a_config_error(make_ctx):
    with pytest.raises(ToolConfigError, match="not an http"):
        call_http_tool(make_spec(), {}, make_ctx(env={}))
    with pytest.raises(ToolConfigError, match="not an http"):
        call_http_tool(make_spec(), {}, make_ctx(env={"BASE": "relative-host"}))


def test_non_http_spec_rejected(make_ctx):
    with pytest.raises(ToolConfigError):
        call_http_tool(ToolSpec(name="b", kind="builtin"), {}, make_ctx())


def test_query_only_url_and_absolute_url(server, ctx_for):
    spec = make_spec("?a={{a}}")
    call_http_tool(spec, {"a": "1/2"}, ctx_for())
    assert server.requests[-1].raw_path == "/?a=1%2F2"
    absolute = ToolSpec(name="abs", http={"request": {"url": "{{env.BASE}}/v1/{{x}}"}})
    call_http_tool(absolute, {"x": "y"}, ctx_for())
    assert server.requests[-1].raw_path == "/v1/y"


def test_retry_after_parsing():
    assert retry_after_seconds(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after_seconds(httpx.Headers({})) is None
    assert retry_after_seconds(httpx.Headers({"Retry-After": "soon"})) is None
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert retry_after_seconds(httpx.Headers({"Retry-After": date}), now=1445412470) == 10.0


def test_parse_body_rules():
    assert parse_body("[1]", "") == {"items": [1], "count": 1}
    assert parse_body("  ", "application/json") == {}
    assert parse_body("nope", "application/json") == {"text": "nope"}
    assert parse_body("3", "text/plain") == {"text": "3"}


# --- compressed bodies and hostile header values -----------------------------------------


def _gzip_bomb(megabytes: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    return b"".join(compressor.compress(block) for _ in range(megabytes)) + compressor.flush()


def test_gzip_bomb_is_cut_at_the_limit_without_inflating_it(server, make_ctx):
    server.reply(Reply(body=_gzip_bomb(256), headers={"Content-Encoding": "gzip"}))
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    ctx = make_ctx(env={"BASE": server.url}, max_response_bytes=1000)
    tracemalloc.start()
    try:
        result = call_http_tool(spec, {}, ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.truncated
    assert result.output["text"] == "\0" * 1000
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize("extract", [None, {"a": "a"}])
def test_gzip_bomb_over_the_step_cap_fails_the_call_with_bounded_memory(server, make_ctx, extract):
    """With the step's cap below the response limit a bomb is refused (it never succeeds
    as a truncated text), with or without extraction, reading no more than the cap."""
    from tools.sizes import OutputTooLarge

    server.reply(Reply(body=_gzip_bomb(256), headers={"Content-Encoding": "gzip"}))
    http = {"base_url": "{{env.BASE}}", "request": {"url": "/x"}, "response_extract": extract or {}}
    spec = ToolSpec(name="t", http=http)
    ctx = make_ctx(env={"BASE": server.url}, max_output_bytes=1_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(OutputTooLarge) as caught:
            call_http_tool(spec, {}, ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.cap == 1_000_000
    assert "response of GET" in caught.value.what
    assert peak < 8 * 1024 * 1024


def test_a_body_under_the_step_cap_but_over_the_response_limit_is_still_cut_and_flagged(
    server, make_ctx
):
    server.reply(Reply(body=b"y" * 5000, headers={"Content-Type": "text/plain"}))
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    ctx = make_ctx(env={"BASE": server.url}, max_response_bytes=1000, max_output_bytes=10_000)
    result = call_http_tool(spec, {}, ctx)
    assert result.truncated
    assert result.output == {"text": "y" * 1000, "truncated": True, "limit_bytes": 1000}


@pytest.mark.parametrize(
    ("body", "charset", "flagged"),
    [
        (b"caf\xc3\xa9", "utf-8", False),
        (b"caf\xe9 \xff", "utf-8", True),
        (b"caf\xe9", "latin-1", False),
    ],
)
def test_a_body_not_valid_in_its_charset_is_flagged_on_the_call(
    server, make_ctx, body, charset, flagged
):
    server.reply(Reply(body=body, headers={"Content-Type": f"text/plain; charset={charset}"}))
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    result = call_http_tool(spec, {}, make_ctx(env={"BASE": server.url}))
    assert result.request is not None
    assert result.request.get("replaced_text", False) is flagged
    assert ("\ufffd" in result.output["text"]) is flagged


def test_gzip_body_within_the_limit_is_decoded(server, make_ctx):
    body = gzip.compress(b'{"a": 1}')
    server.reply(
        Reply(body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    )
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    result = call_http_tool(spec, {}, make_ctx(env={"BASE": server.url}))
    assert result.output == {"a": 1}
    assert not result.truncated


@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS])
def test_deflate_body_zlib_wrapped_or_raw_is_decoded(server, make_ctx, wbits):
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    body = compressor.compress(b'{"a": 2}') + compressor.flush()
    server.reply(Reply(body=body, headers={"Content-Encoding": "deflate"}))
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    assert call_http_tool(spec, {}, make_ctx(env={"BASE": server.url})).output == {"a": 2}


def test_malformed_gzip_body_is_an_invalid_response(server, make_ctx):
    server.reply(Reply(body=b"not gzip at all", headers={"Content-Encoding": "gzip"}))
    spec = ToolSpec(name="t", http={"base_url": "{{env.BASE}}", "request": {"url": "/x"}})
    with pytest.raises(ToolResponseInvalid):
        call_http_tool(spec, {}, make_ctx(env={"BASE": server.url}))


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\0b"])
def test_header_value_with_a_line_break_is_a_fatal_template_error(server, make_ctx, value):
    spec = ToolSpec(
        name="t",
        http={"base_url": "{{env.BASE}}", "request": {"url": "/x", "headers": {"X-U": "{{u}}"}}},
    )
    with pytest.raises(TemplateError, match="X-U") as caught:
        call_http_tool(spec, {"u": value}, make_ctx(env={"BASE": server.url}))
    assert not caught.value.retryable
    assert server.requests == []
