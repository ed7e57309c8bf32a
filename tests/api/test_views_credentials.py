"""/api/v1/credentials/: values are write-only (never in an answer), saved through the
admin's rules, with errors naming the field; connect and disconnect an OAuth2 account
against the loopback authorization server, by session and by token."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet
from rest_framework.test import APIClient

from tests.api.conftest import assert_error
from tools.credentials.store import resolve_credential
from tools.models import Credential

pytestmark = pytest.mark.django_db

VIEW = "tools.view_credential"
MANAGE = (VIEW, "tools.add_credential", "tools.change_credential")
TOKEN = "ghp-apitest-0a1b2c3d4e5f"
CALLBACK = "/admin/tools/credential/oauth2/callback/"


@pytest.fixture
def keys(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    return settings


@pytest.fixture
def provider():
    from tests.fakes.oauth_provider import OAuthProvider

    found = OAuthProvider().start()
    yield found
    found.stop()


def _oauth_body(provider, **extra) -> dict:
    return {
        "name": "gh",
        "type": "oauth2_authorization_code",
        "client_id": provider.client_id,
        "token_url": f"{provider.url}/token",
        "authorize_url": f"{provider.url}/authorize",
        "revocation_url": f"{provider.url}/revoke",
        "scopes": "repo read:user",
        "client_secret": provider.client_secret,
        **extra,
    }


def test_create_list_retrieve_show_which_values_are_set_never_a_value(make_client, keys):
    client = make_client(*MANAGE)

    made = client.post(
        "/api/v1/credentials/", {"name": "gh", "type": "bearer", "token": TOKEN}, format="json"
    )

    assert made.status_code == 201, made.json()
    assert made.json()["secret_fields"] == ["token"]
    assert "token" not in made.json()
    listed = client.get("/api/v1/credentials/")
    one = client.get("/api/v1/credentials/gh/")
    for answer in (made, listed, one):
        assert TOKEN.encode() not in answer.content
    assert [c["name"] for c in listed.json()] == ["gh"]
    assert one.json()["source"] == "database"
    assert one.json()["needs_reconnect"] is False
    assert resolve_credential("gh").secret("token") == TOKEN
    assert TOKEN not in Credential.objects.get().secrets  # ciphertext


def test_update_keeps_a_blank_value_replaces_a_typed_one_and_unsets(make_client, keys):
    client = make_client(*MANAGE)
    client.post(
        "/api/v1/credentials/",
        {"name": "ledger", "type": "basic", "username": "svc", "password": "pw-one-123"},
        format="json",
    )

    kept = client.patch(
        "/api/v1/credentials/ledger/", {"username": "svc2", "password": ""}, format="json"
    )
    assert kept.status_code == 200, kept.json()
    assert kept.json()["username"] == "svc2"
    assert resolve_credential("ledger").secret("password") == "pw-one-123"

    Credential.objects.filter(name="ledger").update(needs_reconnect=True)
    typed = client.patch("/api/v1/credentials/ledger/", {"password": "pw-two-456"}, format="json")
    assert b"pw-two-456" not in typed.content
    assert typed.json()["needs_reconnect"] is False
    assert resolve_credential("ledger").secret("password") == "pw-two-456"

    unset = client.patch("/api/v1/credentials/ledger/", {"unset": ["password"]}, format="json")
    assert unset.json()["secret_fields"] == []


def test_errors_name_the_field(make_client, keys):
    client = make_client(*MANAGE)
    url = "/api/v1/credentials/"

    no_name = assert_error(
        client.post(url, {"type": "bearer"}, format="json"), 400, "credential_invalid"
    )
    assert no_name["details"][0]["path"] == "name"
    missing = assert_error(
        client.post(url, {"name": "k", "type": "api_key", "value": "v-1"}, format="json"),
        400,
        "credential_invalid",
    )
    assert [d["path"] for d in missing["details"]] == ["key_name"]
    alien = assert_error(
        client.post(url, {"name": "b", "type": "bearer", "password": "p-1"}, format="json"),
        400,
        "credential_invalid",
    )
    assert alien["details"][0]["path"] == "password"
    assert "not a secret of a bearer credential" in alien["message"]
    bad_name = assert_error(
        client.post(url, {"name": "Bad Name", "type": "bearer"}, format="json"), 400, "invalid"
    )
    assert bad_name["details"][0]["path"] == "name"
    client.post(url, {"name": "b", "type": "bearer", "token": "t-1"}, format="json")
    twice = assert_error(
        client.post(url, {"name": "b", "type": "bearer"}, format="json"), 400, "credential_invalid"
    )
    assert "already exists" in twice["message"]
    renamed = assert_error(
        client.patch(f"{url}b/", {"name": "c"}, format="json"), 400, "credential_invalid"
    )
    assert renamed["details"][0]["path"] == "name"
    assert Credential.objects.count() == 1


def test_without_a_key_nothing_is_saved_and_the_fix_is_named(make_client, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    client = make_client(*MANAGE)
    body = {"name": "gh", "type": "bearer", "token": TOKEN}

    answer = client.post("/api/v1/credentials/", body, format="json")

    body = assert_error(answer, 503, "credential_key_error")
    assert "FLOWPILOT_CREDENTIAL_KEYS" in body["message"]
    assert not Credential.objects.exists()


def test_permissions_are_the_credential_model_permissions(make_client, anon, keys):
    viewer = make_client(VIEW)
    manager = make_client(*MANAGE)
    manager.post("/api/v1/credentials/", {"name": "gh", "type": "bearer"}, format="json")

    assert anon.get("/api/v1/credentials/").status_code == 401
    assert make_client().get("/api/v1/credentials/").status_code == 403
    assert make_client().get("/api/v1/credentials/nope/").status_code == 403
    assert viewer.get("/api/v1/credentials/gh/").status_code == 200
    body = {"name": "x", "type": "bearer"}
    assert viewer.post("/api/v1/credentials/", body, format="json").status_code == 403
    assert viewer.patch("/api/v1/credentials/gh/", {}, format="json").status_code == 403
    assert viewer.post("/api/v1/credentials/gh/connect/").status_code == 403
    assert viewer.post("/api/v1/credentials/gh/disconnect/").status_code == 403
    assert manager.get("/api/v1/credentials/nope/").status_code == 404


def _consent(provider, url: str) -> dict[str, str]:
    params = dict(parse_qsl(urlsplit(url).query))
    answer = httpx.post(f"{provider.url}/authorize", data={**params, "decision": "approve"})
    location = answer.headers["location"]
    assert urlsplit(location).path == CALLBACK
    return dict(parse_qsl(urlsplit(location).query))


def test_connect_by_session_then_the_admin_callback_stores_the_tokens_and_disconnect(
    client, keys, provider, django_user_model
):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-12345678")
    client.force_login(user)  # the browser, logged in to the admin
    api = APIClient()
    api.force_login(user)  # the same session, through the API
    assert api.post("/api/v1/credentials/", _oauth_body(provider), format="json").status_code == 201
    api.cookies = client.cookies

    answer = api.post("/api/v1/credentials/gh/connect/")

    assert answer.status_code == 200, answer.json()
    url = answer.json()["authorize_url"]
    assert url.startswith(f"{provider.url}/authorize?")
    params = dict(parse_qsl(urlsplit(url).query))
    assert params["code_challenge_method"] == "S256"
    assert params["redirect_uri"] == f"http://testserver{CALLBACK}"
    back = client.get(CALLBACK, _consent(provider, url))
    assert back.status_code == 302
    shown = api.get("/api/v1/credentials/gh/").json()
    assert set(shown["secret_fields"]) == {"client_secret", "access_token", "refresh_token"}
    refresh = resolve_credential("gh").secret("refresh_token")

    done = api.post("/api/v1/credentials/gh/disconnect/")

    assert done.status_code == 200, done.json()
    assert "the refresh token was revoked at the provider" in done.json()["message"]
    assert done.json()["credential"]["secret_fields"] == ["client_secret"]
    assert provider.revoked == [refresh]
    for value in (*provider.issued, provider.client_secret):
        assert value.encode() not in answer.content + done.content


def test_connect_by_token_answers_the_admin_connect_page_which_begins_the_consent(
    make_client, client, keys, provider, django_user_model
):
    api = make_client(*MANAGE)
    api.post("/api/v1/credentials/", _oauth_body(provider), format="json")
    row = Credential.objects.get()

    answer = api.post("/api/v1/credentials/gh/connect/")

    assert answer.status_code == 200, answer.json()
    page = answer.json()["authorize_url"]
    assert page == f"http://testserver/admin/tools/credential/{row.pk}/connect/"
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw-12345678")
    client.force_login(user)  # the person's browser, logged in to the admin
    url = client.get(urlsplit(page).path)["Location"]
    back = client.get(CALLBACK, _consent(provider, url))
    assert back.status_code == 302
    assert resolve_credential("gh").secret("access_token") in provider.issued


def test_connect_and_disconnect_refuse_another_type_naming_it(make_client, keys):
    client = make_client(*MANAGE)
    client.post("/api/v1/credentials/", {"name": "gh", "type": "bearer"}, format="json")

    for action in ("connect", "disconnect"):
        body = assert_error(
            client.post(f"/api/v1/credentials/gh/{action}/"), 400, "credential_invalid"
        )
        assert body["details"][0]["path"] == "type"
        assert "is a bearer credential" in body["message"]
