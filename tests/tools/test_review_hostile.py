"""Hostile input against the tool-file loader and the http client (review findings)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest

from tests.tools.conftest import Reply
from tools.errors import TemplateError, ToolConfigError, ToolResponseInvalid
from tools.http_client import call_http_tool
from tools.llm.content import parse_json_reply
from tools.llm.errors import LLMReplyInvalid
from tools.loader import load_tool_text
from tools.spec import ToolSpec


def _laughs(indent: str) -> str:
    """A 'billion laughs' YAML block: 9 anchors, each nine aliases of the previous one."""
    lines = [f"{indent}a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"{indent}a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines)


def test_alias_bomb_in_a_tool_body_is_refused_quickly():
    text = (
        "name: t\nbase_url: https://x.org\nrequest:\n  method: POST\n  body:\n"
        + _laughs("    ")
        + "\n"
    )
    with pytest.raises(ToolConfigError, match="anchors"):
        load_tool_text(text, source="bomb.yaml")


def test_deeply_nested_tool_file_is_a_config_error():
    text = "name: t\nbase_url: https://x.org\nrequest:\n  body: " + "[" * 5000 + "]" * 5000
    with pytest.raises(ToolConfigError, match="nest"):
        load_tool_text(text, source="deep.yaml")


# --- http client ------------------------------------------------------------------------


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


# --- LLM replies ----------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [500, 100_000])
def test_deeply_nested_llm_reply_is_an_invalid_reply_not_a_crash(depth):
    text = '{"steps": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(LLMReplyInvalid, match="nest"):
        parse_json_reply(text)
    with pytest.raises(LLMReplyInvalid, match="nest"):
        parse_json_reply("Here it is:\n```json\n" + text + "\n```")
