"""``rotatecredentialkeys``: every credential re-encrypted with the first key, counted,
idempotent; a key that decrypts nothing stops it with nothing changed."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet, InvalidToken

from tools.credentials.store import resolve_credential, save_credential
from tools.models import Credential

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def test_rotation_with_two_keys_moves_every_credential_to_the_new_one(cli, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [OLD]
    save_credential(Credential(name="gh", type="bearer"), {"token": "ghp-rot-1"})
    save_credential(
        Credential(name="ledger", type="basic", username="svc"), {"password": "pw-rot-2"}
    )
    save_credential(Credential(name="unset", type="bearer"), {})
    settings.FLOWPILOT_CREDENTIAL_KEYS = [NEW, OLD]

    first = cli("rotatecredentialkeys")
    assert first.code == 0, first.err
    assert first.out.strip() == "re-encrypted 2 credential(s) with the first key; 0 already used it"
    again = cli("rotatecredentialkeys")
    assert again.out.strip() == (
        "re-encrypted 0 credential(s) with the first key; 2 already used it"
    )

    settings.FLOWPILOT_CREDENTIAL_KEYS = [NEW]  # the old key can go now
    assert resolve_credential("gh").secret("token") == "ghp-rot-1"
    assert resolve_credential("ledger").secret("password") == "pw-rot-2"
    for row in Credential.objects.exclude(secrets=""):
        with pytest.raises(InvalidToken):
            Fernet(OLD).decrypt(row.secrets.encode())


def test_a_credential_no_key_decrypts_fails_the_command_naming_it(cli, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = [OLD]
    save_credential(Credential(name="gh", type="bearer"), {"token": "ghp-rot-1"})
    before = Credential.objects.get().secrets
    settings.FLOWPILOT_CREDENTIAL_KEYS = [NEW]
    result = cli("rotatecredentialkeys")
    assert result.code == 1
    assert "credential 'gh' cannot be decrypted" in result.err
    assert "no credential was changed" in result.err
    assert Credential.objects.get().secrets == before


def test_without_a_key_it_says_what_to_set(cli, settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    save_credential(Credential(name="later", type="bearer"), {})
    assert cli("rotatecredentialkeys").out.startswith("re-encrypted 0")  # nothing sealed
    Credential.objects.filter(name="later").update(secrets="gAAAA-something")
    result = cli("rotatecredentialkeys")
    assert "no credential key is configured: set FLOWPILOT_CREDENTIAL_KEYS" in result.err


def test_generate_key_prints_a_fernet_key(cli):
    result = cli("rotatecredentialkeys", "--generate-key")
    assert Fernet(result.out.strip().encode())
