"""One attempt under a deadline, the codings asked for and decoded: real loopback
servers (our own and httpbin from PyPI), no mocks of HTTP."""

import gzip
import json
import time

import brotli
import pytest

from tests.tools.conftest import Reply, make_spec
from tools.errors import ToolResponseInvalid, ToolTimeout, ToolUnreachable
from tools.http_client import call_http_tool

DATA = {"name": "widgets", "stars": 42}


def trickle(server, pause: float, count: int):
    """A body of ``count`` bytes, one every ``pause`` seconds (each read stays short
    of a per-read timeout)."""
    for _ in range(count):
        if server.stopping.wait(pause):
            return
        yield b"x"


def test_a_trickling_server_cannot_hold_an_attempt_past_its_deadline(server, ctx_for):
    server.handler = lambda req: Reply(body=trickle(server, 1.9, 5), length=5)
    started = time.monotonic()
    with pytest.raises(ToolTimeout, match="within 2s") as info:
        call_http_tool(make_spec(), {}, ctx_for(timeout=2.0))
    assert time.monotonic() - started < 2.8
    assert info.value.retryable is True


def test_httpbin_drip_is_cut_at_the_deadline(httpbin, make_ctx):
    # A byte every 1.2 s: each read is well inside 2 s, the whole body is not.
    spec = make_spec("/drip", query={"duration": 6, "numbytes": 5, "delay": 0})
    started = time.monotonic()
    with pytest.raises(ToolTimeout):
        call_http_tool(spec, {}, make_ctx(env={"BASE": httpbin}, timeout=2.0))
    assert time.monotonic() - started < 2.8


def test_a_fast_enough_body_is_read_whole(server, ctx_for):
    server.handler = lambda req: Reply(body=trickle(server, 0.05, 4), length=4)
    result = call_http_tool(make_spec(), {}, ctx_for(timeout=2.0))
    assert result.output == {"text": "xxxx"}


def test_accept_encoding_names_only_what_is_decoded_even_with_brotli_installed(server, ctx_for):
    call_http_tool(make_spec(), {}, ctx_for())
    assert server.requests[-1].header("accept-encoding") == "gzip, deflate, identity"


def negotiate(req):
    """A content-negotiating server: brotli when offered, else gzip, else identity."""
    body = json.dumps(DATA).encode()
    offered = [c.split(";")[0].strip() for c in (req.header("accept-encoding") or "").split(",")]
    if "br" in offered:
        return Reply(body=brotli.compress(body), headers={"Content-Encoding": "br"})
    if "gzip" in offered:
        return Reply(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})
    return Reply(body=body)


def test_a_negotiating_server_answers_in_a_coding_that_is_decoded(server, ctx_for):
    server.handler = negotiate
    result = call_http_tool(make_spec(extract={"stars": "stars"}), {}, ctx_for())
    assert result.output == {"stars": 42}


def test_an_unrequested_coding_is_a_clear_invalid_response(server, ctx_for):
    body = brotli.compress(json.dumps(DATA).encode())
    server.reply(Reply(body=body, headers={"Content-Encoding": "br"}))
    with pytest.raises(ToolResponseInvalid, match="Content-Encoding 'br'") as info:
        call_http_tool(make_spec(), {}, ctx_for())
    assert info.value.retryable is False


def test_httpbin_brotli_is_refused_and_gzip_deflate_are_decoded(httpbin, make_ctx):
    ctx = make_ctx(env={"BASE": httpbin})
    with pytest.raises(ToolResponseInvalid, match="'br'"):
        call_http_tool(make_spec("/brotli"), {}, ctx)
    gzipped = call_http_tool(make_spec("/gzip", extract={"flag": "gzipped"}), {}, ctx)
    deflated = call_http_tool(make_spec("/deflate", extract={"flag": "deflated"}), {}, ctx)
    assert (gzipped.output, deflated.output) == ({"flag": True}, {"flag": True})


def test_a_refused_connection_is_known_not_sent(closed_port, make_ctx):
    ctx = make_ctx(env={"BASE": f"http://127.0.0.1:{closed_port}"})
    with pytest.raises(ToolUnreachable) as info:
        call_http_tool(make_spec(), {}, ctx)
    assert info.value.not_sent is True
