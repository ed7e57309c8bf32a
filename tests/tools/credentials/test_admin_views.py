"""The admin's Connect, callback and Disconnect of an oauth2_authorization_code
credential, through Django's test client against the loopback authorization server:
the consent redirect, the state checks, a denied consent and a refused code each shown
on the credential page with nothing stored, and no secret in any page."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.urls import reverse

from tests.tools.credentials.conftest import consent_credential
from tools.credentials.store import resolve_credential
from tools.models import Credential

pytestmark = pytest.mark.django_db

CALLBACK = "/admin/tools/credential/oauth2/callback/"


@pytest.fixture
def staff(client, keys):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-12345678")
    client.force_login(user)
    return client


def _connect(client, row) -> str:
    response = client.get(reverse("admin:tools_credential_oauth2_connect", args=[row.pk]))
    assert response.status_code == 302
    return response["Location"]


def _provider_answer(provider, url: str, decision: str = "approve") -> dict[str, str]:
    params = dict(parse_qsl(urlsplit(url).query))
    answer = httpx.post(f"{provider.url}/authorize", data={**params, "decision": decision})
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert urlsplit(location).path == CALLBACK
    return dict(parse_qsl(urlsplit(location).query))


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _callback(client, params):
    return client.get(CALLBACK, params)


def test_connect_redirects_to_the_consent_page_and_the_callback_stores_the_tokens(staff, provider):
    row = consent_credential(provider)
    page = staff.get(reverse("admin:tools_credential_change", args=[row.pk]))
    assert b'id="fp-oauth2-connect"' in page.content
    assert b'id="fp-oauth2-disconnect"' not in page.content
    assert b'name="revocation_url"' in page.content

    url = _connect(staff, row)
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["redirect_uri"] == f"http://testserver{CALLBACK}"
    answer = _provider_answer(provider, url)
    response = _callback(staff, answer)
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:tools_credential_change", args=[row.pk])
    (said,) = _messages(response)
    assert said.startswith("credential 'gh' is connected: scopes granted: repo read:user")

    page = staff.get(response["Location"])
    assert b"access_token: set" in page.content
    assert b"refresh_token: set" in page.content
    assert b"Connect again" in page.content
    assert b'id="fp-oauth2-disconnect"' in page.content
    resolved = resolve_credential("gh")
    secrets = [
        *provider.issued,
        provider.client_secret,
        provider.token_requests[0]["code_verifier"],
    ]
    assert resolved.secret("access_token") in secrets
    for value in secrets:
        assert value.encode() not in page.content
        assert value.encode() not in response.content

    # Used again: refused, shown on the credential's page.
    again = _callback(staff, answer)
    assert again["Location"] == reverse("admin:tools_credential_change", args=[row.pk])
    assert "unknown or already used" in _messages(again)[-1]


def test_a_wrong_state_a_denied_consent_and_a_token_error_show_on_the_page_and_store_nothing(
    staff, provider
):
    row = consent_credential(provider)
    change = reverse("admin:tools_credential_change", args=[row.pk])
    answer = _provider_answer(provider, _connect(staff, row))
    wrong = _callback(staff, {**answer, "state": f"{row.pk}.not-the-state"})
    assert wrong["Location"] == change
    assert "state is unknown or already used" in _messages(wrong)[-1]
    nowhere = _callback(staff, {"code": "x", "state": "garbage"})
    assert nowhere["Location"] == reverse("admin:tools_credential_changelist")

    denied = _callback(staff, _provider_answer(provider, _connect(staff, row), "deny"))
    assert denied["Location"] == change
    assert "the consent was denied at the provider (access_denied)" in _messages(denied)[-1]

    provider.token_error = "invalid_grant"
    refused = _callback(staff, _provider_answer(provider, _connect(staff, row)))
    assert refused["Location"] == change
    said = _messages(refused)[-1]
    assert "refused exchanging the code (invalid_grant: told to fail): nothing was stored" in said
    page = staff.get(change)
    assert b"access_token: not set" in page.content
    row.refresh_from_db()
    assert row.secret_fields == ["client_secret"]


def test_disconnect_asks_then_revokes_and_clears(staff, provider):
    row = consent_credential(provider, revocation_url=f"{provider.url}/revoke")
    _callback(staff, _provider_answer(provider, _connect(staff, row)))
    refresh = resolve_credential("gh").secret("refresh_token")
    url = reverse("admin:tools_credential_oauth2_disconnect", args=[row.pk])
    confirm = staff.get(url)
    assert confirm.status_code == 200
    assert b"revoked at" in confirm.content
    assert Credential.objects.get(pk=row.pk).secret_fields != ["client_secret"]
    done = staff.post(url)
    assert "the refresh token was revoked at the provider" in _messages(done)[-1]
    assert provider.revoked == [refresh]
    assert Credential.objects.get(pk=row.pk).secret_fields == ["client_secret"]


def test_the_views_are_for_staff_with_the_change_permission_only(client, keys, provider):
    row = consent_credential(provider)
    connect = reverse("admin:tools_credential_oauth2_connect", args=[row.pk])
    assert client.get(connect)["Location"].startswith("/admin/login/")
    assert client.get(CALLBACK)["Location"].startswith("/admin/login/")
    user = get_user_model().objects.create_user("viewer", password="pw-12345678", is_staff=True)
    client.force_login(user)
    assert client.get(connect).status_code == 403
    assert client.get(CALLBACK, {"state": "x"}).status_code == 403
    disconnect = reverse("admin:tools_credential_oauth2_disconnect", args=[row.pk])
    assert client.post(disconnect).status_code == 403


def test_connect_on_another_type_or_without_a_key_says_why(staff, provider, settings):
    bearer = Credential.objects.create(name="plain", type="bearer")
    response = staff.get(reverse("admin:tools_credential_oauth2_connect", args=[bearer.pk]))
    assert "only an oauth2_authorization_code one is connected" in _messages(response)[0]
    row = consent_credential(provider)
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    response = staff.get(reverse("admin:tools_credential_oauth2_connect", args=[row.pk]))
    assert "no credential key is configured" in _messages(response)[-1]
