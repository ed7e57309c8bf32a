"""OAuth2 against a loopback token endpoint: grant, cache, expiry, refresh on 401."""

import base64
import time
from urllib.parse import parse_qsl

import pytest

from tests.tools.conftest import Reply, make_spec
from tools.errors import ToolAuthFailed
from tools.http import oauth2
from tools.http.oauth2 import TokenCache
from tools.http_client import call_http_tool

CLIENT_SECRET = "cs-very-secret-42"
REFRESH = "rt-long-lived-777"


class TokenServer:
    """``POST /token`` issues ``tok-N`` (``expires_in`` seconds); ``GET /api`` accepts
    only tokens it has issued and not revoked."""

    def __init__(self, server, expires_in=3600):
        self.issued: list[str] = []
        self.grants: list[dict] = []
        self.revoked: set[str] = set()
        self.used: list[str] = []
        self.expires_in = expires_in
        server.handler = self.handle

    def handle(self, req):
        if req.path == "/token":
            user, _, secret = (
                base64.b64decode(req.header("authorization")[6:]).decode().partition(":")
            )
            form = dict(parse_qsl(req.body.decode()))
            self.grants.append({"client": user, **form})
            if secret != CLIENT_SECRET:
                return Reply.json({"error": "invalid_client"}, status=401)
            token = f"tok-{len(self.issued) + 1}-abcdef"
            self.issued.append(token)
            return Reply.json(
                {"access_token": token, "token_type": "Bearer", "expires_in": self.expires_in}
            )
        token = (req.header("authorization") or "")[7:]
        self.used.append(token)
        if token not in self.issued or token in self.revoked:
            return Reply.json({"message": "bad token"}, status=401)
        return Reply.json({"ok": True})


def oauth_spec(name="t", scopes=("read",), **auth):
    return make_spec(
        "/api",
        name=name,
        auth={
            "type": "oauth2",
            "token_url": "{{env.BASE}}/token",
            "client_id": "app-1",
            "client_secret": "{{env.CLIENT_SECRET}}",
            "scopes": list(scopes),
            **auth,
        },
    )


@pytest.fixture
def tokens(server):
    return TokenServer(server)


@pytest.fixture
def cache(monkeypatch):
    """A fresh process token cache for this test."""
    fresh = TokenCache()
    monkeypatch.setattr(oauth2, "PROCESS_TOKENS", fresh)
    return fresh


@pytest.fixture
def octx(ctx_for, cache):
    return lambda **more: ctx_for(CLIENT_SECRET=CLIENT_SECRET, REFRESH=REFRESH, **more)


def test_client_credentials_token_is_fetched_once_and_reused(server, tokens, octx):
    spec = oauth_spec(scopes=("read", "write"))
    call_http_tool(spec, {}, octx())
    call_http_tool(spec, {}, octx())
    assert tokens.used == ["tok-1-abcdef", "tok-1-abcdef"]
    assert tokens.grants == [
        {"client": "app-1", "grant_type": "client_credentials", "scope": "read write"}
    ]


def test_an_expired_token_is_fetched_again(server, octx):
    tokens = TokenServer(server, expires_in=1)
    spec = oauth_spec()
    call_http_tool(spec, {}, octx())
    call_http_tool(spec, {}, octx())
    time.sleep(1.0)
    call_http_tool(spec, {}, octx())
    assert tokens.used == ["tok-1-abcdef", "tok-1-abcdef", "tok-2-abcdef"]


def test_a_401_refreshes_the_token_once(server, tokens, octx):
    spec = oauth_spec()
    call_http_tool(spec, {}, octx())
    tokens.revoked.add("tok-1-abcdef")
    assert call_http_tool(spec, {}, octx()).output == {"ok": True}
    assert tokens.used == ["tok-1-abcdef", "tok-1-abcdef", "tok-2-abcdef"]
    tokens.revoked.add("tok-2-abcdef")
    tokens.revoked.add("tok-3-abcdef")  # the fresh token is refused too: no loop
    with pytest.raises(ToolAuthFailed, match="HTTP 401"):
        call_http_tool(spec, {}, octx())
    assert len(tokens.issued) == 3


def test_tokens_are_not_shared_between_tools_with_other_scopes(server, tokens, octx):
    reader, writer = oauth_spec("reader", ("read",)), oauth_spec("writer", ("write",))
    call_http_tool(reader, {}, octx())
    call_http_tool(writer, {}, octx())
    call_http_tool(reader, {}, octx())
    assert tokens.used == ["tok-1-abcdef", "tok-2-abcdef", "tok-1-abcdef"]


def test_the_refresh_token_grant(server, tokens, octx):
    spec = oauth_spec(grant="refresh_token", refresh_token="{{env.REFRESH}}")
    ctx = octx()
    call_http_tool(spec, {}, ctx)
    assert tokens.grants[-1]["grant_type"] == "refresh_token"
    assert tokens.grants[-1]["refresh_token"] == REFRESH
    assert ctx.redactor.scrub_text(REFRESH) == "***"


def test_refused_client_credentials_are_auth_failed_and_nothing_was_sent(
    server, tokens, ctx_for, cache
):
    ctx = ctx_for(CLIENT_SECRET="wrong-secret-value")
    with pytest.raises(ToolAuthFailed, match="refused the credentials of client 'app-1'") as info:
        call_http_tool(oauth_spec(), {}, ctx)
    assert info.value.not_sent is True
    assert [r.path for r in server.requests] == ["/token"]


def test_token_and_client_secret_are_never_shown(server, tokens, octx):
    ctx = octx()
    result = call_http_tool(oauth_spec(), {}, ctx)
    shown = repr(ctx.redactor.scrub(result.output)) + repr(result.request)
    assert "tok-1-abcdef" not in shown
    assert ctx.redactor.scrub_text(f"{CLIENT_SECRET} tok-1-abcdef") == "*** ***"
    assert result.request["headers"]["Authorization"] == "***"
