"""Saving a credential's values, reading one at call time, and the store as a
:class:`tools.secrets.SecretSource`.

Every read goes to the database (or, for a credential kept in HashiCorp Vault, to
Vault, through this process's short cache: :mod:`tools.credentials.vault`): a value
changed in the admin is what the next call sends, in every worker, with no restart
and no re-approval (which credential a tool uses is part of its definition; what the
credential holds is not). A call marks the credential used at most once a minute
(``last_used_at``), so calls do not each write.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from django.db import connections, router
from django.utils import timezone

from tools.credentials.crypto import reseal, seal, unseal
from tools.credentials.kinds import (
    CLEAR_FIELDS,
    VAULT_FIELDS,
    field_problems,
    kind_of,
    vault_problems,
    vault_secret_field,
)
from tools.credentials.vault import DEFAULT_MOUNT, VaultError, VaultRef, read_value
from tools.models import Credential
from tools.redaction import basic_token
from tools.shared_cache import shared_cache_retry

T = TypeVar("T")
USED_RESOLUTION = timedelta(minutes=1)
"""``last_used_at`` is written when it is older than this (one write a minute at most)."""


class CredentialInvalid(Exception):
    """Clear fields that do not fit the type, or secret fields it does not have."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        self.problems = dict(problems)
        super().__init__("; ".join(f"{k}: {v}" for k, v in sorted(self.problems.items())))


class UnknownCredential(LookupError):
    """No credential has this name; the message names it and the closest names."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.name = name
        self.message = f"no credential is named {name!r}{hint}"
        super().__init__(self.message)


@dataclass(frozen=True)
class ResolvedCredential:
    """One credential as a call uses it: its clear fields and its decrypted values
    (never in the repr)."""

    name: str
    type: str
    location: str = ""
    key_name: str = ""
    username: str = ""
    client_id: str = ""
    token_url: str = ""
    scopes: tuple[str, ...] = ()
    needs_reconnect: bool = False
    expires_at: datetime | None = None  # oauth2: when its stored access token expires
    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    source: str = "database"

    def secret(self, name: str) -> str:
        return self.values.get(name, "")

    def missing(self) -> list[str]:
        """The secret fields a call needs that are not set."""
        return [f for f in kind_of(self.type).call_secrets if not self.values.get(f)]


def save_credential(
    credential: Credential,
    new_values: Mapping[str, str],
    *,
    unset: Iterable[str] = (),
    keys: Sequence[str] | None = None,
) -> Credential:
    """Check ``credential``'s clear fields, seal its secret values and save it.

    ``new_values`` replaces the secret fields it names (an empty string leaves a field
    as it was); ``unset`` removes fields. Secret fields the type does not have are
    refused. Sealing needs a key: with none configured this raises
    ``CredentialKeyError`` and nothing is saved.
    """
    clear = {name: str(getattr(credential, name) or "") for name in CLEAR_FIELDS}
    problems = field_problems(credential.type, clear)
    source = credential.source or "database"
    vault = {name: str(getattr(credential, name) or "") for name in VAULT_FIELDS}
    problems.update(vault_problems(source, credential.type, vault))
    if source == "vault" and any(new_values.values()):
        problems["source"] = (
            "a credential kept in Vault has no value in the database: change it in Vault"
        )
    kind = kind_of(credential.type) if "type" not in problems else None
    typed = {k: v for k, v in new_values.items() if v}
    for name in [*typed, *unset]:
        if kind is not None and name not in kind.secrets:
            problems[name] = f"{name} is not a secret of a {credential.type} credential"
    if problems:
        raise CredentialInvalid(problems)
    assert kind is not None
    current = credential.secrets
    values = unseal(current, credential.name, keys) if current and (typed or unset) else None
    if source == "vault":  # nothing secret is kept here for it
        credential.secrets, credential.secret_fields = "", []
        credential.vault_mount = vault["vault_mount"].strip().strip("/") or DEFAULT_MOUNT
        credential.vault_path = vault["vault_path"].strip().strip("/")
        credential.vault_key = vault["vault_key"].strip()
    elif values is not None or typed:
        merged = {k: v for k, v in (values or {}).items() if k in kind.secrets}
        merged.update(typed)
        for name in unset:
            merged.pop(name, None)
        credential.secrets = seal(merged, keys) if merged else ""
        credential.secret_fields = sorted(merged)
        if typed:
            credential.needs_reconnect = False
    credential.full_clean(exclude=["secrets", "secret_fields"])
    credential.save()
    return credential


def resolve_credential(
    name: str, *, keys: Sequence[str] | None = None, now: datetime | None = None
) -> ResolvedCredential:
    """Credential ``name`` as it is now, decrypted; marks it used (once a minute).

    Raises ``UnknownCredential`` (with the closest name) or ``CredentialKeyError``.
    """
    try:
        row = shared_cache_retry(Credential.objects.filter(name=name).first)
        if row is None:
            raise UnknownCredential(name, Credential.objects.values_list("name", flat=True))
        moment = timezone.now() if now is None else now
        if row.last_used_at is None or row.last_used_at < moment - USED_RESOLUTION:
            used = Credential.objects.filter(pk=row.pk)
            shared_cache_retry(lambda: used.update(last_used_at=moment))
    finally:
        _release_thread_connection()
    values = unseal(row.secrets, row.name, keys) if row.secrets else {}
    if row.source == "vault":  # its value from Vault; a fetched OAuth2 token from the row
        values = {**values, **vault_values(row)}
    return ResolvedCredential(
        name=row.name,
        type=row.type,
        location=row.location or "header",
        key_name=row.key_name,
        username=row.username,
        client_id=row.client_id,
        token_url=row.token_url,
        scopes=tuple(row.scopes.split()),
        needs_reconnect=row.needs_reconnect,
        expires_at=row.expires_at,
        values=values,
        source=row.source,
    )


def vault_ref(row: Credential) -> VaultRef | None:
    """Where the value of ``row`` is in Vault (None: it is not kept in Vault)."""
    secret = vault_secret_field(row.type)
    if row.source != "vault" or secret is None:
        return None
    return VaultRef(
        credential=row.name,
        mount=row.vault_mount or DEFAULT_MOUNT,
        path=row.vault_path,
        key=row.vault_key or secret,
    )


def vault_values(row: Credential) -> dict[str, str]:
    """The values of credential ``row`` kept in Vault, read now (or from this process's
    cache); a ``VaultError`` naming the credential and the Vault path otherwise."""
    ref = vault_ref(row)
    secret = vault_secret_field(row.type)
    if ref is None or secret is None:
        raise VaultError(
            f"credential {row.name!r}: a {row.type} credential cannot be kept in Vault"
        )
    return {secret: read_value(ref)}


def store_oauth2_tokens(
    credential: Credential,
    access_token: str,
    refresh_token: str,
    expires_at: datetime | None,
    *,
    keys: Sequence[str] | None = None,
) -> Credential:
    """Seal an OAuth2 access token (and refresh token) into ``credential`` and clear
    ``needs_reconnect``. An empty ``refresh_token`` removes the stored one."""
    credential.expires_at = expires_at
    unset = [] if refresh_token else ["refresh_token"]
    values = {"access_token": access_token, "refresh_token": refresh_token}
    return save_credential(credential, values, unset=unset, keys=keys)


def clear_oauth2_tokens(credential: Credential, *, keys: Sequence[str] | None = None) -> None:
    """Remove ``credential``'s access and refresh tokens (its client secret stays)."""
    credential.expires_at = None
    save_credential(credential, {}, unset=["access_token", "refresh_token"], keys=keys)


