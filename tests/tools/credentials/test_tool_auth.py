"""A tool's ``auth: {credential: NAME}`` against a real loopback server: each type sent
as it says, the value read at call time, what a definition pins, and the errors."""

from __future__ import annotations

import base64
from urllib.parse import parse_qsl

import pytest

from tests.tools.conftest import Reply, make_spec
from tools.credentials.store import save_credential
from tools.errors import ToolAuthFailed, ToolConfigError
from tools.http import oauth2
from tools.http.oauth2 import TokenCache
from tools.http_client import call_http_tool
from tools.loader import load_tool_text
from tools.models import Credential
from tools.pins import tool_definition_hash

pytestmark = pytest.mark.django_db


def _spec(credential="svc", name="t"):
    return make_spec("/api", name=name, auth={"credential": credential})


def _store(name="svc", type_="bearer", values=None, **clear) -> Credential:
    return save_credential(Credential(name=name, type=type_, **clear), values or {})


def _call(ctx_for, spec=None):
    ctx = ctx_for()
    result = call_http_tool(spec or _spec(), {}, ctx)
    return result, ctx


@pytest.mark.parametrize(
    ("type_", "clear", "values", "header", "sent"),
    [
        ("bearer", {}, {"token": "tok-8a7b6c"}, "authorization", "Bearer tok-8a7b6c"),
        (
            "basic",
            {"username": "svc-user"},
            {"password": "pw-5d4e3f"},
            "authorization",
            "Basic " + base64.b64encode(b"svc-user:pw-5d4e3f").decode(),
        ),
        ("api_key", {"key_name": "X-Api-Key"}, {"value": "key-112233"}, "x-api-key", "key-112233"),
        (
            "header",
            {"key_name": "X-Custom-Auth"},
            {"value": "Token cst-445566"},
            "x-custom-auth",
            "Token cst-445566",
        ),
    ],
)
def test_each_header_type_is_sent_as_its_type_says_and_masked(
    keys, server, ctx_for, type_, clear, values, header, sent
):
    _store(type_=type_, values=values, **clear)
    result, ctx = _call(ctx_for)
    (request,) = server.requests
    assert request.header(header) == sent
    assert result.output == {"ok": True}
    for value in values.values():
        assert ctx.redactor.scrub_text(f"got {value}") == "got ***"
    assert ctx.redactor.scrub_text(sent) != sent
    recorded = str(result.request)
    assert sent not in recorded
    assert all(value not in recorded for value in values.values())


@pytest.mark.parametrize(
    ("type_", "clear"),
    [("api_key", {"key_name": "api_key", "location": "query"}), ("query", {"key_name": "api_key"})],
)
def test_query_types_add_the_parameter_and_the_recorded_url_masks_it(
    keys, server, ctx_for, type_, clear
):
    _store(type_=type_, values={"value": "qk-778899"}, **clear)
    result, _ = _call(ctx_for)
    (request,) = server.requests
    assert request.query == [("api_key", "qk-778899")]
    assert "qk-778899" not in result.request["url"]
    assert "api_key=***" in result.request["url"]


class Tokens:
    """``POST /token`` (client credentials, the client in HTTP Basic) issues
    ``at-N``; ``GET /api`` accepts only issued tokens."""

    def __init__(self, server, secret):
        self.secret = secret
        self.grants: list[dict] = []
        self.issued: list[str] = []
        self.used: list[str] = []
        server.handler = self.handle

    def handle(self, req):
        if req.path == "/token":
            client, _, secret = (
                base64.b64decode(req.header("authorization")[6:]).decode().partition(":")
            )
            self.grants.append({"client": client, **dict(parse_qsl(req.body.decode()))})
            if secret != self.secret:
                return Reply.json({"error": "invalid_client"}, status=401)
            self.issued.append(f"at-{len(self.issued) + 1}-xyz789")
            return Reply.json({"access_token": self.issued[-1], "expires_in": 3600})
        token = (req.header("authorization") or "")[7:]
        self.used.append(token)
        return Reply.json({"ok": True}) if token in self.issued else Reply.json({}, status=401)


@pytest.fixture
def fresh_tokens(monkeypatch):
    monkeypatch.setattr(oauth2, "PROCESS_TOKENS", TokenCache())


