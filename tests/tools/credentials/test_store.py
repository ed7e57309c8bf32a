"""tools.credentials.store: saving values sealed, reading one at call time, the store
as a secret source, and re-encryption with the first key."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from tests.tools.credentials.conftest import KEY_A, KEY_B
from tools.credentials.crypto import CredentialKeyError, generate_key, seal, unseal
from tools.credentials.store import (
    CredentialInvalid,
    StoredCredentials,
    UnknownCredential,
    credential_names,
    resolve_credential,
    rotate_keys,
    save_credential,
)
from tools.models import Credential
from tools.secrets import basic_token

pytestmark = pytest.mark.django_db


def _basic(name="ledger", **values):
    return save_credential(
        Credential(name=name, type="basic", username="svc"), values or {"password": "pw-9f8e7d"}
    )


def test_a_saved_credential_holds_ciphertext_and_names_its_set_fields(keys):
    row = _basic()
    row.refresh_from_db()
    assert "pw-9f8e7d" not in row.secrets
    assert row.secret_fields == ["password"]
    assert unseal(row.secrets, row.name) == {"password": "pw-9f8e7d"}


def test_an_empty_new_value_keeps_the_stored_one_a_typed_one_replaces_it(keys):
    row = _basic()
    before = row.secrets
    row.description = "the ledger's service account"
    save_credential(row, {"password": ""})
    assert row.secrets == before  # not even re-encrypted
    save_credential(row, {"password": "pw-new-123"})
    assert unseal(row.secrets, row.name) == {"password": "pw-new-123"}
    save_credential(row, {}, unset=["password"])
    assert (row.secrets, row.secret_fields) == ("", [])


def test_a_typed_value_clears_needs_reconnect(keys):
    row = _basic()
    Credential.objects.filter(pk=row.pk).update(needs_reconnect=True)
    row.refresh_from_db()
    save_credential(row, {"password": "pw-fresh-1"})
    row.refresh_from_db()
    assert row.needs_reconnect is False


def test_no_key_refuses_to_save_a_value_and_saves_nothing(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    with pytest.raises(CredentialKeyError, match="no credential key is configured"):
        _basic()
    assert not Credential.objects.exists()
    save_credential(Credential(name="later", type="bearer"), {})  # no value: no key needed
    assert Credential.objects.get().secrets == ""


def test_fields_that_do_not_fit_the_type_are_refused(keys):
    with pytest.raises(CredentialInvalid) as caught:
        save_credential(Credential(name="gh", type="bearer", username="x"), {"password": "p"})
    assert caught.value.problems == {
        "username": "username does not apply to a bearer credential",
        "password": "password is not a secret of a bearer credential",
    }
    with pytest.raises(Exception, match="name"):
        save_credential(Credential(name="Not A Slug", type="bearer"), {"token": "t"})
    assert not Credential.objects.exists()


def test_a_call_reads_the_credential_as_it_is_now_and_marks_it_used_once_a_minute(
    keys, django_assert_num_queries
):
    row = save_credential(Credential(name="gh", type="bearer"), {"token": "tok-1"})
    now = timezone.now()
    with django_assert_num_queries(2):  # read it, mark it used
        first = resolve_credential("gh", now=now)
    assert first.secret("token") == "tok-1"
    assert "tok-1" not in repr(first)
    with django_assert_num_queries(1):  # used less than a minute ago: no write
        resolve_credential("gh", now=now + timedelta(seconds=59))
    save_credential(row, {"token": "tok-2"})
    assert resolve_credential("gh", now=now + timedelta(seconds=61)).secret("token") == "tok-2"
    row.refresh_from_db()
    assert row.last_used_at == now + timedelta(seconds=61)


def test_an_unknown_name_says_which_names_are_close(keys):
    save_credential(Credential(name="github_app", type="bearer"), {"token": "t"})
    with pytest.raises(UnknownCredential, match=r"'github_ap' \(did you mean 'github_app'\?\)"):
        resolve_credential("github_ap")
    with pytest.raises(UnknownCredential) as caught:
        resolve_credential("slack")
    assert caught.value.message == "no credential is named 'slack'"
    assert credential_names() == ["github_app"]


def test_the_store_as_a_secret_source_yields_every_value_and_the_basic_tokens(keys):
    _basic()
    save_credential(
        Credential(
            name="crm",
            type="oauth2_client_credentials",
            client_id="app-7",
            token_url="https://auth.example/token",
        ),
        {"client_secret": "cs-443322"},
    )
    save_credential(Credential(name="empty", type="bearer"), {})
    assert list(StoredCredentials(names=frozenset({"ledger"})).values()) == [
        "pw-9f8e7d",
        basic_token("svc", "pw-9f8e7d"),
    ]
    assert sorted(StoredCredentials().values()) == sorted(
        [
            "cs-443322",
            basic_token("app-7", "cs-443322"),
            "pw-9f8e7d",
            basic_token("svc", "pw-9f8e7d"),
        ]
    )


def test_rotation_reencrypts_with_the_first_key_and_is_idempotent(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    _basic("one")
    _basic("two")
    save_credential(Credential(name="three", type="bearer"), {})
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_B, KEY_A]
    _basic("four")  # already under the new key
    assert rotate_keys() == (2, 1)
    assert rotate_keys() == (0, 3)
    for row in Credential.objects.exclude(secrets=""):
        assert unseal(row.secrets, row.name, [KEY_B]) == {"password": "pw-9f8e7d"}


def test_rotation_that_cannot_decrypt_a_credential_names_it_and_writes_nothing(settings):
    Credential.objects.create(name="lost", type="bearer", secrets=seal({"token": "x"}, [KEY_B]))
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    kept = _basic("kept")  # sorted before "lost": re-encrypted first, then dropped
    settings.FLOWPILOT_CREDENTIAL_KEYS = [generate_key(), KEY_A]
    with pytest.raises(CredentialKeyError, match="credential 'lost' cannot be decrypted"):
        rotate_keys()
    assert Credential.objects.get(name="kept").secrets == kept.secrets


@pytest.mark.django_db(transaction=True)
def test_a_step_thread_keeps_no_connection_open_after_its_read(keys):
    save_credential(Credential(name="gh", type="bearer"), {"token": "tok-thread-1"})
    seen = {}

    def step():
        seen["token"] = resolve_credential("gh").secret("token")
        seen["open"] = connections["default"].connection is not None

    thread = threading.Thread(target=step)
    thread.start()
    thread.join()
    default = connections["default"]
    in_memory = default.vendor == "sqlite" and default.is_in_memory_db()
    assert seen == {"token": "tok-thread-1", "open": in_memory}  # Django keeps those open
    resolve_credential("gh")  # the main thread keeps its own
    assert connections["default"].connection is not None
