"""OAuth2 authorization code with PKCE against a real loopback authorization server
(tests/fakes/oauth_provider.py, which checks the S256 challenge itself): the consent
URL, the state (bound, single-use, expiring), denied consent, a refused code, the
tokens stored sealed, refresh with rotation, disconnect with revocation, and a tool
call sending the token."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from tests.tools.conftest import make_spec
from tests.tools.credentials.conftest import consent_credential
from tools.credentials.consent import (
    SESSION_KEY,
    ConsentError,
    begin_consent,
    disconnect,
    finish_consent,
)
from tools.credentials.store import resolve_credential
from tools.errors import ToolAuthFailed, ToolConfigError
from tools.http_client import call_http_tool
from tools.models import Credential

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:9/admin/tools/credential/oauth2/callback/"


def _consent(provider, url: str, decision: str = "approve") -> dict[str, str]:
    """What the provider sends the browser back with, after Approve or Deny."""
    params = dict(parse_qsl(urlsplit(url).query))
    page = httpx.get(url)
    assert page.status_code == 200, page.text
    answer = httpx.post(f"{provider.url}/authorize", data={**params, "decision": decision})
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(REDIRECT)
    return dict(parse_qsl(urlsplit(location).query))


def _row_text(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM tools_credential WHERE id = %s", [pk])
        return repr(cursor.fetchone())


def test_the_consent_url_asks_for_code_with_pkce_and_keeps_the_state_server_side(keys, provider):
    row = consent_credential(provider)
    session: dict = {}
    url = begin_consent(row, session, REDIRECT)
    assert url.startswith(f"{provider.url}/authorize?")
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["response_type"] == "code"
    assert params["client_id"] == provider.client_id
    assert params["redirect_uri"] == REDIRECT
    assert params["scope"] == "repo read:user"
    assert params["code_challenge_method"] == "S256"
    assert len(params["code_challenge"]) == 43
    assert params["state"].startswith(f"{row.pk}.")
    (entry,) = session[SESSION_KEY].values()
    assert entry["credential"] == row.pk
    assert params["state"] not in repr(session)  # kept as a digest
    assert "code_verifier" not in repr(session)  # sealed
    assert provider.client_secret not in url


def test_an_approved_consent_stores_the_tokens_sealed_and_the_state_is_single_use(keys, provider):
    row = consent_credential(provider)
    session: dict = {}
    answer = _consent(provider, begin_consent(row, session, REDIRECT))
    connected = finish_consent(session, answer)
    assert connected.scopes == ("repo", "read:user")
    row.refresh_from_db()
    assert sorted(row.secret_fields) == ["access_token", "client_secret", "refresh_token"]
    assert row.expires_at is not None
    assert row.expires_at > timezone.now() + timedelta(minutes=50)
    assert not row.needs_reconnect
    (request,) = provider.token_requests
    assert request["grant_type"] == "authorization_code"
    assert request["redirect_uri"] == REDIRECT
    assert len(request["code_verifier"]) == 64
    stored = _row_text(row.pk)
    for value in [*provider.issued, request["code_verifier"], provider.client_secret]:
        assert value not in stored
    resolved = resolve_credential("gh")
    assert resolved.secret("access_token") in provider.access_tokens
    assert resolved.expires_at is not None
    assert resolved.expires_at > timezone.now()

    with pytest.raises(ConsentError, match="unknown or already used") as reused:
        finish_consent(session, answer)
    assert reused.value.credential == row.pk
    assert len(provider.token_requests) == 1


def test_a_wrong_state_a_state_of_another_session_or_an_expired_one_stores_nothing(keys, provider):
    row = consent_credential(provider)
    session: dict = {}
    answer = _consent(provider, begin_consent(row, session, REDIRECT))
    with pytest.raises(ConsentError, match="state is unknown or already used") as wrong:
        finish_consent(session, {**answer, "state": "nonsense"})
    assert wrong.value.credential is None
    with pytest.raises(ConsentError, match="unknown or already used"):
        finish_consent({}, answer)  # another person's session
    later = timezone.now() + timedelta(minutes=11)
    with pytest.raises(ConsentError, match="longer than 10 minutes"):
        finish_consent(session, answer, now=later)
    assert provider.token_requests == []
    row.refresh_from_db()
    assert row.secret_fields == ["client_secret"]


def test_a_denied_consent_and_a_refused_code_store_nothing(keys, provider):
    row = consent_credential(provider)
    session: dict = {}
    denied = _consent(provider, begin_consent(row, session, REDIRECT), "deny")
    assert denied["error"] == "access_denied"
    with pytest.raises(ConsentError, match="the consent was denied at the provider"):
        finish_consent(session, denied)

    answer = _consent(provider, begin_consent(row, session, REDIRECT))
    with pytest.raises(ConsentError, match=r"refused exchanging the code \(invalid_grant"):
        finish_consent(session, {**answer, "code": "code-forged"})

    # A verifier that does not match the challenge: the provider's own PKCE check.
    url = begin_consent(row, session, REDIRECT)
    answer = _consent(provider, url)
    other: dict = {}
    begin_consent(row, other, REDIRECT)
    (entry,) = other[SESSION_KEY].values()
    (mine,) = [k for k, v in session[SESSION_KEY].items()]
    session[SESSION_KEY][mine]["verifier"] = entry["verifier"]
    with pytest.raises(ConsentError, match="PKCE check failed") as pkce:
        finish_consent(session, answer)
    assert answer["code"] not in pkce.value.message

    provider.token_error = "invalid_client"
    answer = _consent(provider, begin_consent(row, session, REDIRECT))
    with pytest.raises(ConsentError, match="invalid_client"):
        finish_consent(session, answer)
    row.refresh_from_db()
    assert row.secret_fields == ["client_secret"]
    assert row.expires_at is None


def _connect(provider, name="gh", **clear) -> Credential:
    row = consent_credential(provider, name=name, **clear)
    session: dict = {}
    finish_consent(session, _consent(provider, begin_consent(row, session, REDIRECT)))
    row.refresh_from_db()
    return row


def test_a_tool_sends_the_access_token_and_refreshes_it_once_expired(keys, provider, make_ctx):
    _connect(provider)
    spec = make_spec("/api/me", auth={"credential": "gh"})
    ctx = make_ctx(env={"BASE": provider.url})
    result = call_http_tool(spec, {}, ctx)
    assert result.output == {"user": "octo", "scope": "repo read:user"}
    first = resolve_credential("gh")
    assert provider.api_calls == [f"Bearer {first.secret('access_token')}"]
    assert first.secret("access_token") not in str(result.request)

    # Expired: one refresh, the rotated refresh token stored before the call is sent.
    Credential.objects.filter(name="gh").update(expires_at=timezone.now() - timedelta(seconds=1))
    provider.expire_access_tokens()
    ctx = make_ctx(env={"BASE": provider.url})
    result = call_http_tool(spec, {}, ctx)
    assert result.output["user"] == "octo"
    second = resolve_credential("gh")
    assert provider.token_requests[-1] == {
        "grant_type": "refresh_token",
        "refresh_token": first.secret("refresh_token"),
        "scope": "repo read:user",
    }
    assert second.secret("refresh_token") != first.secret("refresh_token")
    assert second.secret("refresh_token") in provider.refresh_tokens
    assert provider.api_calls[-1] == f"Bearer {second.secret('access_token')}"
    for value in (second.secret("access_token"), second.secret("refresh_token")):
        assert ctx.redactor.scrub_text(value) == "***"

    # A refresh the provider refuses: needs reconnect, the error names the credential.
    Credential.objects.filter(name="gh").update(expires_at=timezone.now() - timedelta(seconds=1))
    provider.refresh_tokens.clear()
    with pytest.raises(ToolAuthFailed, match=r"tool 't': credential 'gh'.*invalid_grant.*") as exc:
        call_http_tool(spec, {}, make_ctx(env={"BASE": provider.url}))
    assert exc.value.not_sent
    assert "needs to be reconnected" in str(exc.value)
    assert second.secret("refresh_token") not in str(exc.value)
    assert Credential.objects.get(name="gh").needs_reconnect


def test_a_credential_never_connected_fails_the_call_saying_to_connect_it(keys, provider, make_ctx):
    consent_credential(provider)
    spec = make_spec("/api/me", auth={"credential": "gh"})
    with pytest.raises(ToolConfigError, match="credential 'gh' is not connected: press Connect"):
        call_http_tool(spec, {}, make_ctx(env={"BASE": provider.url}))
    assert provider.api_calls == []


def test_disconnect_revokes_at_the_provider_and_clears_the_tokens(keys, provider):
    row = _connect(provider, revocation_url=f"{provider.url}/revoke")
    refresh = resolve_credential("gh").secret("refresh_token")
    said = disconnect(row)
    assert "the refresh token was revoked at the provider" in said
    assert provider.revoked == [refresh]
    row.refresh_from_db()
    assert row.secret_fields == ["client_secret"]
    assert row.expires_at is None

    plain = _connect(provider, name="plain")
    assert "revoked" not in disconnect(plain)
    plain.refresh_from_db()
    assert plain.secret_fields == ["client_secret"]
