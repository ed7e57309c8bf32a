"""The credential admin: values typed once into password inputs, never shown again
(only "set" / "not set"), changed only when a new one is typed; refused without a key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.urls import reverse

from tools.credentials.store import resolve_credential
from tools.models import Credential

pytestmark = pytest.mark.django_db

TOKEN = "ghp-admin-5f4e3d2c1b"
PASSWORD = "pw-admin-0a9b8c"


@pytest.fixture
def admin(client, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [Fernet.generate_key().decode()]
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-12345678")
    client.force_login(user)
    return client


def _form(**fields):
    data = {
        "name": "github_app",
        "type": "bearer",
        "description": "",
        "location": "",
        "key_name": "",
        "username": "",
        "client_id": "",
        "token_url": "",
        "authorize_url": "",
        "scopes": "",
        "expires_at_0": "",
        "expires_at_1": "",
    }
    return {**data, **fields}


def _everything(client, row) -> bytes:
    """Every admin page of the credential: the list, the change page, its history."""
    pages = [
        reverse("admin:tools_credential_changelist"),
        reverse("admin:tools_credential_change", args=[row.pk]),
        reverse("admin:tools_credential_history", args=[row.pk]),
        reverse("admin:index"),
    ]
    found = b""
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        found += response.content
    return found


def test_a_value_typed_once_is_stored_encrypted_and_never_shown_again(admin):
    response = admin.post(reverse("admin:tools_credential_add"), _form(token=TOKEN))
    assert response.status_code == 302, response.content.decode()[:3000]
    row = Credential.objects.get()
    assert TOKEN not in row.secrets
    assert row.secret_fields == ["token"]
    assert resolve_credential("github_app").secret("token") == TOKEN

    shown = _everything(admin, row)
    assert TOKEN.encode() not in shown
    assert row.secrets.encode() not in shown  # not even the ciphertext
    assert b"token: set" in shown
    assert b'type="password"' in shown


def test_a_value_changes_only_when_a_new_one_is_typed(admin):
    admin.post(reverse("admin:tools_credential_add"), _form(token=TOKEN))
    row = Credential.objects.get()
    change = reverse("admin:tools_credential_change", args=[row.pk])
    response = admin.post(change, _form(description="the GitHub app", token=""))
    assert response.status_code == 302
    assert resolve_credential("github_app").secret("token") == TOKEN
    admin.post(change, _form(token="ghp-admin-new-777"))
    assert resolve_credential("github_app").secret("token") == "ghp-admin-new-777"
    admin.post(change, _form(unset=["token"]))
    row.refresh_from_db()
    assert (row.secrets, row.secret_fields) == ("", [])
    assert b"token: not set" in admin.get(change).content


def test_a_basic_credential_shows_its_username_and_hides_its_password(admin):
    form = _form(name="ledger", type="basic", username="svc-ledger", password=PASSWORD)
    assert admin.post(reverse("admin:tools_credential_add"), form).status_code == 302
    row = Credential.objects.get()
    shown = _everything(admin, row)
    assert b"svc-ledger" in shown
    assert PASSWORD.encode() not in shown
    assert b"password: set" in shown


def test_fields_that_do_not_fit_the_type_are_errors_and_the_value_is_not_echoed(admin):
    form = _form(type="basic", password=PASSWORD, token=TOKEN)  # no username; a bearer field
    response = admin.post(reverse("admin:tools_credential_add"), form)
    assert response.status_code == 200
    assert b"a basic credential needs username" in response.content
    assert b"token is not a secret of a basic credential" in response.content
    assert PASSWORD.encode() not in response.content
    assert TOKEN.encode() not in response.content
    assert not Credential.objects.exists()


def test_without_a_key_a_value_is_refused_with_what_to_set(admin, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    response = admin.post(reverse("admin:tools_credential_add"), _form(token=TOKEN))
    assert response.status_code == 200
    assert b"no credential key is configured: set FLOWPILOT_CREDENTIAL_KEYS" in response.content
    assert TOKEN.encode() not in response.content
    assert not Credential.objects.exists()


def test_the_list_shows_status_columns(admin):
    admin.post(reverse("admin:tools_credential_add"), _form(token=TOKEN))
    resolve_credential("github_app")  # a call marks it used
    content = admin.get(reverse("admin:tools_credential_changelist")).content
    for column in (b"last used at", b"expires at", b"needs reconnect", b"token: set"):
        assert column in content.lower()


def test_a_vault_credential_is_entered_as_where_it_is_and_shown_as_in_vault(admin):
    add = reverse("admin:tools_credential_add")
    form = _form(source="vault", vault_mount="kv", vault_path="apps/github", vault_key="pat")
    response = admin.post(add, form)
    assert response.status_code == 302, response.content.decode()[:3000]
    row = Credential.objects.get()
    assert (row.source, row.secrets, row.secret_fields) == ("vault", "", [])
    assert b"in Vault at kv/apps/github#pat" in _everything(admin, row)


def test_the_vault_form_refuses_a_typed_value_and_a_missing_path(admin):
    add = reverse("admin:tools_credential_add")
    typed = admin.post(add, _form(source="vault", vault_path="apps/github", token=TOKEN))
    assert typed.status_code == 200
    assert "a credential kept in Vault has no value here: change it in Vault" in (
        typed.content.decode()
    )
    no_path = admin.post(add, _form(source="vault", vault_path=""))
    assert "a credential kept in Vault needs vault_path" in no_path.content.decode()
    stray = admin.post(add, _form(vault_path="apps/github", token=TOKEN))
    assert "vault_path applies only to a credential kept in Vault" in stray.content.decode()
    assert not Credential.objects.exists()
    assert TOKEN.encode() not in typed.content
