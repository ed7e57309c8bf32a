"""Reading answers: status and headers in extraction, success conditions, formats."""

import base64
import json

import pytest

from tests.tools.conftest import Reply, make_spec
from tools.errors import ToolHTTPError, ToolRateLimited, ToolResponseInvalid
from tools.http_client import call_http_tool


def test_status_and_headers_are_readable_case_insensitively(httpbin, make_ctx):
    spec = make_spec(
        "/response-headers",
        query={"X-RateLimit-Remaining": "42", "Link": '<https://x/?page=2>; rel="next"'},
        extract={
            "status": "$status",
            "remaining": "$headers.x-ratelimit-remaining",
            "link": "$headers.Link",
            "absent": "$headers.x-nothing",
        },
    )
    result = call_http_tool(spec, {}, make_ctx(env={"BASE": httpbin}))
    assert result.output == {
        "status": 200,
        "remaining": "42",
        "link": '<https://x/?page=2>; rel="next"',
        "absent": None,
    }


def test_httpbin_429_is_rate_limited(httpbin, make_ctx):
    with pytest.raises(ToolRateLimited) as info:
        call_http_tool(make_spec("/status/429"), {}, make_ctx(env={"BASE": httpbin}))
    assert info.value.status == 429
    assert info.value.retryable


SUCCESS = {"path": "status", "equals": "success", "message": "error.message"}


def test_a_200_with_an_error_body_fails_the_success_condition(server, ctx_for):
    server.reply(Reply.json({"status": "error", "error": {"message": "quota exceeded"}}))
    spec = make_spec(extract={"v": "value"}, http_response={"success": SUCCESS})
    with pytest.raises(ToolHTTPError, match="quota exceeded") as info:
        call_http_tool(spec, {}, ctx_for())
    assert (info.value.code, info.value.status, info.value.retryable) == ("http_error", 200, False)
    assert 'status is "error"' in info.value.message


def test_a_200_meeting_the_success_condition_succeeds(server, ctx_for):
    server.reply(Reply.json({"status": "success", "value": 7}))
    spec = make_spec(
        extract={"v": "value"}, http_response={"success": {"path": "status", "in": ["success"]}}
    )
    assert call_http_tool(spec, {}, ctx_for()).output == {"v": 7}


def test_an_html_page_where_json_fields_were_declared_is_invalid_not_nulls(server, ctx_for):
    server.reply(
        Reply(body=b"<html><body>Login</body></html>", headers={"Content-Type": "text/html"})
    )
    with pytest.raises(ToolResponseInvalid, match=r"not JSON.*text/html"):
        call_http_tool(make_spec(extract={"name": "name"}), {}, ctx_for())


def test_json_lines_are_items(server, ctx_for):
    server.reply(
        Reply(body=b'{"n": 1}\n\n{"n": 2}\n', headers={"Content-Type": "application/x-ndjson"})
    )
    spec = make_spec(http_response={"format": "jsonl"})
    assert call_http_tool(spec, {}, ctx_for()).output == {"items": [{"n": 1}, {"n": 2}], "count": 2}
    server.reply(Reply(body=b'{"n": 1}\nnot json\n'))
    with pytest.raises(ToolResponseInvalid, match="line 2 is not JSON"):
        call_http_tool(spec, {}, ctx_for())


def test_binary_bodies_are_base64_with_their_content_type(httpbin, make_ctx):
    spec = make_spec("/image/png", http_response={"format": "binary"})
    output = call_http_tool(spec, {}, make_ctx(env={"BASE": httpbin})).output
    raw = base64.b64decode(output["base64"])
    assert raw.startswith(b"\x89PNG")
    assert output["size"] == len(raw)
    assert output["content_type"] == "image/png"


def test_format_json_refuses_a_text_answer_even_without_extraction(server, ctx_for):
    server.reply(Reply(body=b"plain", headers={"Content-Type": "text/plain"}))
    with pytest.raises(ToolResponseInvalid):
        call_http_tool(make_spec(http_response={"format": "json"}), {}, ctx_for())
    server.reply(Reply(body=json.dumps([1]).encode()))
    assert call_http_tool(make_spec(http_response={"format": "text"}), {}, ctx_for()).output == {
        "text": "[1]"
    }


def test_a_non_json_page_quoted_in_an_error_is_masked_before_it_is_cut(server, ctx_for):
    token = "tok-9876543210-abcdef"
    page = "<p>" + "a" * 70 + token + "</p>"  # the token straddles the 80-character cut
    server.reply(Reply(body=page.encode(), headers={"Content-Type": "text/html"}))
    spec = make_spec(extract={"name": "name"}, auth={"type": "bearer", "token": "{{env.TOKEN}}"})

    with pytest.raises(ToolResponseInvalid) as info:
        call_http_tool(spec, {}, ctx_for(TOKEN=token))

    assert "a***" in info.value.message
    assert "tok-98" not in info.value.message