def test_oauth2_client_credentials_gets_a_token_with_the_stored_client(
    keys, server, ctx_for, fresh_tokens
):
    tokens = Tokens(server, "cs-stored-556677")
    row = _store(
        type_="oauth2_client_credentials",
        values={"client_secret": "cs-stored-556677"},
        client_id="app-42",
        token_url=f"{server.url}/token",
        scopes="read write",
    )
    result, ctx = _call(ctx_for)
    assert result.output == {"ok": True}
    assert tokens.grants == [
        {"client": "app-42", "grant_type": "client_credentials", "scope": "read write"}
    ]
    assert tokens.used == ["at-1-xyz789"]
    for secret in ("cs-stored-556677", "at-1-xyz789"):
        assert ctx.redactor.scrub_text(secret) == "***"

    tokens.secret = "cs-rotated-998877"  # the provider rotates the client secret
    save_credential(row, {"client_secret": "cs-rotated-998877"})
    _call(ctx_for)  # the next call reads the new secret: a token for it, no restart
    assert [g["client"] for g in tokens.grants] == ["app-42", "app-42"]
    assert tokens.used == ["at-1-xyz789", "at-2-xyz789"]


def test_a_changed_value_is_what_the_next_call_sends(keys, server, ctx_for):
    row = _store(values={"token": "tok-first-1"})
    spec = _spec()
    _call(ctx_for, spec)
    save_credential(row, {"token": "tok-second-2"})
    _call(ctx_for, spec)
    assert [r.header("authorization") for r in server.requests] == [
        "Bearer tok-first-1",
        "Bearer tok-second-2",
    ]
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_which_credential_a_tool_uses_is_part_of_its_definition():
    assert tool_definition_hash(_spec("svc")) != tool_definition_hash(_spec("other"))
    assert tool_definition_hash(_spec("svc")) == tool_definition_hash(_spec("svc"))
    plain = make_spec("/api", auth={"type": "bearer", "token": "{{env.T}}"})
    assert "credential" not in plain.stored()["http"]["auth"]  # older hashes hold
    assert _spec("svc").stored()["http"]["auth"]["credential"] == "svc"
    assert _spec("svc").credential_name() == "svc"
    assert plain.credential_name() is None


def test_an_unknown_credential_names_the_tool_and_the_closest_name(keys, server, ctx_for):
    _store(name="github_app", values={"token": "t-1"})
    with pytest.raises(ToolConfigError) as caught:
        _call(ctx_for, _spec("github_ap", name="issues"))
    assert caught.value.message == (
        "tool 'issues': no credential is named 'github_ap' (did you mean 'github_app'?)"
    )
    assert server.requests == []


def test_a_credential_that_cannot_be_used_fails_the_call_before_anything_is_sent(
    keys, server, ctx_for, settings
):
    row = _store()  # no token set
    with pytest.raises(ToolConfigError, match="credential 'svc' has no token set"):
        _call(ctx_for)
    save_credential(row, {"token": "tok-1"})
    Credential.objects.filter(pk=row.pk).update(needs_reconnect=True)
    with pytest.raises(ToolAuthFailed, match="credential 'svc' needs to be reconnected"):
        _call(ctx_for)
    _store(
        name="consent",
        type_="oauth2_authorization_code",
        values={"client_secret": "cs-1"},
        client_id="c",
        token_url="https://auth.example/token",
        authorize_url="https://auth.example/authorize",
    )
    with pytest.raises(ToolConfigError, match=r"credential 'consent' is not connected"):
        _call(ctx_for, _spec("consent"))
    Credential.objects.filter(pk=row.pk).update(needs_reconnect=False)
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    with pytest.raises(ToolConfigError, match="tool 't': no credential key is configured"):
        _call(ctx_for)
    assert server.requests == []


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        (
            "{credential: GitHub App}",
            "field auth.credential: 'GitHub App' is not a credential name: lower-case "
            "letters, digits, `_` and `-` (e.g. github_app)",
        ),
        (
            "{type: bearer, credential: gh}",
            "field auth: 'credential' does not apply to auth type 'bearer': a stored "
            "credential stands alone (auth: {credential: gh}) and its type says how it is sent",
        ),
        (
            '{credential: gh, token: "{{env.T}}"}',
            "field auth: 'token' does not apply to auth type 'credential'",
        ),
    ],
)
def test_a_tool_file_naming_a_credential_wrongly_is_refused_where_it_says_so(auth, message):
    text = f"name: gh_user\nbase_url: https://api.example\nauth: {auth}\n"
    with pytest.raises(ToolConfigError) as caught:
        load_tool_text(text, source="gh.yaml")
    assert caught.value.problems == [f"gh.yaml:3: tool 'gh_user': {message}"]
