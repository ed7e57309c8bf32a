"""tools.credentials.kinds: what each type holds, and the check of its clear fields."""

from __future__ import annotations

import pytest

from tools.credentials.kinds import KINDS, field_problems, kind_of
from tools.models import CredentialType


def test_every_model_type_has_a_kind_and_every_kind_a_model_type():
    assert set(KINDS) == {choice.value for choice in CredentialType}


def test_an_unknown_type_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown credential type 'ssh'.*api_key"):
        kind_of("ssh")
    assert "unknown credential type" in field_problems("ssh", {})["type"]


def test_required_fields_are_named_and_fields_of_other_types_refused():
    assert field_problems("basic", {}) == {"username": "a basic credential needs username"}
    assert field_problems("bearer", {"username": "x"}) == {
        "username": "username does not apply to a bearer credential"
    }
    assert field_problems("oauth2_client_credentials", {"client_id": "c"}) == {
        "token_url": "a oauth2_client_credentials credential needs token_url"
    }
    assert field_problems("api_key", {"key_name": "X-Key", "location": "query"}) == {}
    assert field_problems("api_key", {"key_name": "X-Key"}) == {}  # a header by default


def test_header_names_locations_and_urls_are_checked():
    assert "not a header name" in field_problems("header", {"key_name": "X Key"})["key_name"]
    assert field_problems("query", {"key_name": "api key"}) == {}  # a query name is encoded
    bad = field_problems("api_key", {"key_name": "k", "location": "cookie"})
    assert bad == {"location": "location is header or query"}
    wrong = field_problems(
        "oauth2_client_credentials", {"client_id": "c", "token_url": "ftp://x.example/t"}
    )
    assert wrong == {"token_url": "token_url must be an http(s) URL, got 'ftp://x.example/t'"}


def test_vault_fields_fit_the_source_and_a_type_with_one_value():
    from tools.credentials.kinds import vault_problems, vault_secret_field

    assert vault_secret_field("bearer") == "token"
    assert vault_secret_field("oauth2_client_credentials") == "client_secret"
    assert vault_secret_field("oauth2_authorization_code") is None
    assert vault_problems("vault", "bearer", {"vault_path": "apps/github"}) == {}
    assert vault_problems("vault", "bearer", {"vault_path": "apps//x"}) == {
        "vault_path": "'apps//x' is not a Vault path (letters, digits, _ . - @ = +, "
        "segments separated by /)"
    }
    assert vault_problems("vault", "bearer", {"vault_path": "a", "vault_key": "a b"}) == {
        "vault_key": "'a b' is not a key (no spaces)"
    }
    assert set(vault_problems("database", "bearer", {"vault_mount": "kv"})) == {"vault_mount"}
