"""tools.credentials.crypto: Fernet keys from the setting, sealing and re-sealing."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from tests.tools.credentials.conftest import KEY_A, KEY_B
from tools.credentials.crypto import (
    CredentialKeyError,
    fernets,
    generate_key,
    reseal,
    seal,
    unseal,
)


def test_no_key_is_a_clear_error_saying_how_to_make_one(settings):
    settings.FLOWPILOT_CREDENTIAL_KEYS = []
    with pytest.raises(CredentialKeyError, match="no credential key is configured") as caught:
        seal({"token": "t-1"})
    assert "FLOWPILOT_CREDENTIAL_KEYS" in caught.value.message
    assert "Fernet.generate_key()" in caught.value.message


def test_a_malformed_key_is_named_by_its_position():
    with pytest.raises(CredentialKeyError, match="key 2 of 2 is not a Fernet key"):
        fernets([KEY_A, "not-a-key"])


def test_values_are_sealed_as_ciphertext_and_read_back(keys):
    token = seal({"token": "tok-secret-1", "password": "pw-é"})
    assert "tok-secret-1" not in token
    assert "pw-" not in token
    assert Fernet(KEY_A).decrypt(token.encode())  # encrypted with the first key
    assert unseal(token, "gh") == {"token": "tok-secret-1", "password": "pw-é"}
    assert unseal("", "gh") == {}


def test_a_value_no_key_decrypts_is_refused_naming_the_credential():
    token = seal({"token": "x"}, [KEY_B])
    with pytest.raises(CredentialKeyError, match="credential 'gh' cannot be decrypted"):
        unseal(token, "gh", [KEY_A])
    altered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with pytest.raises(CredentialKeyError, match="cannot be decrypted"):
        unseal(altered, "gh", [KEY_B])
    with pytest.raises(CredentialKeyError, match="cannot be decrypted"):
        reseal(token, "gh", [KEY_A])


def test_reseal_moves_a_value_to_the_first_key_once():
    old = seal({"token": "x"}, [KEY_B])
    new = reseal(old, "gh", [KEY_A, KEY_B])
    assert new is not None
    assert new != old
    assert unseal(new, "gh", [KEY_A]) == {"token": "x"}
    assert reseal(new, "gh", [KEY_A, KEY_B]) is None  # already under the first key


def test_a_generated_key_is_a_fernet_key():
    key = generate_key()
    assert len(key) == 44
    assert fernets([key])