def _release_thread_connection() -> None:
    """Close the connection a step thread opened for the read (a run's step threads
    hold none between statements, as ``tools.breaker.run_view``'s do); the main
    thread, and a thread inside a transaction, keep theirs."""
    if threading.current_thread() is threading.main_thread():
        return
    connection = connections[router.db_for_read(Credential)]
    if not connection.in_atomic_block:
        connection.close()


def credential_names() -> list[str]:
    return list(Credential.objects.order_by("name").values_list("name", flat=True))


def rotate_keys(keys: Sequence[str] | None = None) -> tuple[int, int]:
    """Encrypt every credential's values again with the first key: (re-encrypted,
    already current). Each row is written only when it changes, so running it again
    re-encrypts nothing. A value no key decrypts raises ``CredentialKeyError``
    naming the credential, before any row is written."""
    rows = list(Credential.objects.exclude(secrets="").order_by("name"))
    changed = []
    for row in rows:
        token = reseal(row.secrets, row.name, keys)
        if token is not None:
            row.secrets = token
            changed.append(row)
    Credential.objects.bulk_update(changed, ["secrets"])
    return len(changed), len(rows) - len(changed)


def credential_secret_values(resolved: ResolvedCredential) -> list[str]:
    """What is secret in ``resolved``: its values, and the base64 ``user:password``
    an ``Authorization: Basic`` header carries for it (basic; the OAuth2 client)."""
    found = [v for v in resolved.values.values() if v]
    client = (resolved.client_id, resolved.secret("client_secret"))
    pairs = {
        "basic": (resolved.username, resolved.secret("password")),
        "oauth2_client_credentials": client,
        "oauth2_authorization_code": client,
    }
    user, password = pairs.get(resolved.type, ("", ""))
    if password:
        found.append(basic_token(user, password))
    return found


@dataclass(frozen=True)
class StoredCredentials:
    """The credential store as a ``SecretSource``: every value of the stored
    credentials named ``names`` (None: of every one), decrypted when asked (a run's
    start, the planner, a failure report). No name: no statement."""

    names: frozenset[str] | None = None
    keys: Sequence[str] | None = None

    def values(self) -> Iterator[str]:
        if self.names is not None and not self.names:
            return
        rows = Credential.objects.exclude(secrets="", source="database").order_by("name")
        if self.names is not None:
            rows = rows.filter(name__in=sorted(self.names))
        for row in rows:
            if row.source == "vault":
                try:  # a value Vault does not give now cannot be sent: the call says why
                    values = vault_values(row)
                except VaultError:
                    continue
            else:
                values = unseal(row.secrets, row.name, self.keys)
            resolved = ResolvedCredential(
                name=row.name,
                type=row.type,
                username=row.username,
                client_id=row.client_id,
                values=values,
            )
            yield from credential_secret_values(resolved)
