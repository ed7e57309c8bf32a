"""What each credential type holds: the fields stored in clear, the secret ones.

A credential's clear fields say how it is sent (a header name, a username, a client
id, a token URL, scopes); its secret fields are encrypted (:mod:`tools.credentials.crypto`).
:func:`field_problems` is the one check of the clear fields, used by the admin form
and by :func:`tools.credentials.store.save_credential`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

CREDENTIAL_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""A credential's name: what ``auth: {credential: NAME}`` writes (``github_app``)."""
CLEAR_FIELDS = (
    "location", "key_name", "username", "client_id", "token_url", "authorize_url", "scopes",
    "revocation_url",
)  # fmt: skip
SECRET_FIELDS = ("value", "token", "password", "client_secret", "access_token", "refresh_token")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an RFC 9110 token
_URL = re.compile(r"^https?://[^/?#\s]+[^\s]*$")


@dataclass(frozen=True)
class Kind:
    """One type: its clear fields (``required``, ``optional``), its secret fields, and
    the secret fields a call needs (``call_secrets``)."""

    required: tuple[str, ...]
    optional: tuple[str, ...]
    secrets: tuple[str, ...]
    call_secrets: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "api_key": Kind(("key_name",), ("location",), ("value",), ("value",)),
    "bearer": Kind((), (), ("token",), ("token",)),
    "basic": Kind(("username",), (), ("password",), ("password",)),
    "oauth2_client_credentials": Kind(
        ("client_id", "token_url"),
        ("scopes",),
        ("client_secret", "access_token"),  # access_token: the shared current token
        ("client_secret",),
    ),
    "oauth2_authorization_code": Kind(
        ("client_id", "token_url", "authorize_url"),
        ("scopes", "revocation_url"),
        ("client_secret", "access_token", "refresh_token"),
        (),  # connected: an access or a refresh token (tools.credentials.consent)
    ),
    "header": Kind(("key_name",), (), ("value",), ("value",)),
    "query": Kind(("key_name",), (), ("value",), ("value",)),
}


def kind_of(type_: str) -> Kind:
    """The :class:`Kind` of ``type_``; a ``ValueError`` naming the types otherwise."""
    try:
        return KINDS[type_]
    except KeyError:
        raise ValueError(
            f"unknown credential type {type_!r}: expected one of {', '.join(KINDS)}"
        ) from None


def field_problems(type_: str, clear: Mapping[str, str]) -> dict[str, str]:
    """Each clear field of a credential of ``type_`` that is wrong, with why: a
    required one left empty, one that does not apply to the type, a bad header name,
    a URL that is not http(s)."""
    try:
        kind = kind_of(type_)
    except ValueError as exc:
        return {"type": str(exc)}
    found: dict[str, str] = {}
    for name in CLEAR_FIELDS:
        value = (clear.get(name) or "").strip()
        if name in kind.required and not value:
            found[name] = f"a {type_} credential needs {name}"
        elif value and name not in kind.required + kind.optional:
            found[name] = f"{name} does not apply to a {type_} credential"
    location = (clear.get("location") or "").strip()
    if location and location not in ("header", "query"):
        found["location"] = "location is header or query"
    key_name = (clear.get("key_name") or "").strip()
    sent_as_header = type_ == "header" or (type_ == "api_key" and location != "query")
    if key_name and sent_as_header and not _HEADER_NAME.match(key_name):
        found["key_name"] = f"{key_name!r} is not a header name (letters, digits, -_.!#$%&'*+^`|~)"
    for name in ("token_url", "authorize_url", "revocation_url"):
        value = (clear.get(name) or "").strip()
        if value and name not in found and not _URL.match(value):
            found[name] = f"{name} must be an http(s) URL, got {value!r}"
    return found


VAULT_FIELDS = ("vault_mount", "vault_path", "vault_key")
"""Where a credential kept in Vault has its value (clear: no secret)."""
_VAULT_SEGMENT = re.compile(r"^[A-Za-z0-9_.@=+-]+(/[A-Za-z0-9_.@=+-]+)*$")


def vault_secret_field(type_: str) -> str | None:
    """The one secret field a credential of ``type_`` reads from Vault (the value a
    person sets; an OAuth2 client's current access token, which flowpilot fetches, stays
    sealed in the row), or None when the type cannot be kept there (its tokens are
    written by a consent flow)."""
    kind = KINDS.get(type_)
    if kind is None or type_ == "oauth2_authorization_code" or len(kind.call_secrets) != 1:
        return None
    return kind.call_secrets[0]


def vault_problems(source: str, type_: str, fields: Mapping[str, str]) -> dict[str, str]:
    """Each Vault field that is wrong for ``source`` and ``type_``, with why: a Vault
    credential needs a mount and a path (letters, digits, ``_.-@=+``, ``/`` between
    segments) and a type with one secret value; an empty mount is ``secret``; a
    database one has no Vault field."""
    found: dict[str, str] = {}
    values = {name: (fields.get(name) or "").strip() for name in VAULT_FIELDS}
    if source != "vault":
        for name, value in values.items():
            if value:
                found[name] = f"{name} applies only to a credential kept in Vault"
        return found
    if type_ in KINDS and vault_secret_field(type_) is None:
        found["source"] = (
            f"a {type_} credential cannot be kept in Vault (its tokens are written by "
            "flowpilot): keep it in the database"
        )
    if not values["vault_path"]:
        found["vault_path"] = "a credential kept in Vault needs vault_path"
    for name in ("vault_mount", "vault_path"):
        if values[name] and not _VAULT_SEGMENT.match(values[name].strip("/")):
            found[name] = (
                f"{values[name]!r} is not a Vault {name.removeprefix('vault_')} (letters, "
                "digits, _ . - @ = +, segments separated by /)"
            )
    if values["vault_key"] and not re.match(r"^[^\s]+$", values["vault_key"]):
        found["vault_key"] = f"{values['vault_key']!r} is not a key (no spaces)"
    return found
